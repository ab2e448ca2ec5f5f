"""gather algorithms (being written)."""
