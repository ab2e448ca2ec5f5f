"""The shape of a transformer language model: parameter counts and FLOPs per layer.

Hybrid-parallel planning needs three numbers per layer and micro-batch: how many parameters
the layer holds (gradient and optimizer bytes), how many FLOPs its forward pass costs (the
backward costs twice that), and how large the activation that crosses a pipeline stage is.
All follow from the model's shape, with the counts of Narayanan et al., "Efficient
Large-Scale Language Model Training on GPU Clusters Using Megatron-LM" (SC 2021), section 5.1,
generalised to grouped-query attention, gated MLPs (SwiGLU) and mixture-of-experts layers.

For one layer and a micro-batch of *b* sequences of *s* tokens (hidden size *h*, MLP size
*f*, key/value width *h_kv* = h x kv_heads / heads), the forward pass multiplies

* the query, key and value projections: ``2 b s h (h + 2 h_kv)`` FLOPs;
* attention scores and their weighted sum: ``2 x 2 b s^2 h``;
* the output projection: ``2 b s h^2``;
* the MLP: ``2 b s h f`` per matrix, two matrices (three when gated), for each of the
  ``top_k`` experts a token is routed to. Mixture-of-experts layers route tokens by a top-k
  gate; with a ``capacity_factor`` c (GShard, Switch Transformer) every expert's buffer holds c
  times the mean tokens per expert and is padded to it, so experts compute, and all-to-alls
  move, c times the balanced load (c = 1: perfectly balanced routing, nothing dropped).

With multi-head attention and ``f = 4h`` this is Megatron's ``24 b s h^2 (1 + s / 6h)``. The
output layer (logits) adds ``2 b s h V``. Parameters per layer are ``h (h + 2 h_kv) + h^2``
for attention, ``(2 or 3) h f`` per expert (plus the router's ``h E``) and ``4h`` for the two
layer norms; the embedding holds ``V h`` (and ``s h`` learned positions; untied output
weights another ``V h``). GPT-3 "175B": 12 x 96 x 12288^2 = 174.0e9 in the layers, 174.6e9 in all,
as Megatron's ``12 l h^2 (1 + 13 / 12h + (V + s) / 12lh)`` counts.

Examples::

    >>> gpt = TransformerModel(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200)
    >>> round(gpt.params / 1e9, 1)
    174.6
    >>> round(gpt.layer_forward_flops(batch=1) / (24 * 2048 * 12288**2 * (1 + 2048 / (6 * 12288))), 12)
    1.0
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from mpisim.engine.units import parse_count
from mpisim.errors import ConfigError, UnitError

__all__ = ["PRESETS", "TransformerModel", "parse_model"]


@dataclass(frozen=True)
class TransformerModel:
    """A decoder-only transformer: its shape, and the counts that follow from it.

    ``flat_params`` is set instead of the shape for a model known only by its parameter count
    (``model: {params: 300M}``): it has no layers to split and its compute must be given.
    """

    layers: int = 0
    hidden: int = 0
    heads: int = 0
    seq: int = 0
    vocab: int = 0
    ffn: int = 0  # MLP width; 0: 4 x hidden
    kv_heads: int = 0  # 0: heads (multi-head attention); fewer: grouped-query attention
    gated_mlp: bool = False  # SwiGLU (three matrices) instead of GeLU (two)
    experts: int = 1  # MoE: experts per layer (1: dense)
    top_k: int = 1  # MoE: experts each token is routed to
    capacity_factor: float = 1.0  # MoE: expert buffers hold this x the mean tokens per expert (padded)
    tied_embeddings: bool = True  # the output layer reuses the embedding's weights
    learned_positions: bool = True  # GPT's position embedding (s x h parameters); False: RoPE
    flat_params: int = 0

    # --------------------------------------------------------------------------- shape

    @property
    def flat(self) -> bool:
        """True for a model known only by its parameter count."""
        return self.flat_params > 0

    @property
    def mlp_width(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def kv_width(self) -> int:
        return self.hidden * (self.kv_heads or self.heads) // self.heads

    @property
    def moe(self) -> bool:
        return self.experts > 1

    # --------------------------------------------------------------------------- parameters

    def attention_params(self) -> int:
        h = self.hidden
        return h * (h + 2 * self.kv_width) + h * h

    def expert_params(self) -> int:
        """Parameters of one expert's MLP (of the one MLP in a dense layer)."""
        return (3 if self.gated_mlp else 2) * self.hidden * self.mlp_width

    def layer_params(self) -> int:
        """Parameters of one transformer layer (all its experts)."""
        router = self.hidden * self.experts if self.moe else 0
        return self.attention_params() + self.experts * self.expert_params() + router + 4 * self.hidden

    def embedding_params(self) -> int:
        """Input embedding (and learned positions): held by the first pipeline stage."""
        return self.vocab * self.hidden + (self.seq * self.hidden if self.learned_positions else 0)

    def output_params(self) -> int:
        """Output projection held by the last stage (0 when tied to the embedding) plus the final norm."""
        return (0 if self.tied_embeddings else self.vocab * self.hidden) + 2 * self.hidden

    @property
    def params(self) -> int:
        """All parameters of the model."""
        if self.flat:
            return self.flat_params
        return self.layers * self.layer_params() + self.embedding_params() + self.output_params()

    @property
    def active_params(self) -> int:
        """Parameters a token meets (MoE: only its top_k experts)."""
        if self.flat or not self.moe:
            return self.params
        return self.params - self.layers * (self.experts - self.top_k) * self.expert_params()

    # --------------------------------------------------------------------------- FLOPs

    def attention_core_flops(self, batch: int) -> float:
        """FLOPs of the attention scores and weighted sum in one layer's forward (what selective recomputation redoes)."""
        return 4.0 * batch * self.seq**2 * self.hidden

    def layer_forward_flops(self, batch: int) -> float:
        """FLOPs of one layer's forward pass for *batch* sequences."""
        b, s, h = batch, self.seq, self.hidden
        projections = 2.0 * b * s * h * (h + 2 * self.kv_width) + 2.0 * b * s * h * h
        routed = self.top_k * self.capacity_factor if self.moe else 1
        mlp = 2.0 * b * s * h * self.mlp_width * (3 if self.gated_mlp else 2) * routed
        return projections + self.attention_core_flops(batch) + mlp

    def logits_forward_flops(self, batch: int) -> float:
        """FLOPs of the output layer's forward pass (the last stage's)."""
        return 2.0 * batch * self.seq * self.hidden * self.vocab

    def model_flops(self, samples: int) -> float:
        """FLOPs of one training step on *samples* sequences without recomputation (forward + 2 x backward)."""
        useful = replace(self, capacity_factor=1.0)  # padding in expert buffers is not model FLOPs
        return 3.0 * samples * (self.layers * useful.layer_forward_flops(1) + self.logits_forward_flops(1))

    def activation_elements(self, batch: int) -> int:
        """Elements of the activation one layer hands the next (b x s x h)."""
        return batch * self.seq * self.hidden


#: Published shapes. GPT-3: Brown et al. 2020, Table 2.1; Megatron-LM rows: Narayanan et al.
#: 2021, Table 1 (vocabulary 51,200, sequence 2048); Llama 2 7B: Touvron et al. 2023 (vocabulary
#: 32,000, sequence 4096, SwiGLU 11008); Llama 3: Meta's model cards (vocabulary
#: 128,256, RoPE, GQA with 8 KV heads, SwiGLU); Mixtral 8x7B: Jiang et al. 2024 (8 experts,
#: top-2, Mistral-7B shape, vocabulary 32,000).
PRESETS: dict[str, TransformerModel] = {
    "gpt3-175b": TransformerModel(layers=96, hidden=12288, heads=96, seq=2048, vocab=51200),
    "megatron-1.7b": TransformerModel(layers=24, hidden=2304, heads=24, seq=2048, vocab=51200),
    "megatron-18.4b": TransformerModel(layers=40, hidden=6144, heads=48, seq=2048, vocab=51200),
    "megatron-145.6b": TransformerModel(layers=80, hidden=12288, heads=96, seq=2048, vocab=51200),
    "megatron-1t": TransformerModel(layers=128, hidden=25600, heads=160, seq=2048, vocab=51200),
    "llama2-7b": TransformerModel(layers=32, hidden=4096, heads=32, ffn=11008, seq=4096, vocab=32000, gated_mlp=True,
                                  tied_embeddings=False, learned_positions=False),
    "llama3-8b": TransformerModel(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, seq=8192, vocab=128256,
                                  gated_mlp=True, tied_embeddings=False, learned_positions=False),
    "llama3-70b": TransformerModel(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28672, seq=8192, vocab=128256,
                                   gated_mlp=True, tied_embeddings=False, learned_positions=False),
    "llama3-405b": TransformerModel(layers=126, hidden=16384, heads=128, kv_heads=8, ffn=53248, seq=8192,
                                    vocab=128256, gated_mlp=True, tied_embeddings=False, learned_positions=False),
    "mixtral-8x7b": TransformerModel(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14336, seq=4096, vocab=32000,
                                     gated_mlp=True, experts=8, top_k=2, tied_embeddings=False,
                                     learned_positions=False),
}

_SHAPE_KEYS = tuple(f.name for f in fields(TransformerModel) if f.name != "flat_params")
_REQUIRED = ("layers", "hidden", "heads", "seq", "vocab")
_BOOLS = ("gated_mlp", "tied_embeddings", "learned_positions")
_FLOATS = ("capacity_factor",)


def parse_model(raw: Any, path: str = "model") -> TransformerModel:
    """Read ``model:``: a preset name, ``{preset: llama3-8b, seq: 4096}``, a shape, or ``{params: 300M}``.

    Raises ConfigError naming the field under *path*.
    """
    if isinstance(raw, str):
        raw = {"preset": raw}
    if not isinstance(raw, dict):
        raise ConfigError(f"expected a preset name ({', '.join(PRESETS)}) or a mapping such as "
                          "{layers: 32, hidden: 4096, heads: 32, seq: 2048, vocab: 51200}", path)
    raw = dict(raw)
    if "params" in raw:
        extra = sorted(set(raw) - {"params"})
        if extra:
            raise ConfigError(f"a model given by params: has no shape; remove {', '.join(extra)} "
                              "or give the shape instead of params", f"{path}.{extra[0]}")
        try:
            return TransformerModel(flat_params=parse_count(raw["params"]))
        except UnitError as err:
            raise err.at(f"{path}.params") from None
    base = TransformerModel()
    if "preset" in raw:
        name = raw.pop("preset")
        if name not in PRESETS:
            raise ConfigError(f"unknown model {name!r}; known: {', '.join(PRESETS)}", f"{path}.preset")
        base = PRESETS[name]
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in _SHAPE_KEYS:
            raise ConfigError(f"unknown key {key!r}; allowed keys: preset, params, {', '.join(_SHAPE_KEYS)}",
                              f"{path}.{key}")
        if key in _FLOATS:
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 1:
                raise ConfigError(f"expected a number >= 1 (expert buffers hold this x the mean load), got {value!r}",
                                  f"{path}.{key}")
            values[key] = float(value)
            continue
        if key in _BOOLS:
            if not isinstance(value, bool):
                raise ConfigError(f"expected true or false, got {value!r}", f"{path}.{key}")
            values[key] = value
            continue
        try:
            number = parse_count(value)
        except UnitError as err:
            raise err.at(f"{path}.{key}") from None
        if number < 1:
            raise ConfigError(f"expected a whole number >= 1, got {value!r}", f"{path}.{key}")
        values[key] = number
    model = replace(base, **values)
    for key in _REQUIRED:
        if getattr(model, key) < 1:
            raise ConfigError(f"this key is required (or give a preset: {', '.join(PRESETS)})", f"{path}.{key}")
    if model.hidden % model.heads:
        raise ConfigError(f"hidden ({model.hidden}) must be a multiple of heads ({model.heads})", f"{path}.heads")
    if model.kv_heads and model.heads % model.kv_heads:
        raise ConfigError(f"heads ({model.heads}) must be a multiple of kv_heads ({model.kv_heads})", f"{path}.kv_heads")
    if model.top_k > model.experts:
        raise ConfigError(f"top_k ({model.top_k}) cannot exceed experts ({model.experts})", f"{path}.top_k")
    return model


def dump_model(model: TransformerModel) -> dict[str, Any]:
    """The resolved model, loadable again by :func:`parse_model`."""
    if model.flat:
        return {"params": model.flat_params}
    default = TransformerModel()
    return {key: getattr(model, key) for key in _SHAPE_KEYS
            if key in _REQUIRED or getattr(model, key) != getattr(default, key)}
