"""mpisim exec takes the branches MPICH and mpi4py take: lifecycle, MPI.Exception, refused buffers, topologies, unsupported names.

Each program runs under ``mpisim exec`` with assertions on what it prints, and, where MPICH's
``mpiexec`` and the real mpi4py are installed, under them too: both must print the same lines
and exit with the same status (the real-MPI half is skipped, with the reason, elsewhere).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mpisim.cli import main
from mpisim.compat import mpi4py as MPI_SIM
from mpisim.errors import (
    ERROR_STRINGS,
    InvalidArgumentError,
    InvalidCommunicatorError,
    InvalidRankError,
    InvalidRootError,
    InvalidTagError,
    MPIError,
    TruncationError,
)
from mpisim.mpi import constants
from tests.compat.test_corpus import _real_env, _real_mpi_missing


def write(tmp_path: Path, source: str, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def simulated(path: Path, ranks: int, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["exec", "-n", str(ranks), str(path), *args])
    return code, out.getvalue(), err.getvalue()


def real(path: Path, ranks: int, *args: str) -> tuple[int, str] | None:
    """``(exit status, stdout)`` under MPICH's mpiexec with the real mpi4py; None (the test skips) without them."""
    missing = _real_mpi_missing()
    if missing:
        return None
    proc = subprocess.run(["mpiexec", "-n", str(ranks), sys.executable, str(path), *args], capture_output=True,
                          text=True, env=_real_env(), timeout=120, cwd=path.parent)
    return proc.returncode, proc.stdout


def same_as_mpich(path: Path, ranks: int, code: int, out: str, *args: str) -> None:
    got = real(path, ranks, *args)
    if got is None:
        pytest.skip(f"the real-MPI half needs MPICH and mpi4py: {_real_mpi_missing()}")
    assert got == (code, out)


# ------------------------------------------------------------------ one probe of errors, buffers, topologies

PROBE = """\
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    say = print if rank == 0 else (lambda *a: None)

    # ---- error classes: the constants, MPI.Exception, the errors MPI calls raise
    names = sorted(n for n in dir(MPI) if n.startswith("ERR_"))
    say("error classes", [(n, getattr(MPI, n)) for n in names])
    say("strings", [MPI.Get_error_string(c) for c in range(20)])
    say("Exception is a RuntimeError", issubclass(MPI.Exception, RuntimeError))
    e = MPI.Exception(MPI.ERR_RANK)
    say("Exception(ERR_RANK)", repr(e), str(e), e.args, int(e), e == MPI.ERR_RANK, e == MPI.Exception(6), bool(e),
        e.Get_error_class(), e.Get_error_code(), e.Get_error_string(), e.error_class, e.error_code, e.error_string)
    say("Exception()", repr(MPI.Exception()), bool(MPI.Exception()), MPI.Exception().error_class)


    def attempt(label, call):
        try:
            call()
        except MPI.Exception as err:
            say(label, "MPI.Exception", isinstance(err, RuntimeError), err.Get_error_class(), err.error_class,
                MPI.Get_error_class(err.Get_error_code()), err.Get_error_string().split(",")[0].split("\\n")[0])
        except Exception as err:
            say(label, type(err).__name__)
        else:
            say(label, "no error")


    other = (rank + 1) % comm.size
    attempt("send to rank 5", lambda: comm.send(1, dest=5))
    attempt("Send to rank 5", lambda: comm.Send(np.zeros(1), dest=5))
    attempt("Recv from rank 7", lambda: comm.Recv(np.zeros(1), source=7))
    attempt("send tag -5", lambda: comm.send(1, dest=other, tag=-5))
    attempt("Send tag 2**29", lambda: comm.Send(np.zeros(1), dest=other, tag=2**29))
    attempt("Bcast root 5", lambda: comm.Bcast(np.zeros(1), root=5))
    attempt("bcast root 5", lambda: comm.bcast(1, root=5))
    attempt("Reduce root 9", lambda: comm.Reduce(np.zeros(1), np.zeros(1), root=9))
    attempt("gather root -3", lambda: comm.gather(1, root=-3))
    attempt("Compute_dims(5, [2, 0])", lambda: MPI.Compute_dims(5, [2, 0]))
    attempt("Create_cart([3, 3])", lambda: comm.Create_cart([3, 3]))
    attempt("COMM_NULL.Get_rank()", lambda: MPI.COMM_NULL.Get_rank())
    attempt("COMM_WORLD.Free()", lambda: MPI.COMM_WORLD.Free())
    caught = None
    if rank == 0:
        comm.Send(np.zeros(8), dest=1)
    elif rank == 1:
        try:
            comm.Recv(np.zeros(4), source=0)
        except MPI.Exception as err:
            caught = (err.Get_error_class() == MPI.ERR_TRUNCATE, err.error_class, err.Get_error_string().split(",")[0])
    say("truncated receive on rank 1", comm.bcast(caught, root=1))

    # ---- buffers mpi4py refuses, with its exception and its words
    A = np.arange(12.0).reshape(3, 4)


    def refused(label, call, words):
        try:
            call()
        except Exception as err:
            say(label, type(err).__name__, words in str(err))
        else:
            say(label, "accepted")


    refused("Send(A[:, 0])", lambda: comm.Send(A[:, 0], dest=other), "dlpack: buffer is not contiguous")
    refused("Isend([A[::2], MPI.DOUBLE])", lambda: comm.Isend([A[::2], MPI.DOUBLE], dest=other),
            "dlpack: buffer is not contiguous")
    refused("Recv(A[:, 0])", lambda: comm.Recv(A[:, 0], source=other), "dlpack: buffer is not contiguous")
    refused("Allreduce(A[:, 0], ...)", lambda: comm.Allreduce(A[:, 0], np.zeros(3)), "dlpack: buffer is not contiguous")
    refused("Recv(bytes(8))", lambda: comm.Recv(bytes(8), source=other), "Object is not writable.")
    refused("Send([np.zeros(3), MPI.DOUBLE_INT])", lambda: comm.Send([np.zeros(3), MPI.DOUBLE_INT], dest=other),
            "cannot infer count, buffer length 24 is not a multiple of datatype extent 16 (lb:0, ub:16)")
    refused("Allreduce DOUBLE_INT", lambda: comm.Allreduce([np.zeros(3), MPI.DOUBLE_INT], [np.zeros(3), MPI.DOUBLE_INT],
                                                             op=MPI.MAXLOC),
            "cannot infer count, buffer length 24 is not a multiple of datatype extent 16 (lb:0, ub:16)")
    refused("Send([bytearray(5), MPI.INT])", lambda: comm.Send([bytearray(5), MPI.INT], dest=other),
            "cannot infer count, buffer length 5 is not a multiple of datatype extent 4 (lb:0, ub:4)")
    say("pair types", [(t.Get_name(), t.Get_size(), t.Get_extent()) for t in (MPI.TWOINT, MPI.SHORT_INT, MPI.DOUBLE_INT)])
    # with a count, whole elements are enough: 24 bytes hold one DOUBLE_INT
    pair = np.dtype([("v", "f8"), ("i", "i4")], align=True)
    got = None
    if rank == 0:
        out = np.zeros(3)
        out[:2].view(pair)[0] = (2.5, 7)
        comm.Send([out, 1, MPI.DOUBLE_INT], dest=1)
    elif rank == 1:
        into = np.zeros(4)
        comm.Recv([into, 2, MPI.DOUBLE_INT], source=0)
        got = into[:2].view(pair)[0].tolist()
    say("one DOUBLE_INT from a 24-byte buffer", comm.bcast(got, root=1))

    # ---- Cartesian topology
    cart = comm.Create_cart([2, comm.size // 2], periods=[False, True])
    ring = comm.Create_cart([comm.size], periods=True)
    say("topology", cart.Get_topology(), cart.topology, comm.Get_topology(), (MPI.GRAPH, MPI.CART, MPI.DIST_GRAPH),
        cart.Get_topology() == MPI.CART)
    say("topo", cart.Get_topo(), cart.topo, cart.dims, cart.periods, cart.coords, ring.Get_topo(), ring.periods)
    say("is_topo", cart.is_topo, comm.is_topo, [type(p).__name__ for p in cart.periods])
    say("shift", cart.Shift(0, 1), cart.Shift(1, 1))
    attempt("Get_cart_rank([3, 0])", lambda: cart.Get_cart_rank([3, 0]))

    # ---- lifecycle
    say("initialized", MPI.Is_initialized(), MPI.Is_finalized())
    attempt("second Init", MPI.Init)
    attempt("second Init_thread", MPI.Init_thread)
    comm.Barrier()
    MPI.Finalize()
    say("after Finalize", MPI.Is_initialized(), MPI.Is_finalized(), MPI.Get_error_string(MPI.ERR_ROOT))
    """


@pytest.mark.parametrize("ranks", [2, 4])
def test_errors_refused_buffers_topology_and_lifecycle_print_what_mpich_prints(tmp_path, ranks):
    path = write(tmp_path, PROBE)
    code, out, err = simulated(path, ranks)
    assert code == 0, err
    lines = out.splitlines()
    for expected in [
        "Exception is a RuntimeError True",
        "Exception(ERR_RANK) MPI.Exception(6) Invalid rank (6,) 6 True True True 6 6 Invalid rank 6 6 Invalid rank",
        "Exception() MPI.Exception(0) False 0",
        "Send to rank 5 MPI.Exception True 6 6 6 Invalid rank",
        "send tag -5 MPI.Exception True 4 4 4 Invalid tag",
        "Bcast root 5 MPI.Exception True 7 7 7 Invalid root",
        "bcast root 5 MPI.Exception True 7 7 7 Invalid root",
        "Compute_dims(5, [2, 0]) MPI.Exception True 11 11 11 Invalid dimension argument",
        "Create_cart([3, 3]) MPI.Exception True 12 12 12 Invalid argument",
        "COMM_NULL.Get_rank() MPI.Exception True 5 5 5 Invalid communicator",
        "truncated receive on rank 1 (True, 14, 'Message truncated')",
        "Send(A[:, 0]) BufferError True",
        "Recv(bytes(8)) BufferError True",
        "Send([np.zeros(3), MPI.DOUBLE_INT]) ValueError True",
        "pair types [('MPI_2INT', 8, (0, 8)), ('MPI_SHORT_INT', 6, (0, 8)), ('MPI_DOUBLE_INT', 12, (0, 16))]",
        "one DOUBLE_INT from a 24-byte buffer (2.5, 7)",
        "topology 2 2 -32766 (1, 2, 3) True",
        "is_topo True False ['int', 'int']",
        "Get_cart_rank([3, 0]) MPI.Exception True 12 12 12 Invalid argument",
        "initialized True False",
        "second Init MPI.Exception True 15 15 15 Other MPI error",
        "second Init_thread MPI.Exception True 15 15 15 Other MPI error",
        "after Finalize True True Invalid root",
    ]:
        assert expected in lines, expected
    assert f"topo ([2, {ranks // 2}], [0, 1], [0, 0])" in out and f"([{ranks}], [1], [0]) [1]" in out
    assert "('ERR_ROOT', 7)" in out and "('ERR_COUNT', 2)" in out and "('ERR_ARG', 12)" in out
    same_as_mpich(path, ranks, code, out)


# ------------------------------------------------------------------ mpi4py.rc.initialize = False

RC_PROBE = """\
    import sys

    import mpi4py

    if sys.argv[1] == "call":
        mpi4py.rc(initialize=False)
    else:
        mpi4py.rc.initialize = False
    from mpi4py import MPI

    before = (MPI.Is_initialized(), MPI.Is_finalized())
    provided = MPI.Init_thread(MPI.THREAD_FUNNELED) if sys.argv[1] == "thread" else MPI.Init()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if rank == 0:
        print("before Init", before)
        print("Init gives", provided, "thread level", MPI.Query_thread())
        print("after Init", MPI.Is_initialized(), MPI.Is_finalized(), comm.Get_size())
        try:
            mpi4py.rc.bogus = 1
        except TypeError as err:
            print("rc", err)
    MPI.Finalize()
    if rank == 0:
        print("finalized", MPI.Is_initialized(), MPI.Is_finalized())
    """


@pytest.mark.parametrize(("how", "provided"), [("attr", "None thread level 0"), ("call", "None thread level 0"),
                                               ("thread", "1 thread level 1")])
def test_with_rc_initialize_false_mpi_waits_for_init(tmp_path, how, provided):
    path = write(tmp_path, RC_PROBE)
    code, out, err = simulated(path, 2, how)
    assert code == 0, err
    assert out.splitlines()[:4] == ["before Init (False, False)", f"Init gives {provided}", "after Init True False 2",
                                    "rc object has no attribute 'bogus'"]
    assert out.splitlines()[4:] == ["finalized True True"]
    same_as_mpich(path, 2, code, out, how)


# ------------------------------------------------------------------ MPI calls MPICH refuses to make at all

@pytest.mark.parametrize(("setup", "call", "status", "message"), [
    ("MPI.Finalize()", "comm.Barrier()", 1, "rank 0: MPI.Comm.barrier after MPI.Finalize() (prog.py:9)"),
    ("MPI.Finalize()", "MPI.Wtime()", 1, "rank 0: MPI.Wtime after MPI.Finalize() (prog.py:9)"),
    ("MPI.Finalize()", "comm.Get_rank()", 1, "rank 0: MPI.Comm.Get_rank after MPI.Finalize() (prog.py:9)"),
    ("MPI.Finalize()", "MPI.Finalize()", 1, "rank 0: MPI.Finalize after MPI.Finalize() (prog.py:9)"),
    ("MPI.Finalize()", "MPI.Init()", 15, "rank 0: MPI.Init after MPI.Finalize() (prog.py:9): MPICH aborts the program "
                                         "here with status 15"),
    ("pass", "comm.Get_size()", 1, "rank 0: MPI.Comm.Get_size before MPI.Init() (mpi4py.rc.initialize is False) "
                                   "(prog.py:9)"),
])
def test_an_mpi_call_before_init_or_after_finalize_ends_the_rank_as_mpich_does(tmp_path, setup, call, status, message):
    """MPICH ends the process there: no exception to catch, one line, the status; mpisim names the rank, call and line."""
    path = write(tmp_path, f"""\
        import mpi4py
        mpi4py.rc.initialize = {setup != "pass"}
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
        {setup}
        print("before", MPI.Is_initialized(), MPI.Is_finalized(), flush=True)
        try:
            for _ in range(1):
                {call}
        except Exception as err:
            print("caught", type(err).__name__, flush=True)
        print("after", flush=True)
        """)
    code, out, err = simulated(path, 1)
    assert code == status
    assert out == f"before {setup != 'pass'} {setup != 'pass'}\n", "nothing catches it and nothing runs after it"
    line = next(line for line in err.splitlines() if line.startswith("rank 0: MPI."))
    assert line.startswith(message), line
    assert "Attempting to use an MPI routine" in line or "Cannot call MPI_INIT" in line
    assert f"mpisim exec: rank 0 exited with status {status}" in err
    same_as_mpich(path, 1, code, out)


@pytest.mark.parametrize(("initialize", "finalize", "note"), [
    ("True", "None", False), ("True", "True", False), ("True", "False", True),
    ("False", "None", True), ("False", "True", False), ("False", "False", True),
])
def test_rc_finalize_decides_whether_a_rank_ends_without_finalizing(tmp_path, initialize, finalize, note):
    """MPICH's mpiexec ends the job when a rank exits without MPI_Finalize (the others are killed): the run says so."""
    path = write(tmp_path, f"""\
        import mpi4py
        mpi4py.rc.initialize = {initialize}
        mpi4py.rc.finalize = {finalize}
        from mpi4py import MPI
        if not MPI.Is_initialized():
            MPI.Init()
        print(MPI.COMM_WORLD.Get_rank(), "done")
        """)
    code, out, err = simulated(path, 2)
    assert code == 0 and sorted(out.splitlines()) == ["0 done", "1 done"]
    assert ("note: rank(s) 0, 1 ended without MPI_Finalize" in err) == note, err


# ------------------------------------------------------------------ names mpisim does not simulate

@pytest.mark.parametrize(("statement", "name"), [
    ("MPI.DOUBLE.Pack_external_size('external32', 1)", "MPI.Datatype.Pack_external_size"),
    ("MPI.Datatype.Pack_external_size(MPI.DOUBLE, 'external32', 1)", "MPI.Datatype.Pack_external_size"),
    ("MPI.Comm.Connect(MPI.COMM_WORLD, 'port')", "MPI.Comm.Connect"),
    ("MPI.COMM_WORLD.Connect('port')", "MPI.Comm.Connect"),
    ("MPI.Status().py2f()", "MPI.Status.py2f"),
    ("MPI.Request.Startall([])", "MPI.Request.Startall"),
    ("mpi4py.profile('mpe')", "mpi4py.profile"),
])
def test_names_mpisim_does_not_simulate_are_one_line_errors_naming_the_rank(tmp_path, statement, name):
    path = write(tmp_path, f"""\
        import numpy as np
        import mpi4py
        from mpi4py import MPI
        a, b = np.zeros(1), np.zeros(1)
        assert not hasattr(MPI.Datatype, "Pack_external") and not hasattr(MPI.Comm, "Connect")
        assert MPI.ERR_ROOT == 7 and MPI.ERR_COUNT == 2
        if MPI.COMM_WORLD.rank == 1:
            {statement}
        MPI.COMM_WORLD.Barrier()
        """)
    code, _, err = simulated(path, 2)
    assert code == 1
    assert "the simulated program failed: UnsupportedCall" in err
    assert f"rank 1: {name} is not supported by mpisim exec" in err


@pytest.mark.parametrize("statement", ["from mpi4py.futures import MPIPoolExecutor", "import mpi4py.util",
                                       "from mpi4py.util import pkl5", "import mpi4py.run"])
def test_mpi4py_submodules_are_an_import_error_naming_the_submodule(tmp_path, statement):
    name = statement.split()[1]
    path = write(tmp_path, f"""\
        import mpi4py
        {statement}
        """)
    code, _, err = simulated(path, 2)
    assert code == 1
    assert "the simulated program failed: UnsupportedModule" in err
    assert f"rank 0: {name} is not supported by mpisim exec (only mpi4py.MPI is)" in err
    # it is an ImportError: a program's fallback takes over
    path = write(tmp_path, f"""\
        try:
            {statement}
        except ImportError as err:
            print("fallback:", err)
        from mpi4py import MPI
        """)
    code, out, _ = simulated(path, 1)
    assert code == 0 and out == f"fallback: rank 0: {name} is not supported by mpisim exec (only mpi4py.MPI is); " \
                                "the README lists what is\n"


# ------------------------------------------------------------------ the exception classes themselves

def test_mpisims_errors_are_mpi_exceptions_with_mpichs_error_classes():
    assert MPI_SIM.Exception is MPIError and issubclass(MPIError, RuntimeError)
    for cls, error_class in [(InvalidRankError, constants.ERR_RANK), (TruncationError, constants.ERR_TRUNCATE),
                             (InvalidTagError, constants.ERR_TAG), (InvalidRootError, constants.ERR_ROOT),
                             (InvalidCommunicatorError, constants.ERR_COMM),
                             (InvalidArgumentError, constants.ERR_ARG), (MPIError, constants.ERR_OTHER)]:
        err = cls("rank 3: what happened")
        assert (err.Get_error_class(), err.Get_error_code(), err.error_class) == (error_class,) * 3
        assert err.Get_error_string() == f"{ERROR_STRINGS[error_class]}, error stack:\nrank 3: what happened"
        assert str(err) == "rank 3: what happened" and err == error_class
    assert MPIError("x", error_class=constants.ERR_DIMS).Get_error_class() == constants.ERR_DIMS
    err = MPIError(constants.ERR_RANK)
    assert (repr(err), str(err), err.args, int(err), bool(err)) == ("MPI.Exception(6)", "Invalid rank", (6,), 6, True)
    assert err == MPIError(6) and err != MPIError(7) and err < 7 and hash(err) == hash(6)
    assert not MPIError() and MPIError().error_class == constants.SUCCESS
    assert TruncationError("a") != TruncationError("a"), "mpisim's own errors compare as objects"
    # every class the MPI module names has MPICH's string
    classes = {getattr(constants, n) for n in dir(constants) if n.startswith("ERR_")} - {constants.ERR_LASTCODE}
    assert classes <= set(ERROR_STRINGS)
    assert MPI_SIM.Get_error_string(constants.ERR_TRUNCATE) == "Message truncated"
    assert MPI_SIM.Get_error_class(671761423) == constants.ERR_OTHER  # an MPICH code with its error stack
