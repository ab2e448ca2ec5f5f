"""Wall-clock benchmarks of mpisim internals; run each module with ``python -m benchmarks.<name>``."""
