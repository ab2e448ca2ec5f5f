"""A tiny workload kind for the scenario-layer tests: rank 0 sends one message to rank 1 per size.

Registered as ``fake_pingpong`` when this module is imported (sweep workers import it too,
because it registered a workload kind). ``mode: deadlock`` makes both ranks receive first;
``sleep`` adds wall-clock time per size and ``log_file`` records which seeds ran, so the sweep
tests can interrupt a run and see which points a resumed run repeats.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mpisim.engine.units import parse_size, parse_time
from mpisim.errors import ConfigError
from mpisim.mpi import make_payload
from mpisim.workloads.base import RunContext, WorkloadOutput, register_workload

KIND = "fake_pingpong"
_KEYS = ("sizes", "sleep", "log_file", "mode")


@dataclass(frozen=True)
class FakeParams:
    sizes: tuple[int, ...]
    sleep: float = 0.0
    log_file: str | None = None
    mode: str = "ok"


def parse(raw: dict[str, Any]) -> FakeParams:
    for key in raw:
        if key not in _KEYS:
            raise ConfigError(f"unknown key {key!r}; allowed keys: {', '.join(_KEYS)}", str(key))
    sizes = raw.get("sizes")
    if not isinstance(sizes, list) or not sizes:
        raise ConfigError(f"expected a non-empty list of sizes, got {sizes!r}", "sizes")
    parsed = []
    for i, size in enumerate(sizes):
        try:
            parsed.append(parse_size(size))
        except ConfigError as err:
            raise ConfigError(err.message, f"sizes[{i}]") from None
    mode = raw.get("mode", "ok")
    if mode not in ("ok", "deadlock", "die"):
        raise ConfigError(f"expected ok, deadlock or die, got {mode!r}", "mode")
    try:
        sleep = parse_time(raw.get("sleep", 0))
    except ConfigError as err:
        raise ConfigError(err.message, "sleep") from None
    return FakeParams(tuple(parsed), sleep, raw.get("log_file"), mode)


def dump(params: FakeParams) -> dict[str, Any]:
    out: dict[str, Any] = {"sizes": list(params.sizes), "sleep": params.sleep, "mode": params.mode}
    if params.log_file is not None:
        out["log_file"] = params.log_file
    return out


def run(params: FakeParams, ctx: RunContext) -> WorkloadOutput:
    output = WorkloadOutput()
    if params.mode == "die":  # the process running the point is killed, as by the OOM killer
        os.kill(os.getpid(), signal.SIGKILL)
    if params.log_file:
        with Path(params.log_file).open("a") as log:
            log.write(f"seed={ctx.seed}\n")
    for size in params.sizes:
        world = ctx.new_world()
        got = {}

        def program(comm, size=size, got=got):
            if params.mode == "deadlock":
                yield from comm.recv(source=1 - comm.rank)
                return
            if comm.rank == 0:
                buf = make_payload(size, np.uint8, data=ctx.data, fill=np.arange(size) % 251 if ctx.data else None)
                yield from comm.send(buf, dest=1)
            elif comm.rank == 1:
                got["buf"] = yield from comm.recv(source=0)
                got["t"] = comm.now

        world.launch(program)
        world.run()
        verified = None
        if ctx.data:
            array = got["buf"].array if hasattr(got["buf"], "array") else np.asarray(got["buf"])
            verified = bool(np.array_equal(array, np.arange(size) % 251))
        output.rows.append(
            {"bytes": size, "ranks": world.size, "time_s": got.get("t", world.sim.now), "verified": verified}
        )
        output.worlds.append((f"pingpong/{size} B", world))
        if params.sleep:
            time.sleep(params.sleep)
    return output


register_workload(KIND, "test-only: one message from rank 0 to rank 1 per size", parse=parse, dump=dump, run=run,
                  columns=("bytes", "ranks", "time_s", "verified"))
