"""bcast algorithms (being written)."""
