"""The README's examples run: its scenarios load and run, the files its commands name exist, and
every ``mpisim`` command of its bash blocks runs as written, with the exit code it states.

A README command is a line of a ```` ```bash ```` block that starts with ``mpisim``; ``# exit N``
after it states its exit code (0 otherwise). Each must be one command (no shell pipeline: a
``|`` between words is not "or"), must parse, and must run. To keep the suite fast, a command is
run here only when no other test runs it: one that a scenario's comments also state (the same
arguments up to ``-o DIR`` and ``--json``) runs in tests/test_scenario_commands.py, unless a
later command of its block reads its output directory; the 100,000-rank ring runs in the last
test below; a Dask cluster is not at hand (the executor has tests/scenario/test_sweep.py) and
``--update-expect`` would rewrite a shipped file (tests/test_golden.py runs it on a copy). The
rest run block by block, in order, from a scratch directory that sees ``scenarios/`` and
``reports/``, through the same entry point as the ``mpisim`` command.
"""

from __future__ import annotations

import contextlib
import glob
import io
import re
import shlex
from pathlib import Path

import pytest
import yaml

from mpisim.cli import build_parser, main
from mpisim.scenario import load_dict, run_scenario
from tests.test_scenario_commands import CASES as SCENARIO_CASES

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
#: Shell syntax that would make a README line more than one mpisim command.
SHELL_OPERATORS = {"|", "||", "&", "&&", ";", ";;", "<", ">", ">>", "(", ")"}


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def shell_words(line: str) -> list[str]:
    """Split *line* as a POSIX shell would, comments dropped, operators (``|``, ``;``...) as words of their own."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def readme_commands() -> list[tuple[int, str, int]]:
    """Return (bash block index, command line, stated exit code) of every mpisim command in the README."""
    found = []
    for index, block in enumerate(code_blocks("bash")):
        for line in block.splitlines():
            if line.startswith("mpisim "):
                code = re.search(r"#[^'\"]*\bexit (\d)\b[^'\"]*$", line)
                found.append((index, line.strip(), int(code.group(1)) if code else 0))
    return found


def _essential(argv: list[str]) -> list[str]:
    """*argv* without what changes only where the output goes (``-o DIR``, ``--json``)."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word in ("-o", "--output"):
            skip = True
        elif word != "--json":
            out.append(word)
    return out


def _output_dir(argv: list[str]) -> str | None:
    for flag in ("-o", "--output"):
        if flag in argv[:-1]:
            return argv[argv.index(flag) + 1].rstrip("/")
    return None


#: Commands a scenario's comments state, with their exit codes (run by tests/test_scenario_commands.py).
_STATED_IN_SCENARIOS = {tuple(_essential(shlex.split(command))): code for _, command, code in SCENARIO_CASES}


def why_not_run_here(argv: list[str], code: int, later: list[list[str]]) -> str:
    """Return where *argv* is run instead ('' if this module runs it); *later* are the block's next commands."""
    if "--update-expect" in argv:
        return "rewrites a shipped scenario: tests/test_golden.py runs --update-expect on a copy"
    executor = argv[argv.index("--executor") + 1] if "--executor" in argv[:-1] else ""
    if executor.startswith("dask"):
        return "needs a Dask cluster: tests/scenario/test_sweep.py runs the executor"
    if any("topology.nodes=100000" in word for word in argv):
        return "run by test_the_readme_collective_fidelity_command_runs_what_the_message_path_refuses"
    out = _output_dir(argv)
    read_later = out is not None and any(word.rstrip("/") == out for words in later for word in words)
    if _STATED_IN_SCENARIOS.get(tuple(_essential(argv))) == code and not read_later:
        return "stated in a scenario's comments: tests/test_scenario_commands.py runs it"
    return ""


def _plan() -> dict[int, list[tuple[str, int, str]]]:
    """Per bash block: (command, stated exit code, why it is not run here or '') in README order."""
    commands = readme_commands()
    plan: dict[int, list[tuple[str, int, str]]] = {}
    for i, (block, command, code) in enumerate(commands):
        later = [shell_words(c) for b, c, _ in commands[i + 1:] if b == block]
        plan.setdefault(block, []).append((command, code, why_not_run_here(shell_words(command), code, later)))
    return plan


PLAN = _plan()


@pytest.mark.slow  # runs every scenario the README names
def test_the_readme_scenarios_run_and_meet_their_expectations():
    blocks = [b for b in code_blocks("yaml") if "workload:" in b]
    assert len(blocks) >= 2, "the README shows a scenario and a training scenario"
    for block in blocks:
        result = run_scenario(load_dict(yaml.safe_load(block)))
        assert result.expectations, "each README scenario should show an expectation"
        assert all(e["passed"] for e in result.expectations), result.expectations


def test_every_file_a_readme_command_names_exists():
    named = []
    for block in code_blocks("bash"):
        for line in block.splitlines():
            words = shlex.split(line.split("#")[0]) if line.strip() else []
            named += [w for w in words if w.endswith((".yaml", ".py")) and "/" in w]
    assert named, "the README should show commands with scenario files"
    missing = [w for w in named if not (ROOT / w).exists()]
    assert not missing, f"README names files that do not exist: {missing}"


def test_the_setup_commands_are_the_install_and_the_test_command():
    setup = code_blocks("bash")[0].strip().splitlines()
    assert len(setup) == 2
    assert "pip install" in setup[0] and "mpisim run scenarios/" in setup[0]
    assert "pytest" in setup[1]


@pytest.mark.slow  # runs mpisim in subprocesses
def test_the_readme_collective_fidelity_command_runs_what_the_message_path_refuses():
    """The 100000-rank ring: refused at message fidelity (exit 2), a step program at collective fidelity."""
    import subprocess
    import sys

    lines = [line.split("#")[0].strip() for block in code_blocks("bash") for line in block.splitlines()]
    refused = next(line for line in lines if "topology.nodes=100000" in line and "fidelity=message" in line)
    fast = next(line for line in lines if "topology.nodes=100000" in line and "fidelity=collective" in line)
    stderr = {}
    for command, code in ((refused, 2), (fast, 0)):
        words = shlex.split(command)
        assert words[0] == "mpisim"
        done = subprocess.run([sys.executable, "-m", "mpisim", *words[1:]], cwd=ROOT, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == code, done.stderr[-500:]
        stderr[code] = done.stderr
    assert "or fidelity: collective" in stderr[2] and stderr[2].count("\n") <= 2  # a note and the one line


def test_every_readme_command_is_one_mpisim_command_that_parses():
    """No shell pipelines or lists (``mpisim list topologies | algorithms`` runs `algorithms` as a
    program: exit 127), and the arguments are ones mpisim accepts."""
    commands = readme_commands()
    assert len(commands) >= 20, "the README should show its commands in bash blocks"
    for _, command, _ in commands:
        words = shell_words(command)
        operators = SHELL_OPERATORS.intersection(words)
        assert not operators, f"README command is a shell pipeline or list ({', '.join(operators)}): {command}"
        try:
            build_parser().parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"README command does not parse: {command}")


@pytest.mark.slow  # runs every README command block
@pytest.mark.parametrize("block", [b for b, cmds in PLAN.items() if any(not why for _, _, why in cmds)],
                         ids=lambda b: f"block{b}")
def test_the_readme_commands_run_with_the_exit_code_they_state(block, tmp_path, monkeypatch):
    """Each README command no other test runs, in its block's order, exits as the README says."""
    for name in ("scenarios", "reports"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    for command, code, why in PLAN[block]:
        if why:
            continue
        argv = []
        for word in shell_words(command)[1:]:
            argv += (sorted(glob.glob(word)) or [word]) if "*" in word else [word]  # the shell expands globs
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            got = main(argv)
        assert got == code, f"README: {command}\nexit {got}, expected {code}\n{err.getvalue()[-2000:]}"


def test_the_overlap_variant_in_the_prose_is_a_command_that_runs():
    """The README's numbers for variants come with a command (not a bare --set), and it is tested above."""
    commands = [c for _, c, _ in readme_commands()]
    assert any("overlap-compute-communication.yaml" in c and "workload.args.overlap=false" in c
               and "expect=[]" in c for c in commands)
    assert not re.search(r"\(`--set\s", README), "a variant's --set alone is not a command a reader can run"
