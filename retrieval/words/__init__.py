"""Word lists: one module per language resource, each list with its source and its use."""
