"""The element types a buffer may hold: numpy's, plus bfloat16 and the two fp8 formats.

numpy has no bfloat16 or 8-bit floats; ``ml_dtypes`` (the extension dtypes JAX and
TensorFlow use) adds them as real numpy dtypes, so real-data runs carry them like any other
array and size-only runs get their sizes. Importing this module registers them with numpy,
after which ``np.dtype("bfloat16")`` works.

**How reductions round.** A sum of bfloat16 or fp8 arrays is computed per element in a wider
type and rounded back to the narrow one after every pairwise operation, which is what NCCL's
reduction kernels do for ``ncclBfloat16`` (add in float, round to bf16 at each step) and
``ncclFloat8e4m3``/``ncclFloat8e5m2`` (NCCL 2.24+: widen to half, add, round to fp8). The sum
therefore depends on the algorithm's order, step by step, exactly as on the GPU; nothing is
accumulated in fp32 across steps.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

#: Name in a scenario (several spellings) -> numpy dtype.
DTYPES: dict[str, np.dtype] = {
    **{name: np.dtype(np.float16) for name in ("float16", "fp16", "half")},
    **{name: np.dtype(np.float32) for name in ("float32", "fp32", "float")},
    **{name: np.dtype(np.float64) for name in ("float64", "fp64", "double")},
    **{name: np.dtype(ml_dtypes.bfloat16) for name in ("bfloat16", "bf16")},
    **{name: np.dtype(ml_dtypes.float8_e4m3fn) for name in ("float8_e4m3", "fp8_e4m3", "float8_e4m3fn", "e4m3")},
    **{name: np.dtype(ml_dtypes.float8_e5m2) for name in ("float8_e5m2", "fp8_e5m2", "e5m2")},
    **{name: np.dtype(name) for name in ("int8", "uint8", "int32", "int64")},
}


def is_floating(dtype: np.dtype) -> bool:
    """True for floating-point element types: numpy's (kind ``f``) and ml_dtypes' bfloat16 and fp8."""
    return dtype.kind == "f" or dtype in (DTYPES["bfloat16"], DTYPES["float8_e4m3"], DTYPES["float8_e5m2"])


def exact_integer_limit(dtype: np.dtype) -> int:
    """The largest N such that every integer in [-N, N] is exact in *dtype* (``2^(mantissa bits + 1)``)."""
    if dtype.kind in "iu":
        return int(np.iinfo(dtype).max)
    return 2 ** (int(ml_dtypes.finfo(dtype).nmant) + 1)
