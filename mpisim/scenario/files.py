"""Writing a file so that readers see the old one or the new one, never half of one.

Results, baselines, presets and sweep files are read by other programs (and by ``--resume``)
while mpisim may be killed at any moment. :func:`write_atomic` writes to a temporary file in the
same directory, flushes it to disk and renames it over the target in one ``os.replace``, which
POSIX makes atomic within a file system. The new file gets the mode the old one had, or the one a
plain ``open()`` would give it.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def write_atomic(path: str | os.PathLike[str], text: str | bytes) -> None:
    """Write *text* to *path* so that readers see the old file or the new one, never half of one.

    The text goes to a temporary file in the same directory, is flushed to disk, and then
    replaces *path* in one ``os.replace``. On any error the temporary file is removed and
    *path* is left as it was. Raises OSError if the directory is not writable.
    """
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        # mkstemp makes a private (0600) file; the result gets the mode a plain open() would give
        # it, or keeps the mode of the file it replaces.
        os.fchmod(fd, _mode_for(target))
        binary = isinstance(text, bytes)
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else "utf-8",
                       newline=None if binary else "") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
