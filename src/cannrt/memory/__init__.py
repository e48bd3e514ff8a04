"""memory layer of cannrt."""
