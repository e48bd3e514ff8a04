"""tools layer of cannrt."""
