"""Running ``mpisim`` in-process for the hostile-input tests: exit code, stdout, stderr."""

from __future__ import annotations

import contextlib
import io

from mpisim.cli import main


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def one_line_exit_2(code: int, err: str, *needles: str) -> None:
    """The promise for malformed input: exit 2, one line, no traceback, naming what is wrong."""
    assert code == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
