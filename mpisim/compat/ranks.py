"""Each rank of an unchanged program in its own greenlet, switched by the SimPy engine.

An mpi4py program blocks the ordinary way: ``comm.Recv(buf, source=0)`` returns when the
data is there. The simulated MPI, though, is a set of SimPy generators (``yield from
comm.recv(...)``). A *greenlet* bridges the two: a coroutine with its own C stack that can be
suspended at any depth of ordinary calls, so no line of the program needs rewriting.

How one rank runs::

    SimPy process "driver" (main greenlet)          rank greenlet (the user's program)
    ------------------------------------------      ------------------------------------
    g.switch() --------------------------------->   runs the program's module code ...
                                                    comm.Recv(buf) -> ctx.block(gen):
                                                      first step of gen; it must wait ->
    <-------------------------------------- switch((gen, event))
    yield event      (SimPy runs other ranks)
    ... gen.send(value) until gen returns
    g.switch(result) ---------------------------->  Recv returns; the program goes on

A call that completes without waiting (an eager send, a message already there) never leaves
the rank's greenlet. Only one greenlet runs at a time and the engine decides which, so the
same program and scenario give the same event order, the same results and the same output,
byte for byte.

Why greenlet: threads would need a lock handed from rank to rank and make every switch a
kernel round trip; ``asyncio`` or generators would need ``await``/``yield from`` in the
program, the rewriting this module exists to avoid. greenlet switches in-process, in about a
microsecond, and is what gevent and SQLAlchemy's async bridge are built on.

**Privatization.** Ranks share one interpreter, but under ``mpiexec`` each has its own. So
each rank gets its own ``__main__`` module and its own copy of every module the program
imports from its folder (SMPI calls this privatization): before a rank's greenlet runs,
``sys.modules`` is switched to that rank's copies, so module globals, ``pickle`` of the
program's classes and ``rank = MPI.COMM_WORLD.Get_rank()`` at import time behave as under
``mpiexec``. ``mpi4py`` itself is this package's module, visible only while the program runs:
the real mpi4py, if installed, is neither needed nor shadowed elsewhere. Privatized are the
program's own modules wherever they lie (its folder, a folder it adds to ``sys.path``,
``PYTHONPATH``), but not the standard library or installed packages, which keep no rank's
state -- except the process state a program commonly sets per rank, which each rank gets its
own copy of, as its own process would:

* ``random`` and ``numpy.random``'s module-level generators (``np.random.seed(rank)``): the
  module functions go to the running rank's generator, which starts, if never seeded, from
  the run's seed and the rank (under ``mpiexec`` from the operating system's entropy: a run
  repeats here, and each rank still draws its own numbers);
* ``logging``: each rank imports its own, so ``basicConfig`` per rank works;
* ``sys.stdout`` and ``sys.stderr`` (a rank may send its output to a file of its own);
* ``os.environ``, with the variables MPICH's launcher sets (``PMI_RANK``, ``PMI_SIZE``,
  ``MPI_LOCALRANKID``, ``MPI_LOCALNRANKS``).

**Compute between calls** (``compute:``): ``none`` or ``explicit`` (the default: only what
the program declares with :func:`mpisim.compute`, a no-op under a real MPI) are
deterministic; ``measured`` charges the wall time the Python code took between two MPI calls,
times ``speed`` (SMPI's approach), and is not deterministic.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib.abc
import importlib.machinery
import io
import os
import random
import site
import sys
import sysconfig
import threading
import time
import types
from collections.abc import Generator, Iterator, MutableMapping
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from greenlet import GreenletExit, getcurrent, greenlet

from mpisim.compat.tracebacks import is_user_file, suspended_at, user_traceback
from mpisim.engine.events import Call
from mpisim.errors import MPIError, ProgramError, describe_exception

COMPUTE_MODES = ("none", "measured", "explicit")
#: Standard-library modules with process-wide state a program sets per rank: each rank imports its own.
PER_RANK_STDLIB = ("logging", "logging.handlers", "logging.config")
#: Simulated time an unsuccessful ``Test``/``Iprobe`` costs (about one poll of a NIC's queue).
POLL_TIME = 1e-6
#: Simulated time the other ranks run on after one fails (exits non-zero or raises), before the
#: launcher stops them: ``mpiexec`` notices a failed process and kills the rest within
#: milliseconds, so what they print meanwhile -- a rank already past the call the failed one
#: left -- still appears, as it does under MPICH.
LAUNCHER_GRACE = 1e-3


class _LauncherStop(Exception):
    """The launcher's grace after a failed rank is over: the run stops (see LAUNCHER_GRACE)."""


class ProgramExit(MPIError):
    """A rank ended the program with a non-zero status: ``sys.exit(3)`` or ``MPI.COMM_WORLD.Abort(3)``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message, code)
        self.code = code

    def __str__(self) -> str:
        return str(self.args[0])


class UnsupportedCall(MPIError, AttributeError):
    """An MPI call mpisim does not simulate; it names the call and the rank.

    Also an AttributeError, so ``hasattr(MPI, "Win")`` is False, as feature tests expect.
    """


class _RankGreenlet(greenlet):
    """A greenlet that knows which rank it runs (``getcurrent().ctx``)."""

    ctx: RankContext


def current() -> RankContext | None:
    """The context of the rank whose code is running, or None outside a simulated rank."""
    return getattr(getcurrent(), "ctx", None)


def require(call: str) -> RankContext:
    """The running rank's context; outside a simulated program, an error naming *call*."""
    ctx = getattr(getcurrent(), "ctx", None)
    if ctx is None:
        if threading.current_thread() is not threading.main_thread():
            raise MPIError(f"{call} called from a thread the program started: mpisim exec runs each rank in the "
                           "main thread, one at a time, and simulates MPI calls made there only")
        raise MPIError(f"{call} called outside a simulated rank (run the program with mpisim exec)")
    return ctx


def _rank_exit(real_exit: Any) -> Any:
    """``os._exit`` for the ranks: one rank's process ends, not the simulator running them all."""
    def exit_rank(status: int) -> None:
        if current() is None:
            real_exit(status)
        raise SystemExit(status)
    return exit_rank


def _rank_kill(real_kill: Any) -> Any:
    """``os.kill`` for the ranks: a rank signalling its own process ends that rank, with the shell's
    status for a signal (128 + its number), not the simulator running every rank."""
    def kill_rank(pid: int, sig: int) -> None:
        if current() is None or pid not in (0, os.getpid()) or sig == 0:
            real_kill(pid, sig)
            return
        raise SystemExit(128 + int(sig))
    return kill_rank


def compute(seconds: float) -> None:
    """Declare *seconds* of computation on this rank (``compute: explicit``); a no-op elsewhere.

    Under ``mpisim exec`` with the default ``compute: explicit`` the rank spends *seconds* of
    simulated time here; under a real MPI (or ``compute: none|measured``) nothing happens, so
    a program may call it unconditionally.
    """
    ctx = current()
    if ctx is not None and ctx.runner.compute == "explicit" and seconds > 0:
        ctx.block(ctx.comm.compute(float(seconds)), mpi=False)


class RankContext:
    """One rank of the running program: its communicator, greenlet, private modules and counters."""

    def __init__(self, runner: Runner, comm: Any) -> None:
        self.runner = runner
        self.comm = comm  # the rank's COMM_WORLD (mpisim.mpi.comm.Comm)
        self.rank = comm.world_rank
        self.env = comm.world.env
        self.greenlet = _RankGreenlet(self._main)
        self.greenlet.ctx = self
        self.private: dict[str, types.ModuleType] = {}
        self.mpi_time = 0.0  # simulated seconds spent inside blocking MPI calls
        self.resumed = time.perf_counter()  # wall clock when the program last left an MPI call
        self.cache: dict[str, Any] = {}  # per-rank handles the MPI module keeps (COMM_SELF, ...)
        self.stdout: Any = None  # the rank's sys.stdout and sys.stderr (set when the run starts)
        self.stderr: Any = None
        self.environ: dict[str, str] | None = None  # the rank's os.environ (made on first use)
        self.generators: dict[str, Any] = {}  # the rank's random.Random and numpy RandomState

    def block(self, gen: Generator[Any, Any, Any], *, mpi: bool = True) -> Any:
        """Run the simulated MPI call *gen* for this rank and return its value, sleeping while it waits.

        Its simulated time counts as time in MPI calls unless *mpi* is False (``mpisim.compute``).
        """
        if self.runner.measure:
            self._charge_measured()
        try:
            event = gen.send(None)
        except StopIteration as stop:
            return stop.value
        t0 = self.env.now
        try:
            return self.greenlet.parent.switch(("call", gen, event))
        finally:
            if mpi:
                self.mpi_time += self.env.now - t0
            if self.runner.measure:
                self.resumed = time.perf_counter()

    def enter(self) -> None:
        """Mark the start of a non-blocking MPI call (charges measured compute before it)."""
        if self.runner.measure:
            self._charge_measured()
            self.resumed = time.perf_counter()

    def poll(self) -> None:
        """A test that found nothing done (``Test``, ``Iprobe``): let simulated time move on.

        A program that loops on ``req.Test()`` waits for the simulation to progress, which only
        happens when the rank yields to the engine. Each unsuccessful poll therefore costs
        :data:`POLL_TIME` of simulated time, as SMPI charges one (its ``smpi/test`` option).
        """
        gen = self.comm.compute(POLL_TIME, "poll")
        event = gen.send(None)
        t0 = self.env.now
        try:
            self.greenlet.parent.switch(("call", gen, event))
        finally:
            self.mpi_time += self.env.now - t0
            if self.runner.measure:
                self.resumed = time.perf_counter()

    def _charge_measured(self) -> None:
        elapsed = (time.perf_counter() - self.resumed) * self.runner.speed
        self.resumed = time.perf_counter()
        if elapsed > 0:
            gen = self.comm.compute(elapsed, "python")
            try:
                event = gen.send(None)
            except StopIteration:
                return
            self.greenlet.parent.switch(("call", gen, event))
        self.resumed = time.perf_counter()

    def abort(self, code: int, message: str) -> None:
        """End the whole program now with *code* (``MPI_Abort``); never returns."""
        self.greenlet.parent.switch(("abort", code, message))
        raise GreenletExit  # pragma: no cover - the driver never switches back

    def _main(self) -> tuple[str, Any]:
        """The greenlet's body: the program's module code, run as this rank's ``__main__``."""
        runner = self.runner
        module = types.ModuleType("__main__")
        module.__file__ = str(runner.path)
        module.__builtins__ = builtins
        module.__spec__ = None
        self.private["__main__"] = module
        sys.modules["__main__"] = module
        self.resumed = time.perf_counter()  # the rank's own Python starts now, not when the run was set up
        try:
            exec(runner.code, module.__dict__)
        except SystemExit as exc:
            return "exit", exc.code
        except GreenletExit:
            return "killed", None
        except BaseException as exc:
            return "error", exc
        return "exit", 0


class _ProgramFinder(importlib.abc.MetaPathFinder):
    """Marks every module of the program's own as private (one copy per rank).

    The program's own is what is neither the standard library nor an installed package: its
    folder, a folder it puts on ``sys.path``, ``PYTHONPATH``. Those keep no rank's state
    (a module that reads ``MPI.COMM_WORLD.Get_rank()`` at import is the program's), and one
    copy of numpy per rank would cost seconds and memory for nothing.
    """

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        paths = sysconfig.get_paths()
        shared = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
        shared.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
        shared.add(site.getusersitepackages())
        shared.add(str(Path(__file__).resolve().parents[1]))  # mpisim itself
        self.shared = [Path(folder).resolve() for folder in shared if folder]

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.origin and spec.has_location and self._programs(Path(spec.origin).resolve()):
            self.runner.private_names.add(fullname)
        return spec

    def _programs(self, origin: Path) -> bool:
        if origin.is_relative_to(self.runner.folder):
            return True
        return not any(origin.is_relative_to(folder) for folder in self.shared)


class _RankEnviron(MutableMapping):
    """``os.environ`` while the program runs: the running rank's own copy (see "Privatization")."""

    def __init__(self, runner: Runner, real: Any) -> None:
        self.runner, self.real = runner, real

    def _mine(self) -> Any:
        ctx = self.runner.current
        if ctx is None:
            return self.real
        if ctx.environ is None:
            ctx.environ = dict(self.real)
            ctx.environ.update(self.runner.launcher_environ(ctx.rank))
        return ctx.environ

    def __getitem__(self, key: str) -> str:
        return self._mine()[key]

    def __setitem__(self, key: str, value: str) -> None:
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"str expected, not {type(key if not isinstance(key, str) else value).__name__}")
        self._mine()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._mine()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._mine()))

    def __len__(self) -> int:
        return len(self._mine())

    def copy(self) -> dict[str, str]:
        return dict(self._mine())

    def __repr__(self) -> str:
        return f"environ({self._mine()!r})"


#: numpy.random's module functions that are plain functions over its hidden generator, and the
#: RandomState method each one calls.
NUMPY_FUNCTIONS = {"seed": "seed", "ranf": "random_sample", "sample": "random_sample"}


def _generator_functions(module: types.ModuleType, instance: Any) -> dict[str, str]:
    """*module*'s functions that use its hidden global generator *instance*: {name: the method called}."""
    names = {name: name for name, value in vars(module).items()
             if getattr(value, "__self__", None) is instance and not name.startswith("_")}
    if isinstance(instance, np.random.RandomState):
        names.update({name: method for name, method in NUMPY_FUNCTIONS.items() if hasattr(module, name)})
    return names


class _PerRankGenerators:
    """Points ``random``'s and ``numpy.random``'s module functions at the running rank's generator.

    ``random.seed``, ``random.randint``, ``np.random.seed``, ``np.random.rand``... are methods
    of one hidden global generator per process; under ``mpiexec`` each rank has its own. While
    the program runs each such module function is replaced by one that calls the same method
    of the running rank's generator, made on first use and seeded from the run's seed and the
    rank; the originals come back when the run ends. Nothing is copied at a switch of ranks.
    """

    def __init__(self, runner: Runner, seed: int) -> None:
        self.runner, self.seed = runner, seed
        self.hidden = {"random": random._inst, "numpy": np.random.mtrand._rand}
        self.modules = [(random, "random"), (np.random, "numpy"), (np.random.mtrand, "numpy")]
        self.saved: list[tuple[types.ModuleType, str, Any]] = []

    def install(self) -> None:
        for module, kind in self.modules:
            for name, method in _generator_functions(module, self.hidden[kind]).items():
                self.saved.append((module, name, getattr(module, name)))
                setattr(module, name, self._dispatch(kind, name, method))

    def remove(self) -> None:
        for module, name, original in reversed(self.saved):
            setattr(module, name, original)
        self.saved.clear()

    def _dispatch(self, kind: str, name: str, method: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            return getattr(self._generator(kind), method)(*args, **kwargs)
        call.__name__ = call.__qualname__ = name
        return call

    def _generator(self, kind: str) -> Any:
        ctx = self.runner.current
        if ctx is None:
            return self.hidden[kind]
        mine = ctx.generators.get(kind)
        if mine is None:
            start = int(np.random.SeedSequence([self.seed, ctx.rank]).generate_state(1)[0])
            mine = ctx.generators[kind] = random.Random(start) if kind == "random" else np.random.RandomState(start)
        return mine


class _Output(io.TextIOBase):
    """A rank-aware stdout/stderr: forwards the program's writes, prefixed ``[rank] `` with tagging."""

    def __init__(self, runner: Runner, target: TextIO, tag: bool) -> None:
        self.runner, self.target, self.tag = runner, target, tag
        self.partial: dict[int, str] = {}

    def write(self, text: str) -> int:
        ctx = self.runner.current
        if self.runner.closed:
            return len(text)  # a killed rank's last words (after the run was over) are dropped
        if not self.tag or ctx is None:
            self.target.write(text)
            return len(text)
        lines = (self.partial.pop(ctx.rank, "") + text).split("\n")
        if lines[-1]:
            self.partial[ctx.rank] = lines[-1]
        self.target.write("".join(f"[{ctx.rank}] {line}\n" for line in lines[:-1]))
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def finish(self) -> None:
        """Write out lines that never got their newline, as the program ends."""
        for rank in sorted(self.partial):
            self.target.write(f"[{rank}] {self.partial[rank]}\n")
        self.partial.clear()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.target, "encoding", "utf-8")

    def isatty(self) -> bool:
        return False


class _Input(io.TextIOBase):
    """stdin as ``mpiexec`` gives it: the real one on rank 0, empty on the others."""

    def __init__(self, runner: Runner, target: TextIO) -> None:
        self.runner, self.target = runner, target

    def _stream(self) -> Any:
        ctx = self.runner.current
        return self.target if ctx is not None and ctx.rank == 0 else io.StringIO("")

    def read(self, size: int | None = -1) -> str:
        return self._stream().read(size)

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        return self._stream().readline(size)

    def readlines(self, hint: int = -1) -> list[str]:  # type: ignore[override]
        return self._stream().readlines(hint)

    def __iter__(self) -> Any:
        return iter(self._stream())

    def readable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False


class Runner:
    """Runs one program file on every rank of a world (see the module docstring).

    ``run()`` returns when every rank has finished; it raises what the simulated program
    did wrong: :class:`ProgramExit` (``sys.exit(n)``, ``Abort``), DeadlockError, other
    MPIErrors, and the ProgramError of an exception on one rank.
    """

    def __init__(self, world: Any, path: Path, argv: list[str], *, mpi_module: types.ModuleType,
                 package: types.ModuleType, compute: str = "explicit", speed: float = 1.0, tag_output: bool = False,
                 seed: int = 0, stdin: TextIO | None = None) -> None:
        self.world = world
        #: What rank 0 reads as stdin (None: the real one); ``--check`` gives each run a replay of one record.
        self.stdin = stdin
        self.seed = seed
        self.path = path.resolve()
        self.folder = self.path.parent
        self.argv = [str(path), *argv]
        self.code = compile(self.path.read_bytes(), str(self.path), "exec")
        self.mpi_module, self.package = mpi_module, package
        self.compute = compute
        self.measure = compute == "measured"
        self.speed = speed
        self.tag_output = tag_output
        self.private_names: set[str] = {"__main__"}
        self.current: RankContext | None = None
        self.out: Any = None  # the rank-aware stdout and stderr while the program runs
        self.err: Any = None
        self._local: dict[int, tuple[int, int]] | None = None
        self.failure: MPIError | None = None  # the first rank's failure, reported when the run ends
        self.closed = False
        self._user_files: dict[str, bool] = {}
        #: The frame that made the MPI call in progress (set by the MPI module on every call).
        self.site: types.FrameType | None = None
        #: Under ``mpisim exec --check``: the run's :class:`~mpisim.compat.check.Checker` (else None).
        self.checker: Any = None
        self.contexts = [RankContext(self, world.comm_world(rank)) for rank in range(world.size)]

    # ------------------------------------------------------------------ switching ranks

    def _enter(self, ctx: RankContext) -> None:
        modules = sys.modules
        private = ctx.private
        for name in self.private_names:
            mine = private.get(name)
            if mine is None:
                modules.pop(name, None)
            else:
                modules[name] = mine
        sys.stdout, sys.stderr = ctx.stdout, ctx.stderr
        self.current = ctx

    def _leave(self, ctx: RankContext) -> None:
        modules = sys.modules
        for name in self.private_names:
            module = modules.get(name)
            if module is not None:
                ctx.private[name] = module
        ctx.stdout, ctx.stderr = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self.out, self.err

    def launcher_environ(self, rank: int) -> dict[str, str]:
        """The variables MPICH's launcher (hydra) gives process *rank*."""
        if self._local is None:  # (index on its node, ranks on its node) of every rank, worked out once
            node_of = self.world.topology.node_of
            nodes: dict[int, list[int]] = {}
            for r in range(self.world.size):
                nodes.setdefault(node_of(r), []).append(r)
            self._local = {r: (i, len(ranks)) for ranks in nodes.values() for i, r in enumerate(ranks)}
        index, count = self._local[rank]
        return {"PMI_RANK": str(rank), "PMI_SIZE": str(self.world.size), "MPI_LOCALRANKID": str(index),
                "MPI_LOCALNRANKS": str(count)}

    def _drive(self, comm: Any) -> Generator[Any, Any, Any]:
        """The SimPy process of one rank: switch into its greenlet, run the calls it hands over."""
        ctx = self.contexts[comm.world_rank]
        g = ctx.greenlet
        self._enter(ctx)
        out = g.switch()
        while not g.dead:
            self._leave(ctx)
            if out[0] == "abort":
                raise ProgramExit(f"rank {ctx.rank} called MPI_Abort(MPI_COMM_WORLD, {out[1]}){out[2]}", int(out[1]))
            _, gen, event = out
            try:
                while True:
                    try:
                        value = yield event
                    except GeneratorExit:  # the driver itself is being closed (collected after a failure)
                        raise
                    except BaseException as exc:  # a failed event (truncation, ...): the call raises it
                        event = gen.throw(exc)
                    else:
                        event = gen.send(value)
            except GeneratorExit:
                gen.close()
                return None
            except StopIteration as stop:
                self._enter(ctx)
                out = g.switch(stop.value)
            except BaseException as exc:
                self._enter(ctx)
                out = g.throw(exc)
        self._leave(ctx)
        try:
            return self._finished(ctx, *out)
        except MPIError as failure:  # the rank failed: the others go on for the launcher's grace
            if self.failure is None:
                self.failure = failure
                Call(ctx.env, self._stop, None, LAUNCHER_GRACE)
            return None

    @staticmethod
    def _stop(_: Any) -> None:
        raise _LauncherStop

    def _finished(self, ctx: RankContext, how: str, value: Any) -> Any:
        if how == "exit":
            code = value
            if code is None or code == 0:
                return 0
            if not isinstance(code, int):  # sys.exit("message"): Python prints it and exits 1
                sys.stderr.write(f"{code}\n")
                code = 1
            raise ProgramExit(f"rank {ctx.rank} exited with status {code}", code)
        exc = value
        if isinstance(exc, MPIError):
            raise type(exc)(f"{exc}{user_traceback(exc, self.folder)}") from exc
        raise ProgramError(f"rank {ctx.rank} raised {describe_exception(exc)}{user_traceback(exc, self.folder)}") \
            from exc

    # ------------------------------------------------------------------ the run

    def where(self, rank: int) -> str:
        """The line of the program where *rank* is suspended, e.g. ``ring.py:14: comm.send(x, dest=1)``."""
        g = self.contexts[rank].greenlet
        return suspended_at(g.gr_frame, self.folder) if g else ""

    def origin(self) -> tuple[str, int] | None:
        """``(file, line)`` of the program's MPI call in progress (:attr:`site`), for the message it sends.

        The MPI module records the caller's frame on entry to every call (cheap); the file and
        line are read only here, once per send, while that call is still on its line.
        """
        frame = self.site
        known = self._user_files
        while frame is not None:
            name = frame.f_code.co_filename
            mine = known.get(name)
            if mine is None:
                mine = known[name] = is_user_file(name, self.folder)
            if mine:
                return name, frame.f_lineno
            frame = frame.f_back
        return None

    def run(self) -> None:
        """Run the program on every rank to the end (see the class docstring)."""
        saved_modules = {name: sys.modules.get(name) for name in ("__main__", "mpi4py", "mpi4py.MPI", *PER_RANK_STDLIB)}
        saved = (sys.argv, sys.path[:], sys.stdout, sys.stderr, sys.stdin, os.environ)
        finder = _ProgramFinder(self)
        out, err = _Output(self, sys.stdout, self.tag_output), _Output(self, sys.stderr, self.tag_output)
        self.out, self.err = out, err
        for ctx in self.contexts:
            ctx.stdout, ctx.stderr = out, err
        generators = _PerRankGenerators(self, self.seed)
        generators.install()
        for name in PER_RANK_STDLIB:  # each rank imports its own (see "Privatization")
            sys.modules.pop(name, None)
            self.private_names.add(name)
        sys.modules["mpi4py"], sys.modules["mpi4py.MPI"] = self.package, self.mpi_module
        sys.argv = list(self.argv)
        sys.path.insert(0, str(self.folder))
        sys.meta_path.insert(0, finder)
        sys.stdout, sys.stderr, sys.stdin = out, err, _Input(self, sys.stdin if self.stdin is None else self.stdin)
        os.environ = _RankEnviron(self, saved[5])  # type: ignore[assignment]  # noqa: B003 (a view, not a clearing)
        real_getpid = os.getpid
        os.getpid = self._getpid(real_getpid())
        real_exit, real_kill = os._exit, os.kill
        os._exit = _rank_exit(real_exit)  # type: ignore[assignment]
        os.kill = _rank_kill(real_kill)
        self.world.locate = self.where
        self.world.origin = self.origin
        try:
            self.world.launch(self._drive)
            try:
                self.world.run()
            except (_LauncherStop, MPIError):
                if self.failure is None:
                    raise
            if self.failure is not None:
                raise self._reported(self.failure)
        finally:
            self._kill_suspended()
            self.current = self.site = None
            out.finish()
            err.finish()
            self._flush_own_streams()
            generators.remove()
            sys.meta_path.remove(finder)
            sys.argv, sys.path[:], sys.stdout, sys.stderr, sys.stdin = saved[0], saved[1], saved[2], saved[3], saved[4]
            os.environ = saved[5]  # noqa: B003
            os.getpid = real_getpid
            os._exit, os.kill = real_exit, real_kill  # type: ignore[assignment]
            for name in self.private_names:
                sys.modules.pop(name, None)
            for name, module in saved_modules.items():
                if module is None:
                    sys.modules.pop(name, None)
                else:
                    sys.modules[name] = module

    def _getpid(self, pid: int) -> Any:
        """``os.getpid`` while the program runs: each rank is a process of its own under mpiexec, with its own id."""
        def getpid() -> int:
            ctx = self.current
            return pid if ctx is None else pid + 1 + ctx.rank

        return getpid

    def _reported(self, failure: MPIError) -> MPIError:
        """*failure* as reported: a rank's exception says where the others were when the run stopped."""
        elsewhere = self.world.where_ranks_are()
        if not isinstance(failure, ProgramError) or not elsewhere:
            return failure
        error = ProgramError(f"{failure}\nthe other ranks when the launcher stopped them:\n" + "\n".join(elsewhere))
        error.__cause__ = failure.__cause__
        return error

    def _flush_own_streams(self) -> None:
        """Flush the files ranks made their stdout or stderr, as a process's exit would."""
        for ctx in self.contexts:
            for stream in (ctx.stdout, ctx.stderr):
                if stream is not None and stream is not self.out and stream is not self.err:
                    with contextlib.suppress(Exception):
                        stream.flush()

    def _kill_suspended(self) -> None:
        """End the greenlets of ranks a failure left suspended, now, rather than whenever they are collected."""
        for ctx in self.contexts:
            g = ctx.greenlet
            if g and not g.dead:
                self._enter(ctx)
                self.closed = True
                with contextlib.suppress(GreenletExit):
                    g.throw(GreenletExit)
        self.closed = True

    def mpi_times(self) -> list[float]:
        """Simulated seconds each rank spent in blocking MPI calls."""
        return [ctx.mpi_time for ctx in self.contexts]
