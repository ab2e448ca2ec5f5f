"""``python -m mpisim`` runs the command-line interface (see :mod:`mpisim.cli`)."""

from mpisim.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
