"""mpisim exec prints what MPICH prints for each feature program (see :mod:`tests.compat.mpich_programs`)."""

from __future__ import annotations

import pytest

from tests.compat.mpich_programs import (
    CASES,
    PROGRAMS,
    as_text,
    expected_file,
    real_mpi_missing,
    run_mpisim,
    run_real,
)


@pytest.mark.parametrize(("name", "ranks"), CASES, ids=[f"{n[:-3]}-n{p}" for n, p in CASES])
def test_mpisim_exec_prints_what_mpich_printed(name, ranks):
    code, simulated, err = run_mpisim(name, ranks)
    assert code == 0, err
    assert as_text(simulated) == expected_file(name, ranks).read_text()


@pytest.mark.parametrize(("name", "ranks"), CASES, ids=[f"{n[:-3]}-n{p}" for n, p in CASES])
def test_the_stored_output_is_what_mpich_prints_today(name, ranks):
    missing = real_mpi_missing()
    if missing:
        pytest.skip(f"needs MPICH and mpi4py: {missing}")
    assert as_text(run_real(name, ranks)) == expected_file(name, ranks).read_text()


def test_every_program_is_run():
    assert {p.name for p in PROGRAMS.glob("*.py")} == {name for name, _ in CASES}
