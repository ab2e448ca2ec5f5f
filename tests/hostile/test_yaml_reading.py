"""Any exception while reading YAML is one line ``file: line N: invalid YAML: ...``, exit 2."""

from __future__ import annotations

import pytest

from tests.hostile.helpers import cli, one_line_exit_2

BASE = "topology: {preset: ib-hdr, nodes: 2}\nworkload: {kind: collective, collective: allreduce, sizes: [1 KiB]}\n"


@pytest.mark.parametrize("tagged", ["!!int 'x1'", "!!float 'x1'", "!!timestamp 'x1'", "!!timestamp '2001-13-45'",
                                    "!!bool 'x1'", "!!map 'x'"])
def test_a_tag_whose_constructor_raises_is_invalid_yaml_at_its_line(tmp_path, tagged):
    file = tmp_path / "s.yaml"
    file.write_text(BASE + f"seed: {tagged}\n")
    code, _, err = cli("check", str(file))
    one_line_exit_2(code, err, f"{file}: line 3: invalid YAML:", "is not a valid !!")


@pytest.mark.parametrize("where", [0, 40, len(BASE)])
def test_a_nul_byte_anywhere_is_invalid_yaml_at_its_line(tmp_path, where):
    file = tmp_path / "s.yaml"
    text = BASE + "seed: 1\n"
    file.write_text(text[:where] + "\x00" + text[where:])
    code, _, err = cli("check", str(file))
    line = text[:where].count("\n") + 1
    one_line_exit_2(code, err, f"{file}: line {line}: invalid YAML: character #x0000")


def test_a_lone_surrogate_is_refused_at_check_time_not_after_the_run(tmp_path):
    file = tmp_path / "s.yaml"
    file.write_text(BASE + 'name: "a\\ud800b"\n')
    for command in ("check", "run"):
        code, _, err = cli(command, str(file))
        one_line_exit_2(code, err, f"{file}: line 3: invalid YAML: a lone surrogate")
    code, _, err = cli("check", str(tmp_path / "s.yaml"), "--set", 'description="\\udfff"')
    one_line_exit_2(code, err, "--set description", "lone surrogate")
