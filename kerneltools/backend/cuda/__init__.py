"""kerneltools/backend/cuda."""
