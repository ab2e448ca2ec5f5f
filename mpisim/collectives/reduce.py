"""reduce algorithms (being written)."""
