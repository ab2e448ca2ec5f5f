"""p2p workload (being written)."""
