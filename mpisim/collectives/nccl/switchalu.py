"""The NVSwitch's reduction units: how fast the switch chips of one NVLink domain can add.

**What the switch does.** In NCCL's NVLS a head GPU loads a chunk through the multicast
address (``multimem.ld_reduce``, src/device/all_reduce.h): the switch chip that carries the
request reads the chunk from every GPU of the domain and adds the q copies before one result
goes back (NCCL issue #828, the maintainers: "it would pull data from all GPUs and give us
the final result"). A GPU spreads its addresses over its links, one link per chip on a
GB200 NVL72 (18 links, 9 switch trays of 2 chips), so every element of the vector is reduced
in exactly one chip, which performs q - 1 adds for it. The chips' reduction units, not only
the GPUs' ports, then bound the call: a vector of N FP32 elements needs N (q - 1) adds spread
over the domain's C chips at R adds/s each::

    t_alu = N (q - 1) / (C R)          N = n / 4 (16-bit formats pack two per 32-bit lane)

**Why it matters at rack scale.** The port's work shrinks towards n per direction as q grows
(n (q + 1) / q), while the adds grow with q: on 8 GPUs the port is the bound, on 72 the
switch. Published numbers agree in their shape: 8 B300 on one NVSwitch board reach 483 GB/s of
algbw with NVLS (NCCL issue #2140), a GB200 NVL72 rack 425 (coreweave/nccl-tests #43); the
adds per chip and byte are (q - 1) / C = 7/2 and 71/18, a ratio of 0.887 (measured 0.880),
where the port model alone would make the rack 11 % faster instead.

**The rate.** NVIDIA quotes 400 GFLOPS of FP32 reduction per third-generation NVSwitch chip
(Hopper); no figure for the fourth generation was found, so the presets that declare it carry
that value as an assumption (``intra.switch_reduce_rate``), the first number to replace. An
undeclared rate (0) means no bound: the port model alone, as before.
"""

from __future__ import annotations

from mpisim.collectives.nccl.topology import nvls_groups
from mpisim.mpi.comm import Comm

#: Bytes per lane of the reduction units: the rate is in FP32 adds.
LANE_BYTES = 4


def alu_time(comm: Comm, nbytes: float, q: int) -> float:
    """Seconds one NVLink domain's switch chips need to add *q* GPUs' copies of *nbytes* (0 if undeclared)."""
    intra = comm.world.topology.spec.intra
    if intra is None or not intra.in_switch_reduction or not intra.switch_chips or q < 2:
        return 0.0
    return nbytes / LANE_BYTES * (q - 1) / (intra.switch_chips * intra.switch_reduce_rate)


#: A call whose switch adds take at least this share of its time is said to be bound by them.
BOUND = 0.8


def switch_note(comm: Comm, label: str, algorithm: str, nbytes: float, seconds: float) -> str | None:
    """Say that the calls *label* were bound by the switch chips' adds, if this one (*nbytes* in *seconds*) was.

    Its NVLink ports then wait on the switch, so link figures alone would blame nothing; the
    note names the bound instead (a run's ``notes``, once for every size it holds at).
    """
    groups = nvls_groups(comm)
    if algorithm not in ("nvls", "nvls_tree") or groups is None or seconds <= 0:
        return None
    q = len(groups[0])
    alu = alu_time(comm, nbytes, q)
    if alu < BOUND * seconds:
        return None
    intra = comm.world.topology.spec.intra
    assert intra is not None
    algbw = nbytes / alu
    return (f"{label} is bound by the NVSwitch chips' adds at large sizes: {q - 1} adds per element of the {q} GPUs "
            f"of a node, over {intra.switch_chips} chips at {intra.switch_reduce_rate / 1e9:.4g} GFLOPS each "
            f"(intra.switch_reduce_rate), allow at most {algbw / 1e9:.4g} GB/s of algbw; its NVLink ports wait on them")
