"""How a model's layers split over the pipeline's stages, evenly or not.

A pipeline of *pp* stages with *v* model chunks each has ``V = pp v`` virtual stages (chunk k of
stage s is virtual stage ``k pp + s``). When the layers divide by V, every virtual stage takes
``layers / V``. When they do not (Llama 3 405B: 126 layers on 16 stages; BLOOM-176B: 70 on 12),
the first virtual stage also runs the embedding and the last one the output head and the loss,
each about one layer's load; Llama 3 balances them by giving those two stages one layer fewer
("we reduce one Transformer layer each from the first and the last stages", Llama Team 2024,
section 3.3.2). The balanced split here counts the embedding and the head as one layer each,
spreads ``layers + 2`` evenly and takes them back from the two ends::

    >>> split_layers(126, 16)[:3], split_layers(126, 16)[-1]
    ([7, 8, 8], 7)
    >>> split_layers(70, 12)
    [5, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 5]

Megatron-LM's ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``
set the two ends explicitly (``parallel: {first_stage_layers, last_stage_layers}``): the other
stages split the rest evenly, and each stage's layers split evenly over its chunks.
"""

from __future__ import annotations

from mpisim.errors import ConfigError

__all__ = ["split_layers"]


def split_layers(layers: int, pp: int, chunks: int = 1, first: int | None = None,
                 last: int | None = None) -> list[int]:
    """Layers of each virtual stage (``k pp + s`` order); raises ConfigError when they cannot split."""
    count = pp * chunks
    if first is None and last is None:
        if layers % count == 0:
            return [layers // count] * count
        q, r = divmod(layers + 2, count)  # the embedding and the head as one layer each
        if q < 1:
            raise ConfigError(f"{layers} layers are too few for pp x chunks = {count} stages", "parallel.pp")
        out = [q + (1 if 0 < i <= r else 0) for i in range(count)]
        out[0] -= 1
        out[-1] -= 1
        return out
    if pp < 2:
        raise ConfigError("first_stage_layers and last_stage_layers need pp > 1", "parallel.first_stage_layers")
    ends = {0: first, pp - 1: last}
    given = sum(n for n in ends.values() if n is not None)
    open_stages = [s for s in range(pp) if ends.get(s) is None]
    rest = layers - given
    if rest < 0 or (open_stages and rest % len(open_stages)) or (not open_stages and rest):
        raise ConfigError(f"{layers} layers minus first/last stage layers ({given}) must split evenly over the "
                          f"other {len(open_stages)} stages", "parallel.first_stage_layers")
    per_stage = [ends[s] if ends.get(s) is not None else rest // len(open_stages) for s in range(pp)]
    for s, n in enumerate(per_stage):
        if n % chunks:
            raise ConfigError(f"stage {s}'s {n} layers must split evenly over its {chunks} chunks",
                              "parallel.first_stage_layers")
    return [per_stage[s] // chunks for k in range(chunks) for s in range(pp)]
