"""Will a real-data run fit in memory? An estimate made before anything is allocated.

With real numpy payloads every rank's buffers live in this one process: 8 ranks with a
1.2 GB gradient each are 9.6 GB of inputs before the first message. A run that does not fit
would swap or be killed half-way, so the caller (the scenario layer, a benchmark) asks first:

    need = estimate_collective("allreduce", "ring", ranks=8, nbytes=1_200_000_000, in_place=True)
    check_memory(need)          # raises MemoryLimitError naming the estimate and what is free

The estimate counts payload bytes only (the interpreter and the simulator's own objects are a
few hundred MB at most even at 16384 ranks) and follows what the algorithms allocate:

* **inputs**: one buffer per rank;
* **results**: what each rank returns -- none when the collective works in place (``in_place``:
  the ring allreduce reduces into its input and receives into it, so the result *is* the
  input), otherwise a new buffer per rank of the result's size;
* **working set**: arrays alive in the middle of the algorithm. Block algorithms (ring,
  pairwise, recursive halving) hold about two blocks of n/p per rank besides their result;
  whole-vector algorithms (recursive doubling, binomial trees, the parameter server) hold
  one more vector of n per rank;
* **verification**: checking results against numpy regenerates every input and computes one
  reference result, when the caller asks for it.

Size-only runs (``data=False``) need no payload memory at all.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

try:
    import resource  # POSIX only: the address-space limit is read where the platform has one
except ImportError:  # pragma: no cover
    resource = None

from mpisim.errors import ConfigError

#: Algorithms that work on blocks of n/p; any other is taken to hold whole vectors.
BLOCK_ALGORITHMS = frozenset({"ring", "pairwise", "recursive_halving", "rabenseifner", "bruck"})

#: Result bytes per rank as a function of (per-rank input bytes n, ranks p, is root).
_RESULT = {
    "barrier": lambda n, p, root: 0,
    "bcast": lambda n, p, root: n,
    "reduce": lambda n, p, root: n if root else 0,
    "allreduce": lambda n, p, root: n,
    "allgather": lambda n, p, root: n * p,
    "reduce_scatter": lambda n, p, root: -(-n // p),
    "alltoall": lambda n, p, root: n,
    "gather": lambda n, p, root: n * p if root else 0,
    "scatter": lambda n, p, root: -(-n // p),
}

#: Collectives that accept an owned buffer and leave their result in it (see ``in_place``).
IN_PLACE = frozenset({"allreduce", "bcast", "reduce"})


class MemoryLimitError(ConfigError):
    """A real-data run would need more memory than the machine has available."""


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak payload bytes of one run, and its parts (all in bytes)."""

    inputs: int
    results: int
    working: int
    verification: int
    description: str

    @property
    def total(self) -> int:
        """Peak payload bytes: the sum of the parts."""
        return self.inputs + self.results + self.working + self.verification


def estimate_collective(collective: str, algorithm: str, ranks: int, nbytes: int, *, data: bool = True,
                        in_place: bool = False, verify: bool = False) -> MemoryEstimate:
    """Estimate the peak payload memory of one *collective* call with *nbytes* per rank's buffer.

    *in_place* means every rank hands its buffer over with ``in_place`` (only counted for the
    collectives in :data:`IN_PLACE`); *verify* adds a numpy reference check of the results.
    Raises KeyError for an unknown collective.
    """
    p, n = ranks, nbytes
    result = _RESULT[collective]
    what = f"{collective}/{algorithm}, {p} ranks x {_gb(n)}"
    if not data or collective == "barrier":
        return MemoryEstimate(0, 0, 0, 0, f"{what}, size-only payloads: no payload memory")
    inputs = p * n
    owned = in_place and collective in IN_PLACE
    results = 0 if owned else result(n, p, False) * (p - 1) + result(n, p, True)
    blocks = algorithm in BLOCK_ALGORITHMS
    working = p * (2 * -(-n // p) if blocks else n)
    if owned and blocks:
        working = 0  # blocks are reduced and received where they lie
    verification = (inputs + result(n, p, True)) if verify else 0
    parts = [f"inputs {_gb(inputs)}", f"results {_gb(results)}" + (" (in place)" if owned else ""),
             f"working {_gb(working)}"]
    if verify:
        parts.append(f"numpy check {_gb(verification)}")
    return MemoryEstimate(inputs, results, working, verification, f"{what}: " + ", ".join(parts))


def available_memory() -> int | None:
    """Return the bytes this process can still take, or None if unknown.

    The machine's free memory (MemAvailable) is not the whole answer: a container's cgroup
    (``memory.max``) and the process's own address-space limit (``ulimit -v``) can both be
    smaller, and a run that passes the check against MemAvailable would then die half-way.
    The answer is the smallest of the three, each less what is already in use.
    """
    bounds = [b for b in (_machine_available(), _cgroup_available(), _address_space_available()) if b is not None]
    return max(0, min(bounds)) if bounds else None


def _machine_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max" is no limit


def _cgroup_available() -> int | None:
    """The cgroup v2 memory limit less the group's usage (None without a limit)."""
    limit = _read_int("/sys/fs/cgroup/memory.max")
    used = _read_int("/sys/fs/cgroup/memory.current")
    return None if limit is None or used is None else limit - used


def _address_space_available() -> int | None:
    """RLIMIT_AS less this process's virtual size (None without a limit)."""
    if resource is None:
        return None
    try:
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm") as f:
            virtual = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
    return limit - virtual


def check_memory(estimate: MemoryEstimate, available: int | None = None, *, headroom: float = 0.9,
                 path: str = "payload") -> None:
    """Refuse a run whose estimate exceeds *headroom* x the available memory.

    *available* defaults to :func:`available_memory`; when that is unknown nothing is refused.
    Raises MemoryLimitError (a ConfigError at *path*) naming the estimate, its parts and the
    memory available, before anything has been allocated.
    """
    if available is None:
        available = available_memory()
    if available is None or estimate.total <= headroom * available:
        return
    raise MemoryLimitError(
        f"real-data payloads need about {_gb(estimate.total)} ({estimate.description}) but only "
        f"{_gb(available)} of memory is available; use 'payload: size' (same timings), fewer ranks "
        f"or smaller sizes",
        path,
    )


def _gb(nbytes: int) -> str:
    return f"{nbytes / 1e9:.3g} GB"
