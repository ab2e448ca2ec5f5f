"""MPI's constants have MPICH's values in both APIs: a probe printed under the real mpi4py and under mpisim exec.

The probe prints every predefined constant a program can see, the predefined attributes of
``COMM_WORLD`` and what a fresh ``Status`` and a receive from ``PROC_NULL`` hold. Under
``mpisim exec`` it must print what it prints under MPICH's ``mpiexec`` with the real mpi4py
(skipped, with the reason, where they are not installed). The generator API's constants
(``mpisim.ANY_SOURCE`` ...) are the same table.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mpisim
from mpisim.compat import mpi4py as MPI_SIM
from mpisim.errors import InvalidTagError
from mpisim.mpi import constants
from tests.compat.test_corpus import ROOT, _real_env, _real_mpi_missing
from tests.conftest import make_world, run_program

NAMES = ["ANY_SOURCE", "ANY_TAG", "PROC_NULL", "ROOT", "UNDEFINED", "TAG_UB", "IO", "WTIME_IS_GLOBAL",
         "UNIVERSE_SIZE", "LASTUSEDCODE", "APPNUM", "KEYVAL_INVALID", "SUCCESS", "ERR_TAG", "ERR_COMM", "ERR_RANK",
         "ERR_TRUNCATE", "ERR_OTHER", "ERR_IN_STATUS", "ERR_PENDING", "ERR_LASTCODE", "IDENT", "CONGRUENT",
         "SIMILAR", "UNEQUAL", "THREAD_SINGLE", "THREAD_FUNNELED", "THREAD_SERIALIZED", "THREAD_MULTIPLE",
         "GRAPH", "CART", "DIST_GRAPH", "COMM_TYPE_SHARED", "VERSION", "SUBVERSION", "BSEND_OVERHEAD",
         "MAX_PROCESSOR_NAME", "MAX_ERROR_STRING"]

PROBE = textwrap.dedent(f"""\
    import numpy as np
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if comm.Get_rank() == 0:
        for name in {NAMES!r}:
            print(name, getattr(MPI, name))
        for key in ("TAG_UB", "IO", "APPNUM", "UNIVERSE_SIZE", "LASTUSEDCODE"):
            print("attr", key, comm.Get_attr(getattr(MPI, key)))
        s = MPI.Status()
        print("fresh status", s.Get_source(), s.Get_tag(), s.Get_count(), s.Get_error())
        comm.Recv(np.zeros(1), source=MPI.PROC_NULL, status=s)
        print("from PROC_NULL", s.Get_source(), s.Get_tag(), s.Get_count())
        print("topology", comm.Get_topology())
    """)


def _run(cmd: list[str], env: dict[str, str], cwd) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.slow  # runs the probe in subprocesses, under mpiexec and under mpisim exec
def test_the_probe_prints_the_same_under_mpich_and_under_mpisim(tmp_path):
    probe = tmp_path / "constants_probe.py"
    probe.write_text(PROBE)
    simulated = _run([sys.executable, "-m", "mpisim", "exec", "-n", "2", str(probe)],
                     {**os.environ, "PYTHONPATH": str(ROOT)}, ROOT)
    assert "ANY_SOURCE -2" in simulated and "attr TAG_UB 536870911" in simulated
    missing = _real_mpi_missing()
    if missing:
        pytest.skip(f"the real-MPI half needs MPICH and mpi4py: {missing}")
    real = _run(["mpiexec", "-n", "2", sys.executable, str(probe)], _real_env(), tmp_path)
    assert simulated.splitlines() == real.splitlines()


def test_the_generator_api_and_the_mpi4py_module_share_one_table():
    for name in NAMES:
        assert getattr(MPI_SIM, name) == getattr(constants, name), name
    for name in ("ANY_SOURCE", "ANY_TAG", "PROC_NULL", "UNDEFINED", "TAG_UB", "MAX_TAG"):
        assert getattr(mpisim, name) == getattr(constants, name), name
    # MPICH's values, from its mpi.h: the ones programs test against.
    assert (constants.ANY_SOURCE, constants.PROC_NULL, constants.ANY_TAG, constants.UNDEFINED) == (-2, -1, -1, -32766)
    assert constants.attribute(constants.TAG_UB) == constants.MAX_TAG == 2**29 - 1


def test_tags_up_to_tag_ub_are_valid_and_beyond_it_are_mpi_err_tag():
    def program(comm, tag):
        if comm.rank == 0:
            yield from comm.send(np.arange(3.0), dest=1, tag=tag)
        else:
            got = yield from comm.recv(source=0, tag=tag)
            assert got.tolist() == [0.0, 1.0, 2.0]

    run_program(make_world(), program, constants.MAX_TAG)
    with pytest.raises(InvalidTagError, match=r"send\(dest=1, tag=536870912\): tags must be in 0..536870911"):
        run_program(make_world(), program, constants.MAX_TAG + 1)
