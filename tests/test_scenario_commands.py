"""Every command written in a scenario's comments runs, with the exit code it states.

A scenario's header teaches with commands (``# Run:   mpisim run scenarios/x.yaml``, ``# Try:
...``). Each comment line holding ``mpisim ...`` is a command; a trailing backslash continues it
on the next comment line; ``# exit N`` after it states its exit code (0 otherwise). They run
from a scratch directory that sees the repository's ``scenarios/`` (so ``-o out/...`` writes
there), through the same entry point as the ``mpisim`` command.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from mpisim.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: A command line: ``mpisim <subcommand> ...`` at the start, after an optional ``Run:``-style label.
COMMAND = re.compile(r"^(?:[A-Z][a-z]+:\s+)?(mpisim (?:run|check|list|report|explain|exec|calibrate)\b.*)")


def commands(path: Path) -> list[tuple[str, int]]:
    """Return (command, expected exit code) for each command in *path*'s comments."""
    found, pending = [], ""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            continue
        text = line.lstrip("#").strip()
        if pending:
            text = pending + " " + text
            pending = ""
        else:
            match = COMMAND.match(text)
            if match is None:
                continue
            text = match.group(1)
        if text.endswith("\\"):
            pending = text[:-1].strip()
            continue
        command, _, note = text.partition("   #")
        code = re.search(r"\bexit (\d)\b", note)
        found.append((command.strip(), int(code.group(1)) if code else 0))
    return found


CASES = [(path.name, command, code) for path in sorted((ROOT / "scenarios").glob("*.yaml"))
         for command, code in commands(path)]


def test_every_scenario_teaches_with_a_run_command():
    named = {name for name, _, _ in CASES}
    assert named == {path.name for path in (ROOT / "scenarios").glob("*.yaml")}


@pytest.mark.parametrize(("scenario", "command", "code"), CASES, ids=[f"{n}:{c[12:70]}" for n, c, _ in CASES])
def test_the_command_runs_with_the_exit_code_it_states(scenario, command, code, tmp_path, monkeypatch):
    (tmp_path / "scenarios").symlink_to(ROOT / "scenarios")
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(command)
    assert argv[0] == "mpisim"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        got = main(argv[1:])
    assert got == code, f"{command}\nexit {got}, expected {code}\n{err.getvalue()[-2000:]}"
