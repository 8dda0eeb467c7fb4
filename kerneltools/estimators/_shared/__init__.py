"""kerneltools/estimators/_shared."""
