"""allgather algorithms (being written)."""
