"""The ``program`` workload: run a user's Python function on every rank, like ``mpirun -n P``.

A program is a generator function written against the Comm API, in a file next to the
scenario::

    # halo.py
    import numpy as np

    def main(comm):
        left, right = (comm.rank - 1) % comm.size, (comm.rank + 1) % comm.size
        got = yield from comm.sendrecv(np.full(4, comm.rank), dest=right, source=left)
        return {"received_from_left": int(got[0])}

and the scenario names it as ``program: halo.py:main`` (``:main`` may be left out), resolved
against the scenario file's directory.

**The names** are mpi4py's (:mod:`mpisim.mpi.comm`); each blocking one is used with ``yield from``:

* lowercase, returning the data: ``send, ssend, recv, sendrecv, probe, wait, waitall, waitany,
  barrier, bcast, reduce, allreduce, allgather, reduce_scatter, alltoall, gather, scatter,
  split, dup``; non-blocking ``isend, issend, irecv, iprobe, test``;
* uppercase, filling the caller's arrays (``IN_PLACE`` as the send buffer where MPI allows it):
  ``Send, Ssend, Recv, Sendrecv, Sendrecv_replace, Probe, Barrier, Bcast, Reduce, Allreduce,
  Reduce_scatter_block, Gather, Scatter, Allgather, Alltoall, Split, Dup, Clone``; non-blocking
  ``Isend, Issend, Irecv, Iprobe``; and ``Free``, ``Get_rank``, ``Get_size``, ``Get_attr(TAG_UB)``;
* on requests: ``req.Wait()``/``req.wait()``, ``req.Test()``/``req.test()``,
  ``Request.Waitall(reqs)``/``waitall``, ``Request.Waitany(reqs)``/``waitany``, ``Request.Testall``;
* mpisim's own: ``compute(seconds)``, ``start(call)`` (overlap), ``algorithm=`` on collectives.

A blocking call written without ``yield from`` (``comm.send(x, dest=1)``) never runs; the run
then fails naming the rank, the file and the line (before the deadlock report it usually
causes), and using such a call as its result (``new = comm.dup(); new.rank``) is an error
naming the line too. With an ``args:`` mapping the function is called as
``main(comm, args)`` and gets the mapping as written in the YAML (its values are the program's
business: it may parse units itself, e.g. with :func:`mpisim.engine.units.parse_size`).

The row has ``ranks``, ``time_s`` (simulated time when the last rank finished), ``messages``
and ``bytes`` (point-to-point messages delivered, collectives' included). If rank 0's function
returns a mapping, its entries are merged into the row, converted to plain JSON values (numpy
scalars and arrays become numbers and lists); an entry that would overwrite one of the four
columns above is left out and mentioned in the notes.

**Unchanged mpi4py programs** (``api: mpi4py``): the file is a script written for mpi4py,
run on every rank as ``mpiexec -n P python file.py ARGS`` would run it (see
:mod:`mpisim.compat`)::

    workload: {kind: program, program: programs/mpi4py/ring.py, api: mpi4py, args: ["--n", "4"]}

``args`` is then the list of command-line arguments (``sys.argv[1:]``); ``compute`` says what
the Python code between two MPI calls costs: ``explicit`` (default: only what the program
declares with ``mpisim.compute(seconds)``), ``none``, or ``measured`` (its wall time times
``speed``; not deterministic). ``tag_output: true`` prefixes each output line with
``[rank] ``. The row adds ``exit_code`` and ``mpi_time_s`` (per rank, the simulated time spent in
blocking MPI calls).

Errors of the simulated program are not caught: a deadlock raises
:class:`~mpisim.errors.DeadlockError` with the report of blocked ranks (the CLI exits 1 and
prints it). Messages nobody received are listed in the notes.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mpisim.engine.reader import Choice, Custom, Flag
from mpisim.engine.sim import Proc
from mpisim.errors import ConfigError, MPIError, ProgramError, describe_exception
from mpisim.mpi.comm import Comm
from mpisim.mpi.usercomm import UserComm
from mpisim.workloads.base import RunContext, WorkloadOutput, register_workload
from mpisim.workloads.fields import check_keys, read, workload_block

KIND = "program"
RESERVED = ("ranks", "time_s", "messages", "bytes")

APIS = ("generator", "mpi4py")


def _compute_modes() -> tuple[str, ...]:
    # Imported when asked: compat.ranks brings the per-rank import machinery, which only mpi4py programs need.
    from mpisim.compat.ranks import COMPUTE_MODES

    return COMPUTE_MODES


def _as_given(value: Any, path: str) -> Any:
    return value  # read by parse below, where the api decides what the field means


#: The ``workload: {kind: program, ...}`` block.
SCHEMA = workload_block(KIND, {
    "program": Custom(_as_given, {"type": "string", "pattern": r"\.py(:[A-Za-z_][A-Za-z0-9_]*)?\s*$"},
                      required="this key is required, e.g. programs/halo.py:main",
                      description="FILE.py:FUNCTION (generator api) or FILE.py (mpi4py api), relative to the scenario."),
    "args": Custom(_as_given, {"type": ["object", "array"]},
                   description="generator: a mapping passed to the function; mpi4py: the command-line arguments."),
    "api": Choice(APIS, "expected one of {choices}, got {value!r}",
                  description="generator: main(comm) with yield from; mpi4py: an unchanged mpi4py program."),
    "compute": Custom(_as_given, lambda: {"enum": list(_compute_modes())},
                      description="mpi4py: how the program's own compute time counts."),
    "speed": Custom(_as_given, {"type": "number", "exclusiveMinimum": 0},
                    description="mpi4py, compute: measured: the simulated machine's time per second of this one's."),
    "tag_output": Flag(description="mpi4py: prefix each line a rank prints with its rank."),
})


@dataclass(frozen=True)
class ProgramParams:
    """A validated ``program`` workload: the file (as written), the function name and its args.

    For ``api: mpi4py`` *args* is the program's command line (a list of strings) and
    *function* is unused.
    """

    path: str
    function: str = "main"
    args: Any = field(default=None, compare=True, hash=False)
    api: str = "generator"
    compute: str = "explicit"
    speed: float = 1.0
    tag_output: bool = False


def parse(raw: Any) -> ProgramParams:
    """Validate a ``workload:`` mapping of kind ``program``. Raises ConfigError with a relative path.

    The file itself is looked up at run time, against the scenario's directory.
    """
    raw = check_keys(raw, SCHEMA, KIND)
    read(SCHEMA, raw, "program")
    api = read(SCHEMA, raw, "api", "generator")
    if api == "mpi4py":
        return _parse_mpi4py(raw)
    for key in ("compute", "speed", "tag_output"):
        if key in raw:
            raise ConfigError(f"{key} applies to api: mpi4py programs only", key)
    spec = raw["program"]
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"expected FILE.py or FILE.py:FUNCTION, got {spec!r}", "program")
    text = spec.strip()
    head, sep, tail = text.rpartition(":")
    path, function = (head, tail) if sep and head.endswith(".py") else (text, "main")
    if not path.endswith(".py"):
        raise ConfigError(f"expected a Python file FILE.py or FILE.py:FUNCTION, got {spec!r}", "program")
    if not function.isidentifier():
        raise ConfigError(f"{function!r} is not a Python function name", "program")
    args = raw.get("args")
    if args is not None and not isinstance(args, Mapping):
        raise ConfigError(f"expected a mapping of arguments for the program, got {args!r}", "args")
    return ProgramParams(path, function, dict(args) if args is not None else None)


def _parse_mpi4py(raw: Mapping[str, Any]) -> ProgramParams:
    COMPUTE_MODES = _compute_modes()
    spec = raw["program"]
    if not isinstance(spec, str) or not spec.strip():  # any name, as mpiexec runs python FILE (read at run time)
        raise ConfigError(f"expected the program's file, got {spec!r}", "program")
    args = raw.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str | int | float) and not isinstance(a, bool) for a in args):
        raise ConfigError(f"expected the program's command-line arguments as a list of strings, got {args!r}", "args")
    compute = raw.get("compute", "explicit")
    if compute not in COMPUTE_MODES:
        raise ConfigError(f"expected one of {', '.join(COMPUTE_MODES)}, got {compute!r}", "compute")
    speed = raw.get("speed", 1.0)
    if isinstance(speed, bool) or not isinstance(speed, int | float) or not 0 < speed < 1e6:
        raise ConfigError(f"expected a positive factor (the simulated machine's time per second of this one's), "
                          f"got {speed!r}", "speed")
    if "speed" in raw and compute != "measured":
        raise ConfigError("speed scales measured compute; it needs compute: measured", "speed")
    tag = read(SCHEMA, raw, "tag_output", False)
    return ProgramParams(spec.strip(), "", [str(a) for a in args], "mpi4py", compute, float(speed), tag)


def dump(params: ProgramParams) -> dict[str, Any]:
    """Return the workload in a form :func:`parse` reads back."""
    if params.api == "mpi4py":
        out = {"kind": KIND, "program": params.path, "api": "mpi4py", "args": list(params.args),
               "compute": params.compute}
        if params.compute == "measured":
            out["speed"] = params.speed
        if params.tag_output:
            out["tag_output"] = True
        return out
    out: dict[str, Any] = {"kind": KIND, "program": f"{params.path}:{params.function}"}
    if params.args is not None:
        out["args"] = dict(params.args)
    return out


def load_program(params: ProgramParams, base_dir: Path) -> Callable[..., Proc[Any]]:
    """Import the program's file under a unique module name and return its function.

    Raises ConfigError (path ``program``) if the file is missing, fails to import, or has no
    such generator function.
    """
    file = Path(params.path)
    if not file.is_absolute():
        file = base_dir / file
    if not file.is_file():
        raise ConfigError(f"no program file {str(file)!r}", "program")
    _check_source(file, params)  # before importing: a wrong program must not run its module code first
    digest = hashlib.sha1(str(file.resolve()).encode()).hexdigest()[:12]
    name = f"mpisim_program_{file.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot import {str(file)!r}", "program")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise ConfigError(f"importing {file.name} failed: {type(err).__name__}: {err}", "program") from err
    function = getattr(module, params.function, None)
    if function is None:
        raise ConfigError(f"{file.name} has no function {params.function!r}", "program")
    if not inspect.isgeneratorfunction(function):
        raise ConfigError(
            f"{file.name}:{params.function} must be a generator function (it blocks with "
            "'yield from comm.send(...)' and the like)", "program")
    wanted = 2 if params.args is not None else 1
    try:
        inspect.signature(function).bind(*([None] * wanted))
    except TypeError:
        how = "(comm, args) because the scenario gives args" if wanted == 2 else "(comm)"
        raise ConfigError(f"{file.name}:{params.function} must accept {how}", "program") from None
    return function


_OURS = (Path(__file__).resolve().parents[1], Path(inspect.getfile(np)).resolve().parents[1])


def user_frames(exc: BaseException) -> str:
    """The traceback of *exc* restricted to the user's files: mpisim's, SimPy's and the library's frames left out.

    A student's IndexError in ``helper()`` then reads as it would under ``mpiexec``: the
    lines of their own program, innermost last, without the simulator around them.
    """
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not any(Path(f.filename).resolve().is_relative_to(ours) for ours in _OURS)]
    if not frames:
        return ""
    return "\n" + "".join(traceback.format_list(frames)).rstrip("\n")


def check_program(params: ProgramParams, base_dir: Path) -> None:
    """Refuse, before anything runs or is announced, a program file that is missing or whose
    function has the wrong shape (read from the source, nothing imported)."""
    file = Path(params.path)
    if not file.is_absolute():
        file = base_dir / file
    if not file.is_file():
        raise ConfigError(f"no program file {str(file)!r}", "program")
    if params.api != "mpi4py":
        _check_source(file, params)


def _check_source(file: Path, params: ProgramParams) -> None:
    """Check, from the source alone, that *file* defines the program function with the right shape.

    Importing a module runs its top-level code, so a scenario naming the wrong file or
    function is refused before that: the function must be defined there with ``def``, be a
    generator (it ``yield``s), and take ``(comm)`` or, with ``args:``, ``(comm, args)``.
    """
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=file.name)
    except (SyntaxError, UnicodeDecodeError, ValueError) as err:
        raise ConfigError(f"cannot read {file.name} as Python: {err}", "program") from None
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == params.function]
    if not found:
        raise ConfigError(f"{file.name} defines no function {params.function!r} (with def, at top level)", "program")
    func = found[-1]

    def yields(node: ast.AST) -> bool:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
                continue  # a nested function's yield makes *it* the generator
            if isinstance(child, ast.Yield | ast.YieldFrom) or yields(child):
                return True
        return False

    if not yields(func):
        raise ConfigError(f"{file.name}:{params.function} must be a generator function (it blocks with "
                          "'yield from comm.send(...)' and the like)", "program")
    wanted = 2 if params.args is not None else 1
    positional = len(func.args.posonlyargs) + len(func.args.args)
    required = positional - len(func.args.defaults)
    if required > wanted or (positional < wanted and func.args.vararg is None):
        how = "(comm, args) because the scenario gives args" if wanted == 2 else "(comm)"
        raise ConfigError(f"{file.name}:{params.function} must accept {how}", "program")


def to_json_value(value: Any) -> Any:
    """Return *value* with numpy scalars and arrays turned into plain Python numbers and lists."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): to_json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json_value(v) for v in value]
    return value


def run(params: ProgramParams, ctx: RunContext) -> WorkloadOutput:
    """Run the program once on a fresh world; return one row (see the module docstring)."""
    if params.api == "mpi4py":
        # Lazy, as COMPUTE_MODES above: the mpi4py layer (compat) loads only for mpi4py programs.
        from mpisim.workloads.mpi4py_program import run_mpi4py

        return run_mpi4py(params, ctx)
    function = load_program(params, ctx.base_dir)
    world = ctx.new_world()
    world.comm_class = UserComm  # a blocking call written without `yield from` is reported, not lost
    args = () if params.args is None else (dict(params.args),)

    finished = [0.0] * world.size

    def rank_main(comm: Comm) -> Proc[Any]:
        try:
            result = yield from function(comm, *args)
        except MPIError as exc:
            raise type(exc)(f"{exc}{user_frames(exc)}") from exc
        except Exception as exc:
            raise ProgramError(f"rank {comm.world_rank} raised {describe_exception(exc)}{user_frames(exc)}") from exc
        finished[comm.rank] = comm.now
        return result

    procs = world.launch(rank_main)
    try:
        world.run()
    except ProgramError as exc:
        elsewhere = world.where_ranks_are()
        if elsewhere:
            raise ProgramError(f"{exc}\nthe other ranks at that moment:\n" + "\n".join(elsewhere)) from exc.__cause__
        raise
    out = WorkloadOutput()
    row: dict[str, Any] = {
        "ranks": world.size,
        "time_s": max(finished),
        "messages": world.tracer.message_count,
        "bytes": world.tracer.message_bytes,
    }
    returned = procs[0].value if procs else None
    if isinstance(returned, Mapping):
        for key, value in returned.items():
            if str(key) in RESERVED:
                out.notes.append(f"rank 0 returned {key!r}, which would overwrite a column; left out")
            else:
                row[str(key)] = to_json_value(value)
    out.rows.append(row)
    out.worlds.append((Path(params.path).name, world))
    out.notes.extend(world.unmatched)
    return out


WORKLOAD = register_workload(
    KIND, "a user's Python generator run on every rank against the Comm API",
    parse=parse, dump=dump, run=run, schema=SCHEMA,
)
