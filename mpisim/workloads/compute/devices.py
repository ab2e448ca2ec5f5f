"""The accelerators a training job runs on: what their spec sheets promise and what benchmarks reach.

A GPU's datasheet gives a peak rate per number format (dense tensor-core FLOP/s: BF16, FP8,
TF32), its HBM bandwidth and size, and its power. Peaks are what every SM would do at the boost
clock with no stall: ``clock x FMAs per tensor core per clock x 2 x tensor cores`` (A100:
1410 MHz x 256 x 2 x 432 = 312 TFLOP/s; H100 SXM: 1830 MHz x 512 x 2 x 528 = 989). No real
matrix multiplication reaches them: clocks fall under sustained load (power), and the
instruction stream has gaps. What a large, well-shaped GEMM does reach is the **maximum
achievable matmul FLOP/s** (MAMF): the best of a brute-force search over shapes, with
``torch.mm`` on the vendor's BLAS (S. Bekman, *Machine Learning Engineering*,
compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison table", mean of 100
iterations after 50 warm-up). :mod:`~mpisim.workloads.compute.gemm` calibrates its one rate
per device and dtype on that table, at the shape the table names, so the model reproduces the
measurement there and predicts every other shape from tile and wave counts.

Every number below carries its source. "SMs" is the count the device reports
(``multi_processor_count``): compute units for AMD. Fused attention runs at its own
fraction of the peak, measured for the kernel generation each device runs
(FlashAttention-2 on Ampere, FlashAttention-3 on Hopper, the Blackwell kernels on B200).

Examples::

    >>> round(device("h100-sxm").peak("bf16") / 1e12)
    989
    >>> device("a100-sxm4-80gb").mamf["bf16"][0] / 1e12
    271.2
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mpisim.errors import ConfigError

__all__ = ["DEVICES", "DTYPES", "Device", "NodeSpread", "canonical_dtype", "device"]

TERA = 1e12

#: Names a scenario may use for each number format, mapped to the one the tables use.
DTYPES = {
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "fp8": "fp8", "float8_e4m3": "fp8", "float8_e5m2": "fp8", "e4m3": "fp8", "e5m2": "fp8",
    "tf32": "tf32", "fp32": "tf32", "float32": "tf32",  # PyTorch runs fp32 matmuls on TF32 tensor cores when allowed
}

# The CTA (thread-block) output tiles cuBLAS's tensor-core GEMMs choose from, largest (most
# efficient) first: NVIDIA, "Matrix Multiplication Background User's Guide" (DU-09799-001),
# section 2.3 "Typical tile dimensions in cuBLAS and performance": 256x128 and 128x256 are the
# most efficient, 64x64 the least.
CUBLAS_TILES: tuple[tuple[int, int], ...] = ((256, 128), (128, 256), (128, 128), (256, 64), (64, 256),
                                             (128, 64), (64, 128), (64, 64))

# Streaming kernels reach about 90 % of HBM's peak: on an H100 80GB HBM3, a CUDA-event timed
# device-to-device copy of 1 GB moves 3024 GB/s and a STREAM triad 3089 GB/s, 0.90 and 0.92 of
# 3.35 TB/s (a published H100 bandwidth probe, torch 2.11 + CUDA 12.8). Memory-bound kernels
# below are charged at this fraction on every device (ASSUMED beyond H100).
HBM_EFFICIENCY = 0.9

# What the CPU needs to launch one kernel: 4-6 us through the driver and runtime
# (measured with back-to-back synchronised launches: "pegainfer (3): From launch overhead to
# CUDA Graph", cuda-kernel-launch-lab). A kernel shorter than this leaves the GPU waiting for
# the next one, so a stream of short kernels runs at the launch rate: we take the low end.
LAUNCH_S = 4e-6


@dataclass(frozen=True)
class NodeSpread:
    """How the sustained matmul rate of a node's GPUs differs when all of them run at once.

    ``shared``: their mean rate over one GPU's alone (one power and cooling budget);
    ``range``: (max - min) / mean over ``samples`` measurements (GPUs x rounds); ``noise_range``
    over ``noise_samples`` rounds of one GPU is the run-to-run noise inside it (0: not measured).
    """

    shared: float
    range: float
    samples: int
    noise_range: float = 0.0
    noise_samples: int = 2


@dataclass(frozen=True)
class Device:
    """One accelerator: spec-sheet peaks, memory, SMs and the measured GEMM and attention rates.

    ``peaks`` are dense tensor-core FLOP/s per dtype; ``mamf`` maps a dtype to the best measured
    matmul rate and the (m, n, k) where it was measured; ``attention`` is the fraction of the
    BF16 peak fused attention reaches on long sequences (forward, backward).
    """

    name: str
    peaks: dict[str, float]
    hbm_bandwidth: float  # B/s, datasheet
    memory: float  # bytes of HBM
    sms: int
    l2: float  # bytes of last-level cache
    clock_hz: float  # boost clock the peaks are computed at
    tdp_w: float
    mamf: dict[str, tuple[float, tuple[int, int, int]]]
    attention: tuple[float, float]
    attention_kernel: str
    sustained: dict[str, float] = field(default_factory=dict)  # per dtype: sustained / burst matmul rate (MSMF / MAMF)
    node: NodeSpread = field(default_factory=lambda: GENERIC_NODE)  # its GPUs' sustained rates, all loaded (variability)
    epilogue_overlap: bool = False  # persistent warp-specialised kernels (Hopper on) write one tile while computing the next
    tiles: tuple[tuple[int, int], ...] = CUBLAS_TILES
    measured_on: str = ""  # the device a shared MAMF row was measured on: its tensor rate is this one's too
    hbm_efficiency: float = HBM_EFFICIENCY
    launch_s: float = LAUNCH_S
    notes: str = ""
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def sustained_share(self, dtype: str) -> float:
        """The sustained matmul rate over the burst one (MSMF / MAMF) for *dtype*: BF16's for a format
        without its own measurement, 1 for a device without any."""
        key = canonical_dtype(dtype)
        return self.sustained.get(key, self.sustained.get("bf16", 1.0))

    def peak(self, dtype: str) -> float:
        """The datasheet's dense peak for *dtype* in FLOP/s (fp16 falls back to bf16's).

        Raises ConfigError when the device has no tensor-core rate for that format (A100 and FP8).
        """
        key = canonical_dtype(dtype)
        if key not in self.peaks and key == "fp16":
            key = "bf16"
        if key not in self.peaks:
            raise ConfigError(f"{self.name} has no {key} tensor cores; known: {', '.join(sorted(self.peaks))}",
                              "dtype")
        return self.peaks[key]

    def measured(self, dtype: str) -> tuple[float, tuple[int, int, int]]:
        """The MAMF measurement for *dtype*: (FLOP/s, (m, n, k)).

        A format without its own measurement keeps the BF16 measurement's fraction of the peak at
        the BF16 shape (fp16 runs on the same tensor cores at the same rate).
        """
        key = canonical_dtype(dtype)
        if key in self.mamf:
            return self.mamf[key]
        rate, shape = self.mamf["bf16"]
        return rate / self.peaks["bf16"] * self.peak(key), shape

    @property
    def hbm_rate(self) -> float:
        """Bytes per second a streaming kernel achieves."""
        return self.hbm_bandwidth * self.hbm_efficiency


def canonical_dtype(dtype: str) -> str:
    """``bfloat16`` -> ``bf16``, ``float8_e4m3`` -> ``fp8``; raises ConfigError for other names."""
    try:
        return DTYPES[dtype.lower()]
    except (KeyError, AttributeError):
        raise ConfigError(f"unknown compute dtype {dtype!r}; known: {', '.join(sorted(DTYPES))}", "dtype") from None


GIB = 2**30

# Fused attention's rate grows with the key length s it loops over: each query block pays a
# fixed cost (loading Q, the softmax epilogue, writing O), amortised over s keys, so the rate is
# f x s / (s + s0). FlashAttention-3 on H100 (head dim 128, batch x sequence = 16k tokens,
# pytorch/benchmark PR #2391): 430, 517, 565, 590, 614, 621 TFLOP/s at s = 512 ... 16384, which
# f = 632/989 and s0 = 244 reproduce within 1.5 % at every point (tests). Per kernel generation,
# the asymptotic fractions of the BF16 peak (forward, backward):
# - FlashAttention-2 on A100: "up to 73 % of the theoretical maximum FLOPs/s in the forward
#   pass and up to 63 % in the backward pass" (Dao, "FlashAttention-2", 2023, section 4.1), at
#   its longest sequence (16k): 0.73 x (16384 + 244) / 16384 = 0.741 and 0.640.
# - FlashAttention-3 on H100: forward 632/989 = 0.639 (the fit above). Backward: FA3's is
#   1.5-1.75x FA2's, which reaches 35 % of H100 (Shah et al. 2024, abstract and section 4), and
#   FA2's backward/forward ratio on A100 is 63/73: 0.639 x 0.863 = 0.551.
# - Blackwell (B200, GB200): FlashAttention-4 on B200 runs forward + backward 1.88x faster than
#   FA3 on H200 at 8k tokens (Bekman, ML Engineering, training/performance "Flash attention"),
#   so its fractions of a 2250 peak are 1.88 x 989 / 2250 = 0.826 x Hopper's.
ATTENTION_S0 = 244
FA2_A100 = (0.741, 0.640)

# Sustained against burst rates. A matmul benchmark's short bursts run at the boost clock; a
# training run keeps the GPU at its power limit, where the clock settles lower: "a dense training
# step keeps the SMs busy, draws full power, and lives at the settled clock, not the boost clock"
# (S. Bekman, ML Engineering, compute/accelerator/README.md, MAMF & MSMF table, branch fast-mamf,
# commit 082816f, August 2026). mamf-finder's MSMF ("maximum sustainable matmul FLOPS", a compute-dense shape
# after a thermal soak at the power limit, "for training-throughput reasoning use MSMF") against
# its MAMF (the best burst, boost-clock validated) in the same run, per format:
# - H200 SXM (700 W): BF16 708.5 at 1465 MHz vs 841.9 at 1980 MHz; FP8 1288.7 vs 1491.9. H100 SXM
#   is the same GH100 die at the same clocks and 700 W: it takes these ratios.
# - B200 (1000 W): BF16 1456.3 at 1339 MHz vs 1770.9 at 1965 MHz; FP8 2795.7 vs 3435.2. GB200 takes
#   them (ASSUMED: its 1200 W leaves more headroom, so this errs slow).
# The MAMF rows the GEMM model is calibrated on (:data:`Device.mamf`) are the older table's best
# shapes, which are low-power ones (few output tiles, long k: 2048x2048x13312 on H100), run as
# bursts after a warm-up: B200's old 1745.0 is within 1.5 % of the new boost-validated 1770.9, so
# the ratios apply to them.
# - A100 SXM (400 W): a compute-dense cuBLAS GEMM on random data (8192^3, torch.randn inputs, as
#   mamf-finder and training use) runs at 257 TFLOP/s, power-limited: the same GEMM on zeros, which
#   flip no bits and stay under 400 W, runs at 295 (H. He, "Strangely, Matrix Multiplications on
#   GPUs Run Faster When Given 'Predictable' Data!", 2024). Against the 271.2 MAMF: 257 / 271.2.
# - MI300X "hits its 750 W cap within one BF16 kernel": its MAMF is already the sustained rate.
HOPPER_SUSTAINED = {"bf16": 708.5 / 841.9, "fp8": 1288.7 / 1491.9}
BLACKWELL_SUSTAINED = {"bf16": 1456.3 / 1770.9, "fp8": 2795.7 / 3435.2}
AMPERE_SUSTAINED = {"bf16": 257 / 271.2}

# A node's GPUs share one power and cooling budget, and no two dies are alike ("silicon lottery":
# each die's voltage-frequency-temperature curve differs; "5%+ MAMF spread between GPUs" of one
# 8-GPU node, Bekman, ML Engineering, compute/accelerator/README.md, "Not all accelerators are
# created equal"). mamf-finder's MSMF with all 8 GPUs of a node loaded at once, 8 GPUs x 5 rounds
# (same commit, benchmarks/README.md): H200 mean 698.6 against 702.9 for GPU0 alone (-0.6 %), range
# 4.5 %; B200 1426.4 against 1455.7 (-2.0 %), range 10.4 %. GPU0 alone over 5 rounds varies by 1.4 %
# (H200) and 1.1 % (B200): the run-to-run noise inside the range. :mod:`~.variability` turns the
# ranges into a spread of per-GPU rates and charges a synchronous job its slowest GPU.
HOPPER_NODE = NodeSpread(698.6 / 702.9, 0.045, 40, 0.014, 5)
BLACKWELL_NODE = NodeSpread(1426.4 / 1455.7, 0.104, 40, 0.011, 5)
# No such measurement for the others: the "5%+ spread on an 8-GPU node" as the range of 8 GPUs,
# with no shared-budget loss (ASSUMED).
GENERIC_NODE = NodeSpread(1.0, 0.05, 8)
FA3_H100 = (0.639, 0.551)
FA4_B200 = (round(0.639 * 0.826, 3), round(0.551 * 0.826, 3))

DEVICES: dict[str, Device] = {
    d.name: d for d in (
        # NVIDIA A100 Tensor Core GPU datasheet (2021): 312 TFLOPS BF16/FP16 dense, 156 TF32; 40 GB HBM2
        # at 1,555 GB/s (SXM4 40GB) or 80 GB HBM2e at 2,039 GB/s; 400 W (SXM). Ampere whitepaper: 108 SMs,
        # 40 MB L2, 1410 MHz boost. MAMF: 271.2 TFLOPS at 1024x10240x5120 (torch 2.6.0+cu126).
        Device("a100-sxm4-40gb", {"bf16": 312 * TERA, "fp16": 312 * TERA, "tf32": 156 * TERA},
               1555e9, 40 * GIB, 108, 40e6, 1410e6, 400,
               {"bf16": (271.2 * TERA, (1024, 10240, 5120))}, FA2_A100, "flash2", AMPERE_SUSTAINED,
               measured_on="a100-sxm4-80gb"),
        Device("a100-sxm4-80gb", {"bf16": 312 * TERA, "fp16": 312 * TERA, "tf32": 156 * TERA},
               2039e9, 80 * GIB, 108, 40e6, 1410e6, 400,
               {"bf16": (271.2 * TERA, (1024, 10240, 5120))}, FA2_A100, "flash2", AMPERE_SUSTAINED),
        # NVIDIA H100 datasheet: SXM5 989 TFLOPS BF16 dense, 1,979 FP8, 494 TF32; 80 GB HBM3 at
        # 3.35 TB/s; up to 700 W. Hopper whitepaper / tuning guide: 132 SMs (SXM5), 50 MB L2; clock
        # 1830 MHz reproduces the peak (Bekman's table). MAMF: BF16 794.5 at 2048x2048x13312
        # (torch 2.7.0+cu126); FP8 1402.6 at 1024x9216x14336.
        Device("h100-sxm", {"bf16": 989 * TERA, "fp16": 989 * TERA, "fp8": 1979 * TERA, "tf32": 494 * TERA},
               3.35e12, 80 * GIB, 132, 50e6, 1830e6, 700,
               {"bf16": (794.5 * TERA, (2048, 2048, 13312)), "fp8": (1402.6 * TERA, (1024, 9216, 14336))},
               FA3_H100, "flash3", HOPPER_SUSTAINED, HOPPER_NODE, True),
        # H100 PCIe datasheet: 756 TFLOPS BF16 dense, 1,513 FP8, 378 TF32; 80 GB HBM2e at 2.0 TB/s;
        # 350 W; 114 SMs, 50 MB L2, 1755 MHz boost. ASSUMED: no MAMF row, so the SXM part's fractions
        # of the peak (0.803 BF16, 0.709 FP8) at the SXM shapes.
        Device("h100-pcie", {"bf16": 756 * TERA, "fp16": 756 * TERA, "fp8": 1513 * TERA, "tf32": 378 * TERA},
               2.0e12, 80 * GIB, 114, 50e6, 1755e6, 350,
               {"bf16": (756 * 794.5 / 989 * TERA, (2048, 2048, 13312)),
                "fp8": (1513 * 1402.6 / 1979 * TERA, (1024, 9216, 14336))},
               FA3_H100, "flash3", HOPPER_SUSTAINED, epilogue_overlap=True,
               notes="GEMM and attention fractions assumed from H100 SXM"),
        # H200 datasheet: H100's compute (989 BF16, 1,979 FP8) with 141 GB HBM3e at 4.8 TB/s; up to
        # 700 W; 132 SMs, 50 MB L2. MAMF: BF16 "H200 is the same" as H100 SXM (794.5); FP8 1453.4 at
        # 1280x4096x12032 (torch 2.7.1+cu128).
        Device("h200-sxm", {"bf16": 989 * TERA, "fp16": 989 * TERA, "fp8": 1979 * TERA, "tf32": 494 * TERA},
               4.8e12, 141e9, 132, 50e6, 1830e6, 700,
               {"bf16": (794.5 * TERA, (2048, 2048, 13312)), "fp8": (1453.4 * TERA, (1280, 4096, 12032))},
               FA3_H100, "flash3", HOPPER_SUSTAINED, HOPPER_NODE, True, measured_on="h100-sxm"),
        # DGX B200 datasheet: 72 PFLOPS FP8 training for 8 GPUs: 4.5 PF FP8, 2.25 PF BF16 dense per GPU,
        # 1.125 PF TF32; 180 GB HBM3e at 8 TB/s per GPU; 1000 W maximum TGP (DGX B200 power capping
        # guide). 148 SMs and 1965 MHz are what the device reports (nvidia-smi, Bekman's clock
        # table); 126 MB L2 (Blackwell tuning guide). MAMF: BF16 1745.0 at 1792x16128x3072, FP8
        # 3432.5 at 15360x4096x3072 (torch 2.7.1+cu128).
        Device("b200", {"bf16": 2250 * TERA, "fp16": 2250 * TERA, "fp8": 4500 * TERA, "tf32": 1125 * TERA},
               8e12, 180e9, 148, 126e6, 1965e6, 1000,
               {"bf16": (1745.0 * TERA, (1792, 16128, 3072)), "fp8": (3432.5 * TERA, (15360, 4096, 3072))},
               FA4_B200, "flash4", BLACKWELL_SUSTAINED, BLACKWELL_NODE, True),
        # GB200 NVL72 specifications: 180 PF dense BF16 and 360 PF FP8 for 72 GPUs (2.5 / 5 PF each),
        # 186 GB HBM3e at 8 TB/s per GPU; 1200 W per GPU. 148 SMs and 2062 MHz as the device reports
        # (Bekman's clock table). MAMF: BF16 1822.0 at 4096x9728x2048, FP8 3615.6 at 19456x5120x1536.
        Device("gb200", {"bf16": 2500 * TERA, "fp16": 2500 * TERA, "fp8": 5000 * TERA, "tf32": 1250 * TERA},
               8e12, 186e9, 148, 126e6, 2062e6, 1200,
               {"bf16": (1822.0 * TERA, (4096, 9728, 2048)), "fp8": (3615.6 * TERA, (19456, 5120, 1536))},
               FA4_B200, "flash4", BLACKWELL_SUSTAINED, BLACKWELL_NODE, True),
        # AMD Instinct MI300X specifications: 1307.4 TFLOPS BF16 dense, 2614.9 FP8, 653.7 TF32; 192 GB
        # HBM3 at 5.3 TB/s; 750 W; 304 compute units at 2100 MHz peak engine clock; 256 MB Infinity
        # Cache. MAMF: BF16 668.4 at 10240x15360x8192 (ROCm 6.3, TunableOp on). ASSUMED: attention
        # at FlashAttention-2's A100 fractions, for want of a published MI300X attention sweep.
        Device("mi300x", {"bf16": 1307.4 * TERA, "fp16": 1307.4 * TERA, "fp8": 2614.9 * TERA, "tf32": 653.7 * TERA},
               5.3e12, 192e9, 304, 256e6, 2100e6, 750,
               {"bf16": (668.4 * TERA, (10240, 15360, 8192))}, FA2_A100, "flash2",
               notes="attention fractions assumed from FlashAttention-2 on A100"),
    )
}

#: The topology presets' GPUs (the ``device_flops`` they carry are these datasheet peaks).
PRESET_DEVICES = {"dgx-a100": "a100-sxm4-80gb", "dgx-h100": "h100-sxm", "aws-p5": "h100-sxm",
                  "dgx-h200": "h200-sxm", "dgx-b200": "b200", "gb200-nvl72": "gb200"}


def device(name: str) -> Device:
    """The device called *name* (a key of :data:`DEVICES` or a topology preset's name).

    Raises ConfigError naming the known devices.
    """
    key = PRESET_DEVICES.get(name, name)
    if key not in DEVICES:
        raise ConfigError(f"unknown device {name!r}; known: {', '.join(DEVICES)}", "device")
    return DEVICES[key]
