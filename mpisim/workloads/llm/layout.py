"""Parallel layout: which GPU holds which part of the model, and who talks to whom.

Hybrid parallelism splits ``tp x pp x dp`` GPUs three ways (Narayanan et al. 2021):

* **tensor parallel** (tp): the matrices of every layer are split over tp GPUs, which
  allreduce activations twice per layer in each direction. The traffic is the heaviest of the
  three, so tp groups go innermost: consecutive ranks, inside one NVLink domain.
* **pipeline parallel** (pp): consecutive layers form stages on pp groups of GPUs, which pass
  activations forward and gradients backward, once per micro-batch.
* **data parallel** (dp): dp replicas of that model-parallel group each train on a share of the
  batch and average their gradients (or, with ZeRO, shard them).
* **expert parallel** (ep, MoE models): the experts of a layer are spread over ep GPUs of the
  data-parallel group, and tokens travel to their experts by all-to-all.

``order`` lists the dimensions innermost first; the default ``tp, pp, dp`` puts a stage's tp
group in one node and the pipeline's stages on consecutive nodes (Megatron-LM's default is
``tp, dp, pp``: give ``order: [tp, dp, pp]``)::

    >>> layout = Layout(tp=2, pp=2, dp=2)
    >>> layout.coords(5)            # rank 5 = tp 1 + 2 x (pp 0 + 2 x dp 1)
    Coords(tp=1, pp=0, dp=1)
    >>> layout.group(5, "dp"), layout.group(5, "pp")
    ((1, 5), (5, 7))
"""

from __future__ import annotations

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

    @property
    def size(self) -> int:
        """Ranks the layout needs: ``tp x pp x dp``."""
        return self.tp * self.pp * self.dp

    def _sizes(self) -> dict[str, int]:
        return {"tp": self.tp, "pp": self.pp, "dp": self.dp}

    def rank(self, coords: Coords) -> int:
        """The rank at *coords*."""
        sizes, position = self._sizes(), coords._asdict()
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
        return Coords(**position)

    def group(self, rank: int, dim: str) -> tuple[int, ...]:
        """The ranks that differ from *rank* only along *dim*, in order of that coordinate."""
        here = self.coords(rank)._asdict()
        return tuple(self.rank(Coords(**{**here, dim: i})) for i in range(self._sizes()[dim]))

    def ep_group(self, rank: int) -> tuple[int, ...]:
        """The expert-parallel group of *rank*: ep consecutive members of its data-parallel group."""
        dp_group = self.group(rank, "dp")
        first = self.coords(rank).dp // self.ep * self.ep
        return dp_group[first:first + self.ep]
