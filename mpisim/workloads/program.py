"""program workload (being written)."""
