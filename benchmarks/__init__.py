"""Wall-clock benchmarks of mpisim: ``python -m benchmarks`` runs them all (see benchmarks/README.md).

Each module also runs alone, ``python -m benchmarks.<name>`` (or one case of it with
``--case NAME``), and prints its figures with the command that reproduces each.
"""
