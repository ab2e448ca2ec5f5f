"""training workload (being written)."""
