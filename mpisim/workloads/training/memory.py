"""Memory per GPU: model states by ZeRO stage, and activations by recomputation and schedule.

**Model states** (Rajbhandari et al., "ZeRO", SC 2020, section 3.1): mixed-precision Adam keeps,
per parameter, 2 bytes of 16-bit weights, 2 of 16-bit gradients and K = 12 of optimizer state
(a 32-bit master copy, momentum and variance). For the Ψ parameters a GPU holds after tensor and
pipeline parallelism, and a data-parallel group of N_d:

=========  ===============================
ZeRO 0     (2 + 2 + 12) Ψ  = 16 Ψ
ZeRO 1     2 Ψ + 2 Ψ + 12 Ψ / N_d
ZeRO 2     2 Ψ + (2 + 12) Ψ / N_d
ZeRO 3     (2 + 2 + 12) Ψ / N_d
=========  ===============================

**Activations** (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models", MLSys 2023, Table 2), bytes per layer and micro-batch of b sequences, s tokens,
hidden h, a heads, tensor parallelism t:

* no recomputation: ``s b h (10 + 24/t + 5 a s / (h t))``; with sequence parallelism
  ``s b h (34 + 5 a s / h) / t``;
* selective (the attention core is recomputed): ``s b h (10 + 24/t)``; with sequence
  parallelism ``34 s b h / t``;
* full (each layer keeps only its input): ``2 s b h`` (``/ t`` with sequence parallelism).

:func:`layer_activation_bytes` counts the same terms from a layer's own shape (grouped-query
attention, gated MLPs, no dropout), which is what a stage's memory is charged; for GPT's shape
it is Table 2. With fused (flash) attention, the default since 2022, the ``5 a s / h`` term of the stored
attention scores is gone whatever the recomputation (Dao et al. 2022).

A stage holds the activations of the forward passes it has run and not yet run backward: the
schedule decides how many (GPipe: all m micro-batches; 1F1B: at most P on the first stage;
interleaved: ``1 + (P - 1) / (P v)`` times more). :func:`peak_in_flight` counts them by walking
the stage's schedule, so every schedule gets its own number; with uneven stages each pass
weighs the layers of its chunk. On stage 0 this is Megatron-LM's count: its interleaved
schedule runs ``2 (P - 1) + (v - 1) P`` warm-up forwards before the first backward, so
``2 (P - 1) + (v - 1) P + 1`` chunk passes of ``L / (P v)`` layers are held, which is
Korthikanti et al.'s ``L (1 + (P - 1) / (P v))`` layer passes. Not counted: the embedding's and
the logits' activations, temporary buffers and fragmentation (allow a margin).
"""

from __future__ import annotations

from dataclasses import dataclass

from mpisim.workloads.training.model import TransformerModel
from mpisim.workloads.training.schedule import Op

__all__ = ["MemoryUse", "activation_bytes_per_layer", "layer_activation_bytes", "model_state_bytes", "peak_in_flight"]

#: Bytes per parameter of mixed-precision Adam: 16-bit weights, 16-bit gradients, optimizer state.
WEIGHT_BYTES, GRADIENT_BYTES, OPTIMIZER_BYTES = 2, 2, 12


@dataclass(frozen=True)
class MemoryUse:
    """The memory one GPU needs, by part (bytes)."""

    weights: float
    gradients: float
    optimizer: float
    activations: float

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations


def model_state_bytes(params: float, zero: int, dp: int) -> tuple[float, float, float]:
    """Bytes of (weights, gradients, optimizer state) for *params* parameters under ZeRO stage *zero*."""
    weights, gradients, optimizer = WEIGHT_BYTES * params, GRADIENT_BYTES * params, OPTIMIZER_BYTES * params
    if zero >= 1:
        optimizer /= dp
    if zero >= 2:
        gradients /= dp
    if zero >= 3:
        weights /= dp
    return weights, gradients, optimizer


def activation_bytes_per_layer(model: TransformerModel, micro: int, tp: int, recompute: str,
                               sequence_parallel: bool, flash: bool = False) -> float:
    """Bytes one layer keeps for the backward pass of one micro-batch (Korthikanti et al. Table 2).

    With *flash* attention the s x s scores are never stored (the kernel recomputes them in
    backward), so the ``5 a s / h`` term vanishes: what selective recomputation achieves.
    """
    sbh = model.seq * micro * model.hidden
    attention = 0.0 if flash else 5 * model.heads * model.seq / model.hidden
    if recompute == "full":
        return 2 * sbh / (tp if sequence_parallel else 1)
    if recompute == "selective":
        return 34 * sbh / tp if sequence_parallel else sbh * (10 + 24 / tp)
    if sequence_parallel:
        return sbh * (34 + attention) / tp
    return sbh * (10 + 24 / tp + attention / tp)


def layer_activation_bytes(model: TransformerModel, micro: int, tp: int, recompute: str, sequence_parallel: bool,
                           flash: bool = False) -> float:
    """Bytes one layer keeps for the backward of one micro-batch, counted from the layer's own shape.

    Korthikanti et al.'s terms, per token in 16-bit values, for any attention and MLP width:
    the two norms' inputs (4h), the attention's and the MLP's GEMM inputs (2h each) and, with
    dropout, its two masks (2h) are whole on every tp rank unless sequence parallelism splits
    them; Q (2h), K and V (2 h_kv each: grouped-query attention keeps fewer), the output
    projection's input (2h), the MLP's up-projection output (2f, 4f gated) and its activation's
    output (2f) are split over tp. GPT's shape (h_kv = h, f = 4h, dropout) gives Table 2's
    ``10 + 24/t``. Dropout is assumed where positions are learned (GPT-style models) and absent
    for RoPE models (Llama, Mixtral train without it).
    """
    h, f = model.hidden, model.mlp_width
    dropout = model.learned_positions
    whole = 4 * h + 2 * h + 2 * h + (2 * h if dropout else 0)
    split = 2 * h + 4 * model.kv_width + 2 * h + 2 * f * (2 if model.gated_mlp else 1) + 2 * f
    scores = 0.0 if flash or recompute == "selective" else 5 * model.heads * model.seq
    tokens = model.seq * micro
    if recompute == "full":
        return 2 * h * tokens / (tp if sequence_parallel else 1)
    if sequence_parallel:
        return tokens * (whole + split + scores) / tp
    return tokens * (whole + (split + scores) / tp)


def peak_in_flight(ops: list[Op], chunk_layers: list[int] | None = None) -> int:
    """The most forward passes a stage has run whose backward it has not yet run; with
    *chunk_layers* (the layers of each of its chunks), the most such layer passes."""
    live = peak = 0
    for op in ops:
        weight = chunk_layers[op.chunk] if chunk_layers is not None else 1
        live += weight if op.kind == "F" else -weight
        peak = max(peak, live)
    return peak
