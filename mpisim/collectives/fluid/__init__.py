"""Collective fidelity: the twins that time a whole collective call without sending its messages.

At ``fidelity: collective`` with size-only data an algorithm's call is timed by its twin,
once its last rank has joined (:func:`mpisim.collectives.calls.join_call`):

* :mod:`.mpi_ring` -- MPI's rings and the dissemination barrier as step programs;
* :mod:`.tree` -- pipelined trees (MPI's and NCCL's) as one flow per tree edge;
* :mod:`.pipeline` -- a tree program of several segments run as a fluid until its period shows;
* :mod:`.nccl_ring` -- NCCL's rings as one pipelined flow per hop of every channel.
"""
