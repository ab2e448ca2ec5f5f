"""No two GPUs run a matmul at the same sustained rate, and a synchronous job waits for the slowest.

Under a training's continuous load every GPU sits at its power limit, and the clock it settles at
depends on its own die: each has its own voltage-frequency-temperature curve (the "silicon
lottery"), its own place in the node's airflow, and a share of the node's power budget. Measured
with all eight GPUs of a node loaded at once, the sustained matmul rate (mamf-finder's MSMF)
spans 4.5 % on an H200 node and 10.4 % on a B200 node (:data:`~.devices.HOPPER_NODE`,
:data:`~.devices.BLACKWELL_NODE`); across whole clusters of identical GPUs, compute-bound
kernels vary by 8 % on average (Sinha et al., "Not All GPUs Are Created Equal: Characterizing
Variability in Large-Scale, Accelerator-Rich Systems", SC 2022).

A data-, tensor- or pipeline-parallel step is synchronous: every collective waits for its last
rank, and the same die is the slowest one step after step, so the job computes at its slowest
GPU's rate. Taking the per-GPU rates as normally distributed (ASSUMED: the measurements give
ranges, not shapes), a measured range over n samples is about ``2 E[max of n]`` standard
deviations, and the slowest of N GPUs is ``E[max of N]`` standard deviations below the mean:

    sigma = sqrt((range / (2 E_n))^2 - (noise / (2 E_r))^2)   (the run-to-run noise taken out)
    slowest share = shared x (1 - sigma x E_N)

where ``shared`` is the loaded node's mean over one GPU measured alone. E[max of N standard
normals] is 0 for one, 1/sqrt(pi) for two, 1.42 for eight and grows like sqrt(2 ln N)::

    >>> round(expected_max(2), 4), round(expected_max(8), 4)
    (0.5642, 1.4236)
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

from mpisim.workloads.compute.devices import Device, NodeSpread

__all__ = ["expected_max", "rate_sigma", "slowest_device", "slowest_share"]

_STEPS = 4000  # trapezoid steps over [-9, 9]: E[max] to 1e-6 for N up to a million


@functools.lru_cache(maxsize=256)
def expected_max(n: int) -> float:
    """The expected largest of *n* independent standard normal samples (0 for n <= 1).

    ``E = integral of x n phi(x) Phi(x)^(n-1) dx``, by the trapezoid rule (deterministic).
    """
    if n <= 1:
        return 0.0
    lo, hi = -9.0, 9.0
    h = (hi - lo) / _STEPS
    total = 0.0
    for i in range(_STEPS + 1):
        x = lo + i * h
        density = math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        below = 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
        weight = 0.5 if i in (0, _STEPS) else 1.0
        total += weight * x * n * density * below ** (n - 1)
    return total * h


def rate_sigma(node: NodeSpread) -> float:
    """The standard deviation of the GPUs' sustained rates (a fraction of the mean), from a measured range."""
    spread = node.range / (2.0 * expected_max(node.samples))
    noise = node.noise_range / (2.0 * expected_max(node.noise_samples)) if node.noise_range else 0.0
    return math.sqrt(max(0.0, spread * spread - noise * noise))


def slowest_share(dev: Device, gpus: int) -> float:
    """The slowest of *gpus* loaded GPUs' sustained matmul rate, over one GPU's measured alone (1 for one GPU)."""
    if gpus <= 1:
        return 1.0
    return dev.node.shared * max(0.0, 1.0 - rate_sigma(dev.node) * expected_max(gpus))


def slowest_device(dev: Device, gpus: int) -> Device:
    """*dev* as the slowest of *gpus* GPUs runs: its sustained shares (GEMMs, attention) scaled by
    :func:`slowest_share`; bandwidths, SMs and the burst calibration unchanged."""
    share = slowest_share(dev, gpus)
    if share == 1.0:
        return dev
    sustained = {key: value * share for key, value in (dev.sustained or {"bf16": 1.0}).items()}
    # The burst calibration (achievable_rate) does not depend on the sustained shares: share its cache.
    return replace(dev, sustained=sustained, _cache=dev._cache)
