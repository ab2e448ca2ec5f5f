"""Where in the user's program something happened: frames of their files only.

A student's program fails inside the simulator's frames (the MPI layer, SimPy, greenlet);
the report shows only the frames of the program's own files, innermost last, as Python
would print them for the same program under ``mpiexec``.
"""

from __future__ import annotations

import linecache
import traceback
from pathlib import Path
from types import FrameType

import numpy as np

#: mpisim itself and the installed libraries: never the user's code, even if their folder holds it.
_OURS = (Path(__file__).resolve().parents[1], Path(np.__file__).resolve().parents[1])


def is_user_file(filename: str, folder: Path) -> bool:
    """True for a file of the program: under its folder and not mpisim's or a library's."""
    path = Path(filename).resolve()
    return path.is_relative_to(folder) and not any(path.is_relative_to(ours) for ours in _OURS)


def user_traceback(exc: BaseException, folder: Path) -> str:
    """The traceback of *exc* in the program's files, or '' if none of its frames is theirs."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if is_user_file(f.filename, folder)]
    if not frames:
        return ""
    return "\nTraceback (most recent call last):\n" + "".join(traceback.format_list(frames)).rstrip("\n")


def suspended_at(frame: FrameType | None, folder: Path) -> str:
    """``ring.py:14: comm.send(x, dest=1)``: the innermost line of the program in a suspended stack."""
    while frame is not None:
        name = frame.f_code.co_filename
        if is_user_file(name, folder):
            line = linecache.getline(name, frame.f_lineno).strip()
            return f"{Path(name).name}:{frame.f_lineno}: {line}" if line else f"{Path(name).name}:{frame.f_lineno}"
        frame = frame.f_back
    return ""
