"""``python -m mpisim.validation``: write (or ``--check``) reports/validation.md; see :mod:`.published`."""

import sys

from mpisim.validation.published import main

sys.exit(main())
