"""scikit-learn-compatible estimators (they use the public API only)."""

__all__: list[str] = []
