"""runtime layer of cannrt."""
