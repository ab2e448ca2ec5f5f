"""collective workload (being written)."""
