"""barrier algorithms (being written)."""
