"""kerneltools/estimators/neighbors/search."""
