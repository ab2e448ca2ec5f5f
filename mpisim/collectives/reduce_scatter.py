"""reduce_scatter algorithms (being written)."""
