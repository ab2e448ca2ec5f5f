"""Context parallelism: the key/value exchange of the cp GPUs, and how much of it the attention hides.

With ``parallel: {cp: N}`` each sequence of s tokens is split over N GPUs (Megatron-LM's
``--context-parallel-size``; the attention is Transformer Engine's ``AttnFuncWithCPAndKVP2P``,
``transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py``: "Exchange KV
between CP ranks with P2P in ring topology ... overlap current-step compute with next-step
communication"; its buffer is K and V concatenated, sent cp - 1 times).
Everything but attention is per token, so each GPU simply runs its s/N tokens. Attention needs
every query to meet every earlier key: the N GPUs pass their keys and values around a ring in
N - 1 steps, and at each step attend their own queries to the key/value block they hold while
the next block is on its way (the send of step i overlaps the attention of step i).

For load balance under a causal mask the sequence is cut into 2N chunks and GPU i holds chunks
i and 2N - 1 - i, so every step costs each GPU the same attention work: 1/N of its share of
the layer's attention. One step moves, per GPU, the K and V of its s/N tokens for its tp share
of the key/value heads (grouped-query attention sends fewer)::

    kv_bytes = 2 x b x (s / N) x (h_kv / tp) x itemsize

The backward pass sends the key/value block on and returns the accumulated dK, dV: twice the
forward's bytes per step, overlapped with the attention backward's step.

A step's time is that of the exchange on the cluster (every member of the cp group sending its
block to the next at once, timed on a fresh world like a folded tensor-parallel collective) or
its attention block, whichever is longer; the exposed part of a layer's pass is

    exposed = (N - 1) x max(0, t_exchange - t_attention / N)

which the training row reports as ``cp_comm_s`` (and in ``exposed_comm_s``). The cp GPUs hold
the same weights, so they join the data-parallel gradient reduction: Megatron reduces over
dp x cp GPUs (:class:`~mpisim.workloads.training.layout.Layout`).

**All-gather context parallelism** (``parallel: {cp_comm: allgather}``; Llama Team, "The Llama 3
Herd of Models", 2024, section 3.3.2): "our CP implementation adopts an all-gather based method
where we first all-gather the key (K) and value (V) tensors, and then compute attention output
for the local query (Q) tensor chunk. Although the all-gather communication latency is exposed
in the critical path, we still adopt this approach" (it supports any mask, the document mask
among them, and with grouped-query attention K and V are small). The same K and V bytes per GPU
as the ring, in one collective nothing overlaps: a layer's forward waits for the all-gather of
every GPU's ``kv_bytes``; its backward reduce-scatters the gradients of all the keys and values
(each GPU's partial dK, dV over the whole sequence summed onto the GPU that owns the tokens)
and, first, gathers K and V again rather than keep cp times the layer's K and V for every layer
and in-flight micro-batch. The paper does not describe its backward; PyTorch's all-gather
context parallelism (``torch.distributed.tensor.experimental``, whose tutorial names it "the
all-gather based pass-KV algorithm ... used in Llama3 training") does this: a new all-gather of
K and V in the backward, and the summed dK, dV passed on to their owners (ASSUMED exposed, as
the forward's gather is). The attention kernel then runs once over the whole gathered K and V
(:func:`~mpisim.workloads.compute.layer.layer_time` with ``cp_comm="allgather"``): each query
block's fixed cost is spread over the sequence's keys, not over one ring step's s/N::

    exposed_forward  = t_allgather(kv_bytes)
    exposed_backward = t_allgather(kv_bytes) + t_reduce_scatter(cp x kv_bytes)

    >>> kv_step_bytes(seq=131072, kv_width=1024, micro=1, tp=8, cp=16, itemsize=2)
    4194304
    >>> exposed_ring_s(exchange_s=1e-3, attention_s=8e-3, cp=4)
    0.0
    >>> round(exposed_ring_s(exchange_s=3e-3, attention_s=8e-3, cp=4), 6)
    0.003
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mpisim.engine.sim import Proc
from mpisim.mpi.comm import Comm
from mpisim.mpi.payload import SizePayload
from mpisim.mpi.world import World

__all__ = ["exposed_ring_s", "kv_step_bytes", "measure_cp_collective", "measure_ring_step"]


def kv_step_bytes(seq: int, kv_width: int, micro: int, tp: int, cp: int, itemsize: int) -> int:
    """Bytes one GPU sends at one forward step of ring attention: its tokens' K and V, its tp share."""
    return 2 * micro * (seq // cp) * (kv_width // tp) * itemsize


def exposed_ring_s(exchange_s: float, attention_s: float, cp: int) -> float:
    """The ring's time a layer pass adds to its attention: the cp - 1 steps the exchange outlasts
    the step's attention block (*attention_s* is the whole pass's attention on one GPU)."""
    if cp < 2:
        return 0.0
    return (cp - 1) * max(0.0, exchange_s - attention_s / cp)


def measure_ring_step(group: tuple[int, ...], nbytes: int, new_world: Callable[[], World]) -> float:
    """Time one ring step of *group* on a fresh world: each member sends *nbytes* to the next at once."""
    fresh = new_world()
    finish: list[float] = []
    size = len(group)
    count = max(1, nbytes)

    def step(comm: Comm) -> Proc[None]:
        ring = comm.sub(group, "cp")
        me = ring.rank
        yield from ring.sendrecv(SizePayload(count, "uint8"), dest=(me + 1) % size, source=(me - 1) % size)
        finish.append(comm.now)

    fresh.launch(step, ranks=group)
    fresh.run()
    return max(finish)


def measure_cp_collective(group: tuple[int, ...], kind: str, share: int, dtype: np.dtype,
                          new_world: Callable[[], World]) -> float:
    """Time one ``allgather`` (each member contributes *share* elements) or ``reduce_scatter`` (each
    member ends with *share* elements, summed) over the cp *group*, alone on a fresh world (every
    cp group runs the same collective at the same time, as the ring's step is timed)."""
    fresh = new_world()
    finish: list[float] = []
    size = len(group)

    def one(comm: Comm) -> Proc[None]:
        sub = comm.sub(group, "cp")
        if kind == "allgather":
            yield from sub.allgather(SizePayload(share, dtype))
        else:
            yield from sub.reduce_scatter(SizePayload(share * size, dtype))
        finish.append(comm.now)

    fresh.launch(one, ranks=group)
    fresh.run()
    return max(finish)
