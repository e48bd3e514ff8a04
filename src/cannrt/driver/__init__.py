"""driver layer of cannrt."""
