"""kerneltools/_utils."""
