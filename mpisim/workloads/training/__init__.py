"""The ``training`` workload: one training iteration, data-parallel or hybrid-parallel, as one path.

``config`` (the hybrid form's YAML) and ``ddp`` (the data-parallel form's, tp = pp = 1) are read
into one :class:`~mpisim.workloads.training.plan.Job` -- ``model``, ``layout``, ``schedule``,
``memory`` and ``buckets`` are its concepts -- which ``play`` runs rank by rank and ``workload``
turns into a row. Importing the package registers the kind.
"""

from mpisim.workloads.training import workload  # noqa: F401  (registration)
