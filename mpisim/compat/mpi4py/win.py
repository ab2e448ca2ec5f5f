"""``MPI.Win``: one-sided communication (RMA windows) as mpi4py has it, timed by :mod:`mpisim.mpi.rma`.

A window is memory each member of a communicator exposes, collectively, so that any member
can ``Put`` into, ``Get`` from or ``Accumulate`` into another's without the target taking
part::

    win = MPI.Win.Allocate(8 * n, disp_unit=8, comm=comm)      # or Win.Create(my_array, ...)
    mine = np.frombuffer(win.tomemory(), dtype="d")
    win.Fence()
    win.Put(np.full(n, rank, "d"), target_rank=(rank + 1) % size)
    win.Fence()                                                # every put has landed
    win.Lock(0); win.Accumulate(np.ones(1), 0, op=MPI.SUM); win.Unlock(0)

The bytes land in the target rank's own array (all ranks share the simulator's memory) at the
instant the operation reaches the target over the network model; the origin's ``Fence``,
``Unlock``, ``Flush`` or ``Complete`` wait for its operations to complete, as MPICH's do
(:mod:`mpisim.mpi.rma`). Synchronization: ``Fence`` (complete, then a barrier of the window's
group), ``Lock``/``Unlock`` (exclusive or shared, per target), ``Lock_all``/``Unlock_all``,
``Flush*``, and post-start-complete-wait (``Post``, ``Start``, ``Complete``, ``Wait``).
``Allocate_shared`` with ``Shared_query`` gives the same memory to load and store directly.
Target specs are mpi4py's: ``target`` None (displacement 0, the origin's size), a
displacement, or ``(disp, count, datatype)``; displacements count in the window's ``disp_unit``.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from mpisim.compat.buffers import memory_of
from mpisim.compat.mpi4py import memory as _memory
from mpisim.compat.mpi4py.comm import COMM_SELF
from mpisim.compat.mpi4py.environment import ERRORS_RETURN, Errhandler, here
from mpisim.compat.mpi4py.group import Group
from mpisim.compat.mpi4py.info import Info
from mpisim.compat.mpi4py.msgbuffer import elements, receiving
from mpisim.compat.mpi4py.nbc import CollectiveRequest
from mpisim.compat.mpi4py.op import SUM, Op
from mpisim.compat.mpi4py.request import Request
from mpisim.compat.unsupported import Strict, unsupported
from mpisim.engine.events import AllDone
from mpisim.errors import InvalidArgumentError, MPIError
from mpisim.mpi import rma
from mpisim.mpi.constants import PROC_NULL

LOCK_EXCLUSIVE, LOCK_SHARED = 234, 235  # MPICH's values
MODE_NOCHECK, MODE_NOSTORE, MODE_NOPUT, MODE_NOPRECEDE, MODE_NOSUCCEED = 1024, 2048, 4096, 8192, 16384
WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_MODEL = 1711276033, 1711276035, 1711276037, 1711276039, 1711276041
WIN_FLAVOR_CREATE, WIN_FLAVOR_ALLOCATE, WIN_FLAVOR_DYNAMIC, WIN_FLAVOR_SHARED = 1, 2, 3, 4
WIN_SEPARATE, WIN_UNIFIED = 1, 2

#: world -> {window key: _Shared}: what every member of a window sees of it.
_WINDOWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Shared:
    """One window as all its members know it: each member's memory and disp_unit, each target's lock."""

    def __init__(self) -> None:
        self.memory: dict[int, np.ndarray] = {}  # rank in the window's group -> its bytes (uint8)
        self.disp_unit: dict[int, int] = {}
        self.locks: dict[int, rma.TargetLock] = {}
        self.posted: dict[int, set[int]] = {}  # target -> origins its Post exposed it to, not yet started
        self.completed: dict[int, int] = {}  # target -> origins whose Complete has reached it
        self.changed: dict[int, Any] = {}  # rank -> the event its Start or Wait sleeps on until a header arrives
        self.attached: dict[int, list[np.ndarray]] = {}  # a dynamic window: rank -> the regions it attached

    def wake(self, rank: int) -> None:
        event = self.changed.pop(rank, None)
        if event is not None:
            event.succeed()


def _as_bytes_of(memory: Any) -> np.ndarray:
    if memory is None:
        return np.zeros(0, np.uint8)
    if isinstance(memory, list | tuple):  # [buf, datatype] or [buf, count, datatype]: the buffer
        memory = memory[0]
    array = memory_of(memory).view(np.uint8)
    return array


class Win(metaclass=Strict):
    """An RMA window of the calling rank (see the module docstring)."""

    def __init__(self, win: Any = None) -> None:
        self._name, self._info = "", None
        if isinstance(win, Win):
            self.__dict__.update(win.__dict__)
        elif win is None:
            self._c = None
        else:  # mpi4py's typed argument: MPI.Win(obj) of anything but a window is a TypeError
            raise TypeError(f"Argument 'win' has incorrect type (expected mpi4py.MPI.Win, got {type(win).__name__})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Win) and other._c is self._c and getattr(other, "_shared", None) is \
            getattr(self, "_shared", None)

    def __hash__(self) -> int:
        return id(getattr(self, "_shared", None))

    def __reduce__(self) -> Any:
        """``WIN_NULL`` pickles as itself; a live window cannot be pickled (mpi4py's ValueError)."""
        if self._c is None:
            return _win_null, ()
        raise ValueError("cannot serialize 'mpi4py.MPI.Win' instance")

    def Get_info(self) -> Any:
        """The hints given at creation or with ``Set_info`` (a copy), as an ``MPI.Info``."""
        return (self._info or Info.Create()).Dup()

    def Set_info(self, info: Any) -> None:
        self._info = info.Dup() if info else None

    info = property(Get_info, Set_info)

    # ---- creation and release (collective over the communicator)

    @classmethod
    def _make(cls, call: str, memory: np.ndarray, disp_unit: int, comm: Any, flavor: int) -> Win:
        ctx = here(call)
        parent = comm._on(ctx)
        if int(disp_unit) <= 0:
            raise InvalidArgumentError(f"rank {ctx.rank}: {call}: disp_unit must be positive, not {disp_unit}")
        counts = ctx.cache.setdefault("windows", {})
        n = counts[parent.context] = counts.get(parent.context, 0) + 1
        c = parent.sub(list(range(parent.size)), label=f"win{n}")  # MPICH dups the communicator
        shared = _WINDOWS.setdefault(parent.world, {}).setdefault((parent.context, n), _Shared())
        shared.memory[c.rank], shared.disp_unit[c.rank] = memory, int(disp_unit)
        ctx.block(c.barrier())  # MPICH exchanges every member's base, size and disp_unit
        win = cls()
        win._c, win._shared, win._flavor, win._pending, win._held = c, shared, flavor, [], {}
        win._exposed, win._access = 0, []
        return win

    @classmethod
    def Create(cls, memory: Any, disp_unit: int = 1, info: Any = None, comm: Any = None) -> Win:
        """Expose the program's own *memory* (``MPI_Win_create``): other ranks' puts land in it."""
        memory = _as_bytes_of(memory)
        if memory.size and not memory.flags.writeable:
            raise BufferError("Win.Create: the window's memory is not writable")
        return cls._make("Win.Create", memory, disp_unit, _comm(comm), WIN_FLAVOR_CREATE)

    @classmethod
    def Allocate(cls, size: int, disp_unit: int = 1, info: Any = None, comm: Any = None) -> Win:
        """Allocate *size* bytes and expose them (``MPI_Win_allocate``); ``tomemory()`` gives them."""
        return cls._make("Win.Allocate", np.zeros(int(size), np.uint8), disp_unit, _comm(comm), WIN_FLAVOR_ALLOCATE)

    @classmethod
    def Allocate_shared(cls, size: int, disp_unit: int = 1, info: Any = None, comm: Any = None) -> Win:
        """Allocate memory every member can also load and store directly (``MPI_Win_allocate_shared``; ``Shared_query``)."""
        return cls._make("Win.Allocate_shared", np.zeros(int(size), np.uint8), disp_unit, _comm(comm),
                         WIN_FLAVOR_SHARED)

    @classmethod
    def Create_dynamic(cls, info: Any = None, comm: Any = None) -> Win:
        """A window with no memory yet (``MPI_Win_create_dynamic``): each rank ``Attach``es regions later.

        Targets then name bytes by their absolute address at the target (``MPI.Get_address`` of
        the target's buffer, usually sent to the origin first); the disp_unit is 1.
        """
        return cls._make("Win.Create_dynamic", np.zeros(0, np.uint8), 1, _comm(comm), WIN_FLAVOR_DYNAMIC)

    def Attach(self, memory: Any) -> None:
        """Expose *memory* through this rank's part of a dynamic window (``MPI_Win_attach``; local)."""
        self._dynamic("Win.Attach")
        self._shared.attached.setdefault(self._c.rank, []).append(_as_bytes_of(memory))

    def Detach(self, memory: Any) -> None:
        """Stop exposing the region *memory* starts (``MPI_Win_detach``; local)."""
        self._dynamic("Win.Detach")
        start = _as_bytes_of(memory).ctypes.data
        regions = self._shared.attached.get(self._c.rank, [])
        for i, region in enumerate(regions):
            if region.ctypes.data == start:
                del regions[i]
                return
        raise MPIError(f"rank {here('Win.Detach').rank}: Win.Detach: the memory at {start:#x} is not attached")

    def Shared_query(self, rank: int) -> tuple[_memory.buffer, int]:
        """``(memory, disp_unit)`` of *rank*'s part of a shared window, to load and store directly."""
        self._live("Win.Shared_query")
        if rank == PROC_NULL:  # MPI: the segment of the lowest rank that has one
            rank = next((r for r in sorted(self._shared.memory) if self._shared.memory[r].size), 0)
        rank = self._target(rank, "Win.Shared_query")
        return _memory.of(self._shared.memory[rank]), self._shared.disp_unit[rank]

    def tomemory(self) -> _memory.buffer:
        """This rank's window memory (``np.frombuffer(win.tomemory(), dtype=...)`` reads and writes it)."""
        self._live("Win.tomemory")
        return _memory.of(self._shared.memory[self._c.rank])

    def Free(self) -> None:
        """Release the window (collective: MPICH completes and synchronizes, a barrier)."""
        ctx = here("Win.Free")
        self._live("Win.Free")
        self._complete(ctx, "Win.Free", self._pending)
        ctx.block(self._c.barrier())
        self._c = None

    free = Free

    def __bool__(self) -> bool:
        return self._c is not None

    def __repr__(self) -> str:
        return "<mpi4py.MPI.Win>"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise unsupported(f"Win.{name}")

    # ---- what the window is

    def Get_group(self) -> Group:
        self._live("Win.Get_group")
        return Group(tuple(self._c.group))

    group = property(Get_group)
    group_size = property(lambda self: self._c.size)
    group_rank = property(lambda self: self._c.rank)

    def Get_attr(self, keyval: int) -> Any:
        """``WIN_BASE``, ``WIN_SIZE``, ``WIN_DISP_UNIT``, ``WIN_CREATE_FLAVOR``, ``WIN_MODEL`` (unified, as MPICH's)."""
        self._live("Win.Get_attr")
        mine = self._shared.memory[self._c.rank]
        return {WIN_BASE: mine.ctypes.data if mine.size else 0, WIN_SIZE: int(mine.size),
                WIN_DISP_UNIT: self._shared.disp_unit[self._c.rank], WIN_CREATE_FLAVOR: self._flavor,
                WIN_MODEL: WIN_UNIFIED}.get(keyval)

    attrs = property(lambda self: (self.Get_attr(WIN_BASE), self.Get_attr(WIN_SIZE), self.Get_attr(WIN_DISP_UNIT)))
    flavor = property(lambda self: self._flavor)
    model = property(lambda self: WIN_UNIFIED)

    def Get_errhandler(self) -> Errhandler:
        """The window's error handler (``ERRORS_RETURN`` unless set: errors raise ``MPI.Exception``)."""
        return self.__dict__.get("_errhandler", ERRORS_RETURN).handle()

    def Set_errhandler(self, errhandler: Errhandler) -> None:
        self._errhandler = errhandler.handle()  # the window keeps its own reference, as MPI does

    def Get_name(self) -> str:
        return self._name

    def Set_name(self, name: str) -> None:
        self._name = str(name)

    name = property(Get_name, Set_name)

    # ---- the operations

    def Put(self, origin: Any, target_rank: int, target: Any = None) -> None:
        """Write *origin* into *target_rank*'s window (``MPI_Put``); complete at the next synchronization."""
        self._post("Win.Put", origin, target_rank, target, None)

    def Accumulate(self, origin: Any, target_rank: int, target: Any = None, op: Op = SUM) -> None:
        """Combine *origin* into the target's window with *op*, element by element, atomically (``MPI_Accumulate``)."""
        self._post("Win.Accumulate", origin, target_rank, target, op)

    def Get(self, origin: Any, target_rank: int, target: Any = None) -> None:
        """Read the target's window into *origin* (``MPI_Get``); the data is there after the next synchronization."""
        self._fetch("Win.Get", None, origin, target_rank, target, None)

    def Get_accumulate(self, origin: Any, result: Any, target_rank: int, target: Any = None, op: Op = SUM) -> None:
        """Fetch the target's data into *result*, then combine *origin* into it with *op* (``MPI_Get_accumulate``)."""
        self._fetch("Win.Get_accumulate", origin, result, target_rank, target, op)

    def Fetch_and_op(self, origin: Any, result: Any, target_rank: int, target_disp: int = 0, op: Op = SUM) -> None:
        """One element: fetch into *result*, combine *origin* into the target with *op* (``MPI_Fetch_and_op``)."""
        _one_element("Win.Fetch_and_op", origin, result)
        self._fetch("Win.Fetch_and_op", origin, result, target_rank, target_disp, op)

    def Compare_and_swap(self, origin: Any, compare: Any, result: Any, target_rank: int, target_disp: int = 0) -> None:
        """One element: fetch into *result*; replace with *origin* if it equalled *compare* (``MPI_Compare_and_swap``)."""
        _one_element("Win.Compare_and_swap", origin, compare, result)
        expect = np.array(elements(compare, "Win.Compare_and_swap")[:1], copy=True)
        swap = Op("cas", None, None)
        swap._sim = _CompareSwap(expect)
        self._fetch("Win.Compare_and_swap", origin, result, target_rank, target_disp, swap)

    def Rput(self, origin: Any, target_rank: int, target: Any = None) -> Request:
        """``Put`` with a request that completes with it (``MPI_Rput``)."""
        return self._request(self._post("Win.Rput", origin, target_rank, target, None))

    def Raccumulate(self, origin: Any, target_rank: int, target: Any = None, op: Op = SUM) -> Request:
        return self._request(self._post("Win.Raccumulate", origin, target_rank, target, op))

    def Rget(self, origin: Any, target_rank: int, target: Any = None) -> Request:
        return self._request(self._fetch("Win.Rget", None, origin, target_rank, target, None))

    def Rget_accumulate(self, origin: Any, result: Any, target_rank: int, target: Any = None, op: Op = SUM) -> Request:
        return self._request(self._fetch("Win.Rget_accumulate", origin, result, target_rank, target, op))

    # ---- synchronization

    def Fence(self, assertion: int = 0) -> None:
        """End the epoch: this rank's operations complete, then a barrier of the window's group (``MPI_Win_fence``)."""
        ctx = here("Win.Fence")
        self._live("Win.Fence")
        self._complete(ctx, "Win.Fence", self._pending)
        ctx.block(self._c.barrier())

    def Lock(self, rank: int, lock_type: int = LOCK_EXCLUSIVE, assertion: int = 0) -> None:
        """Start a passive-target epoch at *rank* (``MPI_Win_lock``): wait for its lock to be granted."""
        ctx = here("Win.Lock")
        if rank == PROC_NULL:
            return
        target = self._target(rank, "Win.Lock")
        if target in self._held:
            raise MPIError(f"rank {ctx.rank}: Win.Lock: the window at rank {rank} is already locked by this rank")
        if lock_type not in (LOCK_EXCLUSIVE, LOCK_SHARED):
            raise InvalidArgumentError(f"rank {ctx.rank}: Win.Lock: lock_type must be MPI.LOCK_EXCLUSIVE or MPI.LOCK_SHARED")
        exclusive = lock_type == LOCK_EXCLUSIVE
        c = self._c
        state = self._shared.locks.setdefault(target, rma.TargetLock())
        event = rma.lock(c.world, c.world_rank, c.group[target], state, exclusive)
        self._held[target] = exclusive
        self._wait(ctx, event, f"Win.Lock({rank})")

    def Unlock(self, rank: int) -> None:
        """End the epoch at *rank*: its operations complete, then the lock is released (``MPI_Win_unlock``)."""
        ctx = here("Win.Unlock")
        if rank == PROC_NULL:
            return
        target = self._target(rank, "Win.Unlock")
        if target not in self._held:
            raise MPIError(f"rank {ctx.rank}: Win.Unlock: the window at rank {rank} is not locked by this rank")
        self._flush(ctx, "Win.Unlock", target)
        c = self._c
        exclusive = self._held.pop(target)
        self._wait(ctx, rma.unlock(c.world, c.world_rank, c.group[target], self._shared.locks[target], exclusive),
                   f"Win.Unlock({rank})")

    def Lock_all(self, assertion: int = 0) -> None:
        """A shared lock at every member (``MPI_Win_lock_all``)."""
        for rank in range(self._c.size):
            self.Lock(rank, LOCK_SHARED)

    def Unlock_all(self) -> None:
        for rank in range(self._c.size):
            self.Unlock(rank)

    def Flush(self, rank: int) -> None:
        """Complete this rank's operations on *rank* without ending the epoch (``MPI_Win_flush``)."""
        ctx = here("Win.Flush")
        self._flush(ctx, "Win.Flush", self._target(rank, "Win.Flush"))

    Flush_local = Flush

    def Flush_all(self) -> None:
        ctx = here("Win.Flush_all")
        self._complete(ctx, "Win.Flush_all", self._pending)

    Flush_local_all = Flush_all

    def Sync(self) -> None:
        """Memory and window copies agree (one copy here: nothing to do)."""

    def Post(self, group: Group, assertion: int = 0) -> None:
        """Expose this rank's window to *group*'s origins (``MPI_Win_post``): each is told with a header."""
        ctx = here("Win.Post")
        c, me = self._c, self._c.rank
        origins = [c.group.index(m) for m in group._members]
        self._exposed = len(origins)
        for origin in origins:
            def told(origin: int = origin) -> None:
                self._shared.posted.setdefault(origin, set()).add(me)
                self._shared.wake(origin)
            rma.notify(c.world, ctx.rank, c.group[origin], told)

    def Start(self, group: Group, assertion: int = 0) -> None:
        """Begin an access epoch to *group*'s targets (``MPI_Win_start``): wait until each has posted."""
        ctx = here("Win.Start")
        c = self._c
        self._access = [c.group.index(m) for m in group._members]
        posted = self._shared.posted.setdefault(c.rank, set())
        while not set(self._access) <= posted:
            self._sleep(ctx, "Win.Start")
        posted.difference_update(self._access)

    def Complete(self) -> None:
        """End the access epoch: operations complete, each target told (``MPI_Win_complete``)."""
        ctx = here("Win.Complete")
        self._complete(ctx, "Win.Complete", self._pending)
        c, shared = self._c, self._shared
        for target in self._access:
            def told(target: int = target) -> None:
                shared.completed[target] = shared.completed.get(target, 0) + 1
                shared.wake(target)
            rma.notify(c.world, ctx.rank, c.group[target], told)
        self._access = []

    def Wait(self) -> None:
        """End the exposure epoch: wait until every origin of ``Post``'s group has completed (``MPI_Win_wait``)."""
        ctx = here("Win.Wait")
        while not self.Test():
            self._sleep(ctx, "Win.Wait")

    def Test(self) -> bool:
        """True once every origin of ``Post``'s group has completed (``MPI_Win_test``); never waits."""
        shared, me = self._shared, self._c.rank
        if shared.completed.get(me, 0) >= self._exposed:
            shared.completed[me] = shared.completed.get(me, 0) - self._exposed
            self._exposed = 0
            return True
        return False

    # ---- helpers

    def _sleep(self, ctx: Any, call: str) -> None:
        """Wait for the next synchronization header to reach this rank (a Post or a Complete)."""
        event = self._shared.changed.setdefault(self._c.rank, ctx.env.event())
        self._wait(ctx, event, call)

    def _dynamic(self, call: str) -> None:
        self._live(call)
        if self._flavor != WIN_FLAVOR_DYNAMIC:
            raise MPIError(f"rank {here(call).rank}: {call}: the window was not made by Win.Create_dynamic")

    def _live(self, call: str) -> None:
        if self._c is None:
            raise MPIError(f"rank {here(call).rank}: {call}: the window was freed (MPI.WIN_NULL)")

    def _target(self, rank: int, call: str) -> int:
        self._live(call)
        if not 0 <= int(rank) < self._c.size:
            raise InvalidArgumentError(f"rank {here(call).rank}: {call}: target rank {rank} is not in the window's "
                                       f"group of {self._c.size}")
        return int(rank)

    def _region(self, call: str, rank: int, target: Any, nbytes: int, itemsize: int) -> tuple[np.ndarray, int, int]:
        """The memory, byte offset and length at *rank* a target spec names; refuses bytes outside the window.

        ``(disp, count)`` counts elements of the origin's type, ``(disp, count, datatype)`` of *datatype*.
        """
        disp, size = 0, nbytes
        if target is not None:
            spec = target if isinstance(target, list | tuple) else (target,)
            disp = int(spec[0])
            if len(spec) >= 3 and spec[2] is not None:
                size = int(spec[1]) * int(spec[2].Get_size())
            elif len(spec) >= 2 and spec[1] is not None:
                size = int(spec[1]) * itemsize
        if self._flavor == WIN_FLAVOR_DYNAMIC:  # disp is an address at the target: find the region holding it
            for region in self._shared.attached.get(rank, []):
                start = region.ctypes.data
                if start <= disp and disp + size <= start + region.size:
                    return region, disp - start, size
            raise MPIError(f"rank {here(call).rank}: {call}: bytes {disp:#x}..{disp + size:#x} are in no region "
                           f"rank {rank} attached to the dynamic window")
        offset = disp * self._shared.disp_unit[rank]
        memory = self._shared.memory[rank]
        if disp < 0 or offset + size > memory.size:
            raise MPIError(f"rank {here(call).rank}: {call}: bytes {offset}..{offset + size} are outside rank "
                           f"{rank}'s window of {memory.size} B")
        return memory, offset, size

    def _post(self, call: str, origin: Any, rank: int, target: Any, op: Op | None) -> Any:
        ctx = here(call)
        ctx.enter()
        if rank == PROC_NULL:  # an operation on no process: nothing moves, done at once
            return ctx.env.event().succeed()
        rank = self._target(rank, call)
        data = np.array(elements(origin, call), copy=True).reshape(-1)
        memory, offset, size = self._region(call, rank, target, data.nbytes, data.itemsize)
        if op is None:
            def land() -> None:
                memory[offset:offset + size] = data.view(np.uint8)[:size]
        else:
            sim = op.sim(call)

            def land() -> None:
                here_ = memory[offset:offset + size].view(data.dtype)
                here_[:] = sim(data[:here_.size], here_)
        c = self._c
        event = rma.one_sided(c.world, c.world_rank, c.group[rank], data.nbytes, 0, land,
                              target_bytes_reduced=data.nbytes if op is not None else 0)
        self._pending.append((rank, event))
        return event

    def _fetch(self, call: str, origin: Any, result: Any, rank: int, target: Any, op: Op | None) -> Any:
        ctx = here(call)
        ctx.enter()
        if rank == PROC_NULL:
            return ctx.env.event().succeed()
        rank = self._target(rank, call)
        into, finish = receiving(result, call)
        data = None if origin is None else np.array(elements(origin, call), copy=True).reshape(-1)
        memory, offset, size = self._region(call, rank, target, into.nbytes, into.itemsize)
        sim = None if op is None else op.sim(call)

        def at_target() -> np.ndarray:
            old = memory[offset:offset + size].copy()
            if sim is not None and data is not None:
                here_ = memory[offset:offset + size].view(data.dtype)
                here_[:] = sim(data[:here_.size], here_)
            return old

        def at_origin(old: np.ndarray) -> None:
            into.view(np.uint8)[:size] = old
            finish()

        c = self._c
        out = 0 if data is None else data.nbytes
        event = rma.one_sided(c.world, c.world_rank, c.group[rank], out, size, at_target, at_origin,
                              target_bytes_reduced=out)
        self._pending.append((rank, event))
        return event

    def _request(self, event: Any) -> Request:
        """An ``R*`` operation's request: it triggers when the operation completes (as a nonblocking collective's does)."""
        req = CollectiveRequest(self._c.env, self._c, "Win request")
        if event.callbacks is None:
            req.succeed(None)
        else:
            event.callbacks.append(lambda _: req.succeed(None))
        return Request(req)

    def _flush(self, ctx: Any, call: str, target: int) -> None:
        mine = [item for item in self._pending if item[0] == target]
        self._complete(ctx, call, mine)

    def _complete(self, ctx: Any, call: str, items: list) -> None:
        events = [event for _, event in items if not event.triggered]
        if events:
            self._wait(ctx, AllDone(ctx.env, events), f"{call} ({len(events)} RMA operations in flight)")
        done = {id(item) for item in items}
        self._pending = [item for item in self._pending if id(item) not in done]

    def _wait(self, ctx: Any, event: Any, call: str) -> None:
        c = self._c
        ctx.block(c.world.block(c.world_rank, event, call, [], "wait"))


def _one_element(call: str, *buffers: Any) -> None:
    """The atomics move one element: each buffer holds exactly one, all of one type (mpi4py's ValueError otherwise)."""
    arrays = [elements(buf, call) for buf in buffers]
    if any(a.size != 1 for a in arrays) or len({a.dtype.str for a in arrays}) != 1:
        raise ValueError(f"{call}: origin, result (and compare) buffers must each hold one element of one datatype")


def _comm(comm: Any) -> Any:
    return COMM_SELF if comm is None else comm


class _CompareSwap:
    """``Compare_and_swap`` as an op: the origin's value where the target's equals *expect*, else the target's."""

    def __init__(self, expect: np.ndarray) -> None:
        self.expect = expect

    def __call__(self, origin: np.ndarray, here_: np.ndarray) -> np.ndarray:
        return np.where(here_ == self.expect.view(here_.dtype), origin, here_)


def _win_null() -> Win:
    """``MPI.WIN_NULL`` (unpickling it)."""
    return WIN_NULL


WIN_NULL = Win()
WIN_NULL._name = "MPI_WIN_NULL"
