"""acl layer of cannrt."""
