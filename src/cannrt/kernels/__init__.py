"""kernels layer of cannrt."""
