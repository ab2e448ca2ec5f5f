"""scatter algorithms (being written)."""
