"""mpi4py's own test files under ``mpisim exec``, against what they did under MPICH (``mpich.json``).

``mpich.json`` records, per file and rank count, which tests passed under MPICH 5.0.2 with
mpi4py 4.1.2 (``python -m tests.mpi4py_suite.suite mpich``). Here a few files that mpisim
passes whole are re-run under mpisim: every test MPICH passed must pass. The sdist comes from
PyPI once (cached); the whole table is ``python -m tests.mpi4py_suite.suite mpisim``.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.mpi4py_suite import suite

MPICH = json.loads(suite.MPICH_JSON.read_text())
CASES = [("test_request.py", 2), ("test_msgzero.py", 3), ("test_group.py", 4), ("test_rma.py", 2),
         ("test_p2p_buf_matched.py", 2), ("test_datatype.py", 1), ("test_comm_topo.py", 3),
         ("test_op.py", 3), ("test_p2p_obj.py", 3), ("test_comm.py", 2), ("test_win.py", 4), ("test_status.py", 1),
         ("test_environ.py", 2)]


@pytest.fixture(scope="module")
def tests_dir():
    try:
        return suite.fetch()
    except (subprocess.SubprocessError, OSError) as err:  # no PyPI: nothing to compare
        pytest.skip(f"the mpi4py sdist could not be fetched from PyPI: {err}")


@pytest.mark.slow
@pytest.mark.parametrize(("name", "ranks"), CASES, ids=[f"{n[:-3]}-n{p}" for n, p in CASES])
def test_every_test_mpich_passes_passes_under_mpisim(tests_dir, name, ranks):
    reference = suite.passed(MPICH[f"{name}@{ranks}"])
    got = suite.run_mpisim(tests_dir, name, ranks, timeout=120)
    assert reference, "mpich.json has no passing test for this file"
    assert reference <= suite.passed(got), f"failed under mpisim: {sorted(reference - suite.passed(got))}\n{got['tail']}"
