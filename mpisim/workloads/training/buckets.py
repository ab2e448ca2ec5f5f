"""Gradient buckets: how PyTorch DDP packs gradients into the allreduces of a training step.

Gradients become ready in reverse layer order during backward; DDP packs them into buckets
(``torch.distributed._compute_bucket_assignment_by_size``) and reduces each bucket as soon as
its last gradient is ready, so communication overlaps the rest of the backward pass. The
data-parallel form of the ``training`` workload and the hybrid-parallel one both bucket with this rule
(:mod:`mpisim.workloads.training.plan`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mpisim.engine.units import format_size
from mpisim.errors import ConfigError

__all__ = ["MAX_BUCKETS", "Bucket", "ddp_buckets"]

#: The most buckets one step may have. A trillion-parameter model in PyTorch's default 25 MiB
#: buckets has about 160,000; far more means a cap mistyped by units (``500 B``), and building,
#: let alone simulating, tens of millions of allreduces per step would take days.
MAX_BUCKETS = 1_000_000


@dataclass(frozen=True, slots=True)  # a step can have a million: no __dict__ each
class Bucket:
    """One DDP bucket: its element count and the backward fraction done when it is ready."""

    count: int
    ready: float  # fraction of the backward pass elapsed when its last gradient is ready, in (0, 1]


def ddp_buckets(layers: tuple[int, ...], params: int, itemsize: int, first_bucket: int,
                bucket_cap: int) -> list[Bucket]:
    """Return the DDP buckets in launch order (reverse layer order).

    With *layers*, tensors go into the open bucket and it closes once it reaches its cap (the
    first bucket's cap is *first_bucket*, the others' *bucket_cap*), as
    ``torch.distributed._compute_bucket_assignment_by_size`` does. Without, the parameters are
    treated as infinitely divisible: buckets of exactly the caps, the last holding the rest.
    """
    buckets: list[Bucket] = []
    done = 0  # parameters whose gradients are ready
    limits = [first_bucket, bucket_cap]
    if layers:
        open_count = 0
        for n in reversed(layers):
            open_count += n
            done += n
            if open_count * itemsize >= limits[min(len(buckets), 1)]:
                buckets.append(Bucket(open_count, done / params))
                open_count = 0
        if open_count:
            buckets.append(Bucket(open_count, 1.0))
        return buckets
    first, rest = max(1, first_bucket // itemsize), max(1, bucket_cap // itemsize)
    count = 0 if params <= 0 else 1 + -(-max(0, params - first) // rest)
    if count > MAX_BUCKETS:
        raise ConfigError(f"{format_size(bucket_cap)} buckets split {params:.3g} parameters into {count:.3g} "
                          f"allreduces per step (at most {MAX_BUCKETS:,}); DDP's default is 25 MiB", "workload.bucket_cap")
    while done < params:
        cap = max(1, limits[min(len(buckets), 1)] // itemsize)
        count = min(cap, params - done)
        done += count
        buckets.append(Bucket(count, done / params))
    return buckets
