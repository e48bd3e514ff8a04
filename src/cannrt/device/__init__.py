"""device layer of cannrt."""
