"""The README's examples run: its scenario loads and runs, and the files its commands name exist."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from mpisim.scenario import load_dict, run_scenario

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def code_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


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


def test_the_readme_collective_fidelity_command_runs_what_the_message_path_refuses():
    """The 100000-rank ring: refused at message fidelity (exit 2), a step program at collective fidelity."""
    import subprocess
    import sys

    lines = [line.split("#")[0].strip() for block in code_blocks("bash") for line in block.splitlines()]
    refused = next(line for line in lines if "topology.nodes=100000" in line and "fidelity" not in line)
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
