"""The engine: formula IR, operations, reductions, autodiff and backends.

Private to kerneltools; the estimators use the public API only.
"""
