"""mpisim: a discrete-event simulator of MPI communication and its cost."""
