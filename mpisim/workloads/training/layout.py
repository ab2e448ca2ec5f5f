"""Parallel layout: which GPU holds which part of the model, and who talks to whom.

Hybrid parallelism splits ``tp x pp x dp`` GPUs three ways (Narayanan et al. 2021):

* **tensor parallel** (tp): the matrices of every layer are split over tp GPUs, which
  allreduce activations twice per layer in each direction. The traffic is the heaviest of the
  three, so tp groups go innermost: consecutive ranks, inside one NVLink domain.
* **pipeline parallel** (pp): consecutive layers form stages on pp groups of GPUs, which pass
  activations forward and gradients backward, once per micro-batch.
* **data parallel** (dp): dp replicas of that model-parallel group each train on a share of the
  batch and average their gradients (or, with ZeRO, shard them).
* **expert parallel** (ep, MoE models): the experts of a layer are spread over ep GPUs, and
  tokens travel to their experts by all-to-all. By default (``etp`` = tp) each expert is split
  over the tensor-parallel group like the dense MLP, and the ep GPUs are consecutive members of
  the data-parallel group. With ``etp: 1`` (Megatron-Core's ``--expert-tensor-parallel-size 1``,
  its "parallel folding") experts are whole and the expert layers fold the stage's tp x dp GPUs
  into their own grid, ep innermost: the ep group is ep consecutive GPUs of that grid (tp
  ranks included), so with tp inside a node it stays inside the node too.

* **context parallel** (cp, Megatron's ``--context-parallel-size``): each sequence is split over
  cp GPUs, which exchange keys and values around a ring inside every attention
  (:mod:`~mpisim.workloads.training.context`). They hold the same weights, so Megatron reduces
  the gradients over dp x cp GPUs: here the layout's ``dp`` *is* that group, cp innermost in it
  (its first cp members share a micro-batch; ``replicas = dp / cp`` take different ones), the
  way Megatron's default order ``tp-cp-ep-dp-pp`` places cp next to dp.

``order`` lists the dimensions innermost first; the default ``tp, pp, dp`` puts a stage's tp
group in one node and the pipeline's stages on consecutive nodes (Megatron-LM's default is
``tp, dp, pp``: give ``order: [tp, dp, pp]``). With context parallelism ``cp`` may take its own
place in the order: Llama 3 orders its GPUs ``[TP, CP, PP, DP]`` ("the innermost parallelism
requires the highest network bandwidth and lowest latency ... The outermost parallelism may
spread across a multi-hop network", Llama Team 2024, section 3.3.2), so a cp group is
consecutive nodes and the gradient group (dp x cp GPUs, still in the order of the dp
coordinate, cp fastest) is no longer one arithmetic sequence. The paper's example, 16 GPUs with
``|TP| = |CP| = |PP| = |DP| = 2``: GPU 0 shares its tp group with GPU 1, its cp group with GPU 2,
its pp group with GPU 4 and its dp group with GPU 8::

    >>> meta = Layout(tp=2, pp=2, dp=4, cp=2, order=("tp", "cp", "pp", "dp"))
    >>> meta.group(0, "tp"), meta.cp_group(0), meta.group(0, "pp"), meta.group(0, "dp")
    ((0, 1), (0, 2), (0, 4), (0, 2, 8, 10))

Without ``cp`` in the order, cp is innermost in dp::

    >>> layout = Layout(tp=2, pp=2, dp=2)
    >>> layout.coords(5)            # rank 5 = tp 1 + 2 x (pp 0 + 2 x dp 1)
    Coords(tp=1, pp=0, dp=1)
    >>> layout.group(5, "dp"), layout.group(5, "pp")
    ((1, 5), (5, 7))
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["DIMENSIONS", "Coords", "Layout"]

DIMENSIONS = ("tp", "pp", "dp")


class Coords(NamedTuple):
    """A rank's position along each dimension."""

    tp: int
    pp: int
    dp: int


@dataclass(frozen=True)
class Layout:
    """The parallel layout: sizes of each dimension, expert parallelism, and rank order."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    order: tuple[str, ...] = DIMENSIONS
    etp: int = 0  # expert tensor parallelism: 0 = tp (experts split like the dense MLP), or 1 (whole experts)
    cp: int = 1  # context parallelism: the dp group's innermost cp members split each sequence

    @property
    def replicas(self) -> int:
        """Data-parallel replicas taking different micro-batches: ``dp / cp``."""
        return self.dp // self.cp

    def cp_group(self, rank: int) -> tuple[int, ...]:
        """The context-parallel group of *rank*: cp consecutive members of its data-parallel group::

            >>> Layout(tp=2, pp=1, dp=4, cp=2).cp_group(6)
            (4, 6)
        """
        dp_group = self.group(rank, "dp")
        first = self.coords(rank).dp // self.cp * self.cp
        return dp_group[first:first + self.cp]

    @property
    def expert_tp(self) -> int:
        """GPUs each expert is split over: tp, or 1 with ``etp: 1``."""
        return self.etp or self.tp

    @property
    def size(self) -> int:
        """Ranks the layout needs: ``tp x pp x dp``."""
        return self.tp * self.pp * self.dp

    def _sizes(self) -> dict[str, int]:
        if "cp" in self.order:  # the replica and the cp rank are two places of the order
            return {"tp": self.tp, "pp": self.pp, "dp": self.dp // self.cp, "cp": self.cp}
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp}

    def rank(self, coords: Coords) -> int:
        """The rank at *coords*."""
        sizes, position = self._sizes(), coords._asdict()
        if "cp" in self.order:
            position["dp"], position["cp"] = divmod(coords.dp, self.cp)
        rank, stride = 0, 1
        for dim in self.order:
            rank += position[dim] * stride
            stride *= sizes[dim]
        return rank

    def coords(self, rank: int) -> Coords:
        """The position of *rank*."""
        sizes, position = self._sizes(), {}
        for dim in self.order:
            rank, position[dim] = divmod(rank, sizes[dim])
        if "cp" in position:
            position["dp"] = position["dp"] * self.cp + position.pop("cp")
        return Coords(**position)

    def group(self, rank: int, dim: str) -> tuple[int, ...]:
        """The ranks that differ from *rank* only along *dim*, in order of that coordinate.

        Ranks are mixed-radix numbers over ``order``, so the group is an arithmetic sequence:
        its step is the product of the sizes of the dimensions before *dim*::

            >>> Layout(tp=2, pp=3, dp=4).group(7, "dp")
            (1, 7, 13, 19)
        """
        sizes = self._sizes()
        if dim == "dp" and "cp" in self.order:
            if self.order.index("cp") + 1 != self.order.index("dp"):  # cp and dp apart: two strides
                here = self.coords(rank)
                return _gradient_group(self, here.tp, here.pp)
            dim, sizes = "cp", {**sizes, "cp": self.dp}  # cp just inside dp: one run of dp x cp
        stride = 1
        for name in self.order:
            if name == dim:
                break
            stride *= sizes[name]
        first = rank - (rank // stride) % sizes[dim] * stride
        return _progression(first, sizes[dim], stride)

    def _expert_grid(self, rank: int) -> tuple[list[int], int]:
        """The stage's tp x dp GPUs in expert order (tp fastest), and *rank*'s index in it."""
        here = self.coords(rank)
        grid = [self.rank(Coords(tp=t, pp=here.pp, dp=d)) for d in range(self.dp) for t in range(self.tp)]
        return grid, here.tp + self.tp * here.dp

    def ep_group(self, rank: int) -> tuple[int, ...]:
        """The expert-parallel group of *rank*.

        ``etp`` = tp: ep consecutive members of its data-parallel group. ``etp: 1``: ep
        consecutive GPUs of the stage's tp x dp grid, tp fastest::

            >>> Layout(tp=2, pp=1, dp=4, ep=4).ep_group(0), Layout(tp=2, pp=1, dp=4, ep=4, etp=1).ep_group(0)
            ((0, 2, 4, 6), (0, 1, 2, 3))
        """
        if self.expert_tp == self.tp:
            dp_group = self.group(rank, "dp")
            first = self.coords(rank).dp // self.ep * self.ep
            return dp_group[first:first + self.ep]
        grid, index = self._expert_grid(rank)
        first = index // self.ep * self.ep
        return tuple(grid[first:first + self.ep])

    def edp_group(self, rank: int) -> tuple[int, ...]:
        """The expert-data-parallel group: the GPUs holding the same experts as *rank* (its expert gradients' group)::

            >>> Layout(tp=2, pp=1, dp=4, ep=4).edp_group(0), Layout(tp=2, pp=1, dp=4, ep=4, etp=1).edp_group(0)
            ((0,), (0, 4))
        """
        if self.expert_tp == self.tp:
            dp_group = self.group(rank, "dp")  # in order of the dp coordinate
            if self.ep == 1:
                return dp_group
            return dp_group[self.coords(rank).dp % self.ep::self.ep]
        grid, index = self._expert_grid(rank)
        return tuple(grid[index % self.ep::self.ep])


@functools.lru_cache(maxsize=2**12)
def _gradient_group(layout: Layout, tp: int, pp: int) -> tuple[int, ...]:
    """The dp x cp GPUs at (*tp*, *pp*) in the order of the dp coordinate (cp fastest), once per group."""
    return tuple(layout.rank(Coords(tp, pp, d)) for d in range(layout.dp))


@functools.lru_cache(maxsize=2**16)
def _progression(first: int, size: int, stride: int) -> tuple[int, ...]:
    """``first, first + stride, ...`` (*size* terms), one tuple for every rank of the group.

    Each of 8192 simulated GPUs holding its own copy of its 1024-rank data-parallel group
    took gigabytes; a layout has only tp x pp such groups.
    """
    return tuple(range(first, first + size * stride, stride))
