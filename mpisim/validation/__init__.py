"""Validation: the simulator against published measurements and against itself.

* :mod:`.published` -- every published measurement (``scenarios/validation/``) against its
  prediction, the closed forms and the 300M-parameter examples: ``python -m mpisim.validation``
  writes ``reports/validation.md`` (``-o FILE``, ``--check``).
* :mod:`.fidelity` -- collective fidelity against message fidelity for every registered algorithm:
  ``python -m mpisim.validation.fidelity`` writes ``reports/validation-fidelity.json``.
* :mod:`.sweeps` -- smoothness of time against bandwidth and size:
  ``python -m mpisim.validation.sweeps`` writes ``reports/validation-sweeps.json`` and its figure.

The package imports nothing itself, so ``python -m mpisim.validation.fidelity`` runs its module once.
"""
