"""kerneltools/ot."""
