"""FSDP's collectives run on the same SMs as the compute they hide behind.

ZeRO 3 (PyTorch FSDP, ``FULL_SHARD``) allgathers each transformer block's parameters one block
ahead of the compute that needs them (forward, and again in backward with ``BACKWARD_PRE``
prefetch) and reduce-scatters each block's gradients as its backward finishes them. Those
collectives "hide" behind the block's GEMMs only in the sense that they run concurrently: an
NCCL collective is a kernel of one CTA per channel, each CTA holding one SM for the whole
collective (NVIDIA/nccl issue #689, S. Jeaugey: NCCL launches one block per channel and "2 is
the minimum"), and it streams two to three times its bus bytes through HBM (issue #1428). While
it runs, the GEMMs have ``SMs - channels`` SMs: they proceed at ``1 - channels / SMs`` of their
rate. One block's forward therefore gains at least ``t_allgather x channels / SMs`` (never more than
the compute stretched over the whole collective), its backward the same for the allgather plus
the reduce-scatter; what it is charged, the measured loss, follows.

The channel counts are what NCCL logs on the eight-GPU NVSwitch boxes (``Channel 23/24`` on an
HGX A100, NVIDIA/nccl-tests issue #100; ``Channel 15/16`` on H100 NVSwitch nodes, NVIDIA/nccl
issue #1453).

The SM share is a lower bound: the collective also competes for HBM and L2. NCCL stores what
it receives in its FIFO buffers and reads it back, then reads or writes the user buffer: two to
three times the bus bytes through HBM (S. Jeaugey, NVIDIA/nccl issue #1428), and its loads and
stores evict the GEMM's tiles from L2. A GPT training profile on A100-SXM4-80GB (same issue)
measured each kind of kernel alone and under an overlapping allgather: a GEMM 1.18 ms alone,
2.08 ms overlapped; flash attention 0.18 -> 0.33 ms; an element-wise kernel 0.02 -> 0.05 ms.
The GEMM, the bulk of a layer, therefore ran at 1.18 / 2.08 = 0.57 of its rate while the
collective ran: it lost :data:`OVERLAP_INTERFERENCE` = 0.43 of it, SMs and memory together.
Compute under a collective is charged that measured loss (or the SM share, if larger): it is
the only published separation of an overlapped kernel's loss, measured on A100 and ASSUMED for
later GPUs (whose NCCL kernels move more bytes per second through an HBM that grew about as
much). Other measurements agree on the magnitude: on 8 V100 a CUTLASS GEMM overlapped with an
allreduce finished later than the two run one after the other (parasailteam/coconet issue #6),
and two concurrent NCCL allreduces on A100 each take about twice as long (NVIDIA/nccl #1094).

FSDP's mixed precision may reduce gradients in a wider format than it computes them in
(``MixedPrecision(param_dtype=bf16, reduce_dtype=fp32)``: Composer's and llm-foundry's
``mixed_precision: DEFAULT``). FSDP then casts each block's unsharded gradient before its
reduce-scatter (PyTorch ``torch/distributed/fsdp/_runtime_utils.py``, ``_post_backward_hook``:
``flat_param.grad.to(handle._reduce_dtype)``): a copy kernel reading the bf16 gradient and
writing the fp32 one through HBM, every micro-batch (:func:`grad_cast_time`); the reduce-scatter
itself then moves twice the bytes.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NCCL_CHANNELS", "OVERLAP_INTERFERENCE", "channels_for", "contended_slowdown", "grad_cast_time",
           "overlap_share", "overlap_slowdown"]

#: Channels (= CTAs = SMs) an intra-node NCCL allgather or reduce-scatter holds, by device.
#: A100: 24 (nccl-tests #100, HGX A100); Hopper and later: 16 (nccl #1453, H100) -- ASSUMED for B200.
NCCL_CHANNELS = {"a100": 24, "h100": 16, "h200": 16, "h800": 16, "b200": 16, "gb200": 16}
DEFAULT_CHANNELS = 16

#: The share of its rate a GEMM loses while an NCCL allgather runs beside it: 1 - 1.18 ms / 2.08 ms
#: (A100-SXM4-80GB, GPT training profile, NVIDIA/nccl issue #1428); SMs, HBM and L2 together.
OVERLAP_INTERFERENCE = 1 - 1.18 / 2.08


def channels_for(device_name: str) -> int:
    """The NCCL channels a collective holds on *device_name* (a :mod:`~mpisim.workloads.compute` name)."""
    for prefix, channels in NCCL_CHANNELS.items():
        if device_name.startswith(prefix):
            return channels
    return DEFAULT_CHANNELS


def overlap_slowdown(compute_s: float, comm_s: float, channels: int, sms: int) -> float:
    """The seconds *compute_s* of SM-bound work gains while a *comm_s* collective holds *channels* of *sms* SMs.

    During the collective the compute runs at ``1 - channels / sms`` of its rate. If the
    compute outlasts the collective it loses ``comm_s x channels / sms``; if it ends inside
    it, it is stretched by ``1 / (1 - channels / sms)`` as a whole.

    >>> round(overlap_slowdown(10.0, 2.0, 16, 132), 4)
    0.2424
    >>> round(overlap_slowdown(1.0, 5.0, 66, 132), 4)
    1.0
    """
    if channels <= 0:
        return 0.0
    return contended_slowdown(compute_s, comm_s, min(channels, sms - 1) / sms)


def overlap_share(channels: int, sms: int) -> float:
    """The share of its rate compute loses under a collective: the measured interference, or the SMs held if more.

    >>> round(overlap_share(16, 132), 4)
    0.4327
    >>> overlap_share(66, 132)
    0.5
    """
    return max(OVERLAP_INTERFERENCE, min(channels, sms - 1) / sms) if channels > 0 else 0.0


def contended_slowdown(compute_s: float, comm_s: float, share: float) -> float:
    """The seconds *compute_s* gains while a *comm_s* collective takes *share* of its rate.

    The compute runs at ``1 - share`` of its rate during the collective: if it outlasts the
    collective it loses ``comm_s x share``, otherwise it is stretched by ``1 / (1 - share)``.
    :func:`overlap_slowdown` is this with the SM share alone.

    >>> round(contended_slowdown(10.0, 2.0, 0.5), 4)
    1.0
    >>> round(contended_slowdown(1.0, 5.0, 0.5), 4)
    1.0
    """
    if compute_s <= 0 or comm_s <= 0 or share <= 0:
        return 0.0
    return min(comm_s * share, compute_s * share / (1 - share))


def grad_cast_time(count: int, itemsize: int, reduce_itemsize: int, dev: Any) -> float:
    """Seconds to cast one block's *count* gradients from *itemsize* to *reduce_itemsize* bytes on *dev*'s HBM.

    Nothing when the formats are the same size (no cast: FSDP reduces the gradient as computed).

    >>> class _Hbm: hbm_rate = 1e12
    >>> grad_cast_time(10**9, 2, 4, _Hbm())
    0.006
    """
    if reduce_itemsize == itemsize:
        return 0.0
    return count * (itemsize + reduce_itemsize) / dev.hbm_rate
