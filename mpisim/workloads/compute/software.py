"""What the training framework runs around the GEMMs: fused or eager element-wise kernels, which attention.

The same layer costs different kernels in different software stacks. Megatron-LM / Megatron-Core
(and NeMo on it) fuse the element-wise work: one kernel per layer norm (Apex / Transformer
Engine), the bias, GeLU or SwiGLU and dropout fused (``--bias-gelu-fusion``,
``--bias-swiglu-fusion``), rotary in one kernel, attention through Transformer Engine's fused
(cuDNN / flash) kernels, FlashAttention-3-class on Hopper. PyTorch-native trainers run eager
PyTorch unless ``torch.compile`` is on, and every Python-level operation is its own kernel
reading and writing HBM:

* **torchtitan** (as of its A100 performance table, mid-2024: ``train_configs/llama3_8b.toml``
  has ``compile = false``, ``norm_type = "rmsnorm"``, activation checkpointing
  ``mode = 'selective'``, ``selective_ac_option = 'op'``): its RMSNorm is the reference
  ``_norm(x.float()).type_as(x) * weight`` with ``_norm(x) = x * rsqrt(x.pow(2).mean(-1) + eps)``
  (``torchtitan/models/norms.py``), six kernels moving 36 bytes per element (cast in 2 + 4,
  square 4 + 4, mean 4, scale 4 + 4, cast back 4 + 2, weight 2 + 2) instead of a fused norm's 4;
  rotary embeddings multiply in complex FP32 (``xq.float()`` 2 + 4, the complex product 4 + 4,
  ``type_as`` 4 + 2: 20 bytes per element of q and k); SwiGLU is ``F.silu(w1(x)) * w3(x)``, two
  kernels (2 + 2, then 4 + 2: 10 bytes per element of the hidden MLP width against a fused
  kernel's 6); ``repeat_kv`` copies K and V out to every query head and the attention output is
  made contiguous before the output projection; the logits are cast to FP32 for the loss
  (``self.output(h).float()`` then ``F.cross_entropy``). Attention is PyTorch's
  ``scaled_dot_product_attention``, whose flash backend is FlashAttention-2 on every GPU.
  Selective "op" checkpointing (``torchtitan/distributed/activation_checkpoint.py``: "Save all
  compute/comm ops, except every second mm/linear") recomputes, before the backward, every
  second matrix multiplication of the forward (wk, wo, w3 in a Llama block) and every
  element-wise kernel; attention's output is saved. Its FSDP2 (``fully_shard``) gathers each
  block into one flat buffer and then copies it out into the block's unsharded parameters on
  the compute stream (``foreach_all_gather_copy_out``: ``split_with_sizes_copy``, in
  ``torch/distributed/_composable/fsdp/_fsdp_collectives.py``), before the forward and again
  before the backward: 2 + 2 bytes per parameter each time.
* **llm-foundry** (MosaicML's MPT benchmark tables, ``scripts/train/benchmarking`` at commit
  061f2c7, October 2023): eager PyTorch too, but its layer norm is one ``F.layer_norm`` kernel
  (``LPLayerNorm``) and GeLU one ``F.gelu``, as fused as Megatron's, and the loss is
  flash-attn's fused cross-entropy (``loss_fn: fused_crossentropy``, the default in
  ``modeling_mpt.py``). Attention is ``attn_impl: triton`` (``submit_benchmarks.py``'s
  default, as in ``yamls/pretrain/mpt-*.yaml``): MosaicML's Triton port of the first
  FlashAttention (the package pins ``flash-attn==1.0.9`` and ``triton-pre-mlir``), the kernel
  ALiBi needed then.

FlashAttention-2 on Hopper reaches "only 35 % utilization on H100" (Shah et al.,
"FlashAttention-3", 2024, abstract): it uses none of Hopper's asynchronous tensor-core (wgmma)
and TMA instructions, so Hopper and later run it at that fraction of their peak (forward; its
backward at FlashAttention-2's A100 backward/forward ratio, 63/73), not at FlashAttention-3's.
The first FlashAttention and its Triton version run at half FlashAttention-2's rate:
FlashAttention-2 is "around 2x faster than FlashAttention" (Dao 2023, abstract), and "1.7-3.0x
faster than FlashAttention, 1.3-2.5x faster than FlashAttention in Triton" (section 4.1).

**The optimizer step.** Megatron's distributed optimizer runs Adam as one fused multi-tensor
kernel (Apex/Transformer Engine ``FusedAdam``): it reads the FP32 weight, gradient and two
moments and writes the weight, the moments and the BF16 copy, 30 bytes per parameter.
Composer's ``DecoupledAdamW`` (llm-foundry's ``optimizer: decoupled_adamw``;
``composer/optim/decoupled_weight_decay.py``, ``adamw``: a Python loop over the parameters)
and torchtitan's ``torch.optim.AdamW(foreach=True)`` run the update as eight element-wise FP32
operations, each its own pass over HBM: ``exp_avg.mul_`` (4 + 4 bytes) ``.add_(grad)``
(8 + 4), ``exp_avg_sq.mul_`` (4 + 4) ``.addcmul_(grad, grad)`` (8 + 4), ``sqrt`` (4 + 4),
``/ sqrt(bias_correction2)`` (4 + 4), ``.add_(eps)`` (4 + 4), ``param.addcdiv_`` (12 + 4):
80 bytes per parameter (:data:`EAGER_ADAM_BYTES`).

**Megatron-LM of 2021** (``megatron-2021``: the code of Narayanan et al.'s SC21 runs, Megatron-LM
at commit aed2f75 of April 2021, run in the ``nvcr.io/nvidia/pytorch:20.12-py3`` container that
``examples/pretrain_gpt3_175B.sh`` names) fuses the element-wise work as today's does, but
differs in four costs the fused default leaves out:

* **Dropout is on.** ``megatron/arguments.py``: ``--attention-dropout`` and ``--hidden-dropout``
  default to 0.1, and the paper's example scripts do not change them. Attention dropout
  (``torch.nn.Dropout`` on the s x s probabilities, after the fused scale-mask-softmax) reads
  the probabilities and writes them and a one-byte mask, and its backward reads them again;
  the hidden dropout is fused into ``bias_dropout_add`` (one more read and a mask per element).
  With full recomputation the forward's dropouts run twice.
* **Gradient accumulation per micro-batch, unfused.** Before Megatron's fused weight-gradient
  accumulation (``gradient_accumulation_fusion``, February 2022), each micro-batch's weight
  gradients were added up by a separate pass. The paper's example script trains in FP16 without
  ``--accumulate-allreduce-grads-in-fp32`` or ``--use-contiguous-buffers-in-ddp``, so its local
  DDP keeps no ``main_grad`` buffer and autograd's AccumulateGrad adds each gradient into the
  16-bit ``.grad`` in place: read 2 + 2, write 2 bytes per parameter
  (:data:`FP16_GRAD_ACCUMULATION_BYTES`). (With ``--bf16`` Megatron forces FP32 accumulation: a
  backward hook runs ``param.main_grad.add_(param.grad.data)``, ``megatron/model/distributed.py``,
  read 4 + 2, write 4: :data:`MAIN_GRAD_BYTES`.)
* **An FP32 vocabulary-parallel loss.** Unless ``--fp16-lm-cross-entropy``, the logits go to
  ``mpu.vocab_parallel_cross_entropy(output.float(), labels)`` (``megatron/model/gpt_model.py``):
  the cast (2 + 4 bytes per logit), ``max`` (4), ``sub_`` (4 + 4), ``exp`` in place (4 + 4),
  ``sum`` (4), ``div_`` (4 + 4): 38 bytes forward; the backward ``mul_`` by the loss gradient
  (4 + 4) and the cast back (4 + 2): 14 (:data:`MEGATRON_FP32_LOSS_BYTES`).

* **Gradients all-reduced after the backward, not during it.** ``--DDP-impl`` defaults to
  ``local`` (``megatron/arguments.py``), and ``train_step`` (``megatron/training.py``) runs
  ``forward_backward_func`` over all micro-batches and only then ``model_module.allreduce_gradients()``
  ("All-reduce if needed": ``if args.DDP_impl == 'local'``): the data-parallel all-reduce is
  exposed, none of it behind the backward (:attr:`Software.overlap_dp`; a scenario's
  ``overlap: {dp: true}`` still overrides). Without contiguous buffers,
  ``allreduce_gradients`` (``megatron/model/distributed.py``) packs the 16-bit gradients into one
  flat tensor (``_flatten_dense_tensors``: read 2, write 2 bytes per parameter), divides it by the
  data-parallel size in place (2 + 2) and copies the reduced values back into each ``.grad``
  (``buf.copy_(synced)``: 2 + 2): 12 bytes per parameter and step (:data:`DDP_FLATTEN_BYTES`).

**Megatron-DeepSpeed** (``megatron-deepspeed``: BigScience's fork as BLOOM-176B trained on it in
2022) keeps the first three: the dropout defaults ("The default Megatron-LM dropout settings are
inherited: --attention-dropout 0.1, --hidden-dropout 0.1", bigscience
``train/tr11-176B-ml/README.md``), the FP32 loss (the pipeline model's
``mpu.vocab_parallel_cross_entropy(output.contiguous().float(), labels)``,
``megatron/model/gpt_model.py``), and a per-micro-batch FP32 gradient add, here DeepSpeed's BF16
optimizer's (``bf16_optimizer.py``, ``update_hp_grads``: ``hp_grad.data.add_(lp.grad.data.to(
hp_grad.dtype))``, run after every micro-batch's backward): the cast reads 2 and writes 4 bytes,
the add reads 4 + 4 and writes 4: 18 bytes per parameter (:data:`BF16_OPTIMIZER_GRAD_BYTES`).
The run's ``CUDA_LAUNCH_BLOCKING=1`` (a workaround for hangs) is not charged: BigScience measured
it to make "a tiny impact or no impact at all to the throughput" at that scale (same README).

A scenario names the framework (``workload: {framework: torchtitan}``) where its source
states it; left out, the layer is costed fused, with the device's own attention kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpisim.errors import ConfigError
from mpisim.workloads.compute.devices import Device

__all__ = ["BF16_OPTIMIZER_GRAD_BYTES", "DDP_FLATTEN_BYTES", "EAGER_ADAM_BYTES", "FA2_HOPPER", "FP16_GRAD_ACCUMULATION_BYTES", "FRAMEWORKS",
           "MAIN_GRAD_BYTES", "MEGATRON_FP32_LOSS_BYTES", "Software", "attention_fractions", "software"]

#: FlashAttention-2's fractions of the BF16 peak on Hopper (forward, backward): 35 % (Shah et al.
#: 2024) at the longest sequences, i.e. 0.35 x (16384 + 244) / 16384 asymptotically, and the backward
#: at FlashAttention-2's 63/73 backward/forward ratio (Dao 2023, A100).
FA2_HOPPER = (0.355, round(0.355 * 63 / 73, 3))


#: HBM bytes per parameter of an Adam step run as eight eager FP32 element-wise operations (see above).
EAGER_ADAM_BYTES = 8 + 12 + 8 + 12 + 8 + 8 + 8 + 16

#: HBM bytes per parameter and micro-batch of ``main_grad.add_(grad)``: read FP32 4 and 16-bit 2, write FP32 4.
MAIN_GRAD_BYTES = 4 + 2 + 4

#: HBM bytes per parameter and micro-batch of autograd's in-place ``grad += new`` on a 16-bit gradient.
FP16_GRAD_ACCUMULATION_BYTES = 2 + 2 + 2

#: HBM bytes per parameter and micro-batch of DeepSpeed's BF16 optimizer's ``hp_grad.add_(lp_grad.to(fp32))``.
BF16_OPTIMIZER_GRAD_BYTES = 2 + 4 + 4 + 4 + 4

#: HBM bytes per parameter and step of Megatron-LM 2021's local DDP packing, scaling and unpacking the gradients.
DDP_FLATTEN_BYTES = (2 + 2) + (2 + 2) + (2 + 2)

#: HBM bytes per logit of Megatron's FP32 vocabulary-parallel cross-entropy (forward, backward; see above).
MEGATRON_FP32_LOSS_BYTES = (6 + 4 + 8 + 8 + 4 + 8, 8 + 6)


@dataclass(frozen=True)
class Software:
    """A training framework's kernels: eager (unfused, FP32 casts) or fused, and its attention kernel."""

    name: str
    eager_norm: bool = False  # the reference RMSNorm as six eager kernels (torchtitan)
    eager_rotary: bool = False  # rotary in complex FP32 (torchtitan)
    eager_swiglu: bool = False  # silu and the product as two kernels
    repeat_kv: bool = False  # K and V copied out to every query head, attention output made contiguous
    fp32_loss: bool = False  # logits cast to FP32 for an eager cross-entropy
    attention: str = ""  # "": the device's best kernel; flash2 (PyTorch SDPA, flash-attn 2); triton (FlashAttention 1)
    op_checkpoint: bool = False  # selective recomputation = every second mm and the element-wise kernels
    fsdp2_copy_out: bool = False  # FSDP2 copies each all-gathered block into its parameters (ZeRO 3)
    adam_bytes: int = 30  # HBM bytes per parameter of one Adam step: one fused kernel (30), or eager ops (80)
    dropout: bool = False  # hidden and attention dropout on (Megatron-LM's 0.1 defaults of 2021)
    grad_accumulation_bytes: int = 0  # HBM bytes per parameter and micro-batch of an unfused FP32 gradient add
    loss_bytes: tuple[int, int] = ()  # HBM bytes per logit of the loss (forward, backward); (): see estimate.py
    overlap_dp: bool = True  # the data-parallel gradient reduction runs during the backward (False: after it)
    ddp_copy_bytes: int = 0  # HBM bytes per parameter and step the DDP spends packing and unpacking gradients


FRAMEWORKS: dict[str, Software] = {s.name: s for s in (
    Software("megatron"),
    Software("megatron-2021", dropout=True, grad_accumulation_bytes=FP16_GRAD_ACCUMULATION_BYTES,
             loss_bytes=MEGATRON_FP32_LOSS_BYTES, overlap_dp=False, ddp_copy_bytes=DDP_FLATTEN_BYTES),
    Software("megatron-deepspeed", dropout=True, grad_accumulation_bytes=BF16_OPTIMIZER_GRAD_BYTES,
             loss_bytes=MEGATRON_FP32_LOSS_BYTES),
    Software("nemo"),
    Software("torchtitan", eager_norm=True, eager_rotary=True, eager_swiglu=True, repeat_kv=True, fp32_loss=True,
             attention="flash2", op_checkpoint=True, fsdp2_copy_out=True, adam_bytes=EAGER_ADAM_BYTES),
    Software("llm-foundry", attention="triton", adam_bytes=EAGER_ADAM_BYTES),
)}


def software(name: str | None) -> Software:
    """The framework called *name*; None or "" is the fused default. Raises ConfigError for other names."""
    if not name:
        return FRAMEWORKS["megatron"]
    if name not in FRAMEWORKS:
        raise ConfigError(f"unknown framework {name!r}; known: {', '.join(FRAMEWORKS)}", "framework")
    return FRAMEWORKS[name]


def attention_fractions(sw: Software, dev: Device) -> tuple[float, float] | None:
    """The (forward, backward) fractions of *dev*'s peak the framework's attention kernel reaches, or
    None for the device's own best kernel (:data:`~.devices.Device.attention`)."""
    if not sw.attention or sw.attention == dev.attention_kernel:
        return None
    if dev.attention_kernel == "flash2":
        flash2 = dev.attention  # Ampere (and the devices assumed at its fractions)
    else:
        flash2 = FA2_HOPPER  # Hopper; ASSUMED for Blackwell, for want of a FlashAttention-2 sweep there
    if sw.attention == "flash2":
        return flash2
    return (flash2[0] / 2, flash2[1] / 2)  # triton: the first FlashAttention's rate
