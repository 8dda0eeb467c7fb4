"""kerneltools/backend/cpu."""
