"""A training run in a planner's units: time to train, GPU-hours, energy and cost.

Given the tokens to train on (``tokens: 1T``), an iteration's throughput gives the run's length,
``time_to_train_s = tokens / tokens_per_s``, and ``gpu_hours = GPUs x time / 3600``; a scenario's
``price: {per_gpu_hour: 2.5}`` turns GPU-hours into a cost (:mod:`mpisim.scenario.run`). Without
one, a GPU with a published list price gets it as a default (:data:`LIST_PRICE_PER_GPU_HOUR`), and
the row says which price it used (``price_per_gpu_hour``), so clusters of different GPUs
compare at their own prices:

* A100 40 GB: AWS p4d.24xlarge (8 GPUs) on-demand, US East, 32.77 USD an hour: 4.10 per GPU-hour;
* A100 80 GB: AWS p4de.24xlarge, 40.97 USD an hour: 5.12 per GPU-hour;
* H100 SXM: AWS p5.48xlarge at its 2023 launch, 98.32 USD an hour: 12.29 per GPU-hour.

These are list prices of one cloud at one date (ASSUMED representative; reserved capacity and
other clouds cost less): a planner with a quote gives ``price:``, which always wins.

**Energy** is ``gpu_hours x (TDP + node share) x PUE``, an upper bound that holds the GPUs at their
rated power (large training runs sit close to it):

* TDP: the device's (:mod:`mpisim.workloads.compute.devices`);
* the node's other power (CPUs, memory, NICs, NVSwitches, fans) per GPU: the DGX system's maximum
  power over its 8 GPUs, less a GPU's TDP: DGX A100 6.5 kW (NVIDIA DGX A100 datasheet) gives
  412 W, DGX H100 / H200 10.2 kW (DGX H100 datasheet) 575 W, DGX B200 14.3 kW (DGX B200
  datasheet) 788 W; other devices take 0.82 x their TDP, the DGX H100's ratio;
* PUE (facility power over IT power) 1.2: ASSUMED for a modern liquid- or hot-aisle-cooled AI
  facility, between hyperscale fleets (Google 2023 environmental report: 1.10) and the
  industry average (Uptime Institute Global Data Center Survey 2023: 1.58).
"""

from __future__ import annotations

from typing import Any

from mpisim.workloads.compute import Device

__all__ = ["LIST_PRICE_PER_GPU_HOUR", "NODE_WATTS_PER_GPU", "PUE", "planner_units"]

#: Node power per GPU beyond the GPU itself (W), from DGX system maxima (see the module docstring).
NODE_WATTS_PER_GPU = {"a100-sxm4-40gb": 6500 / 8 - 400, "a100-sxm4-80gb": 6500 / 8 - 400,
                      "h100-sxm": 10200 / 8 - 700, "h200-sxm": 10200 / 8 - 700, "b200": 14300 / 8 - 1000}
NODE_SHARE_OF_TDP = (10200 / 8 - 700) / 700  # other devices: the DGX H100's ratio
PUE = 1.2
#: Default price of one GPU-hour (USD) where a cloud lists one (see the module docstring).
LIST_PRICE_PER_GPU_HOUR = {"a100-sxm4-40gb": 32.77 / 8, "a100-sxm4-80gb": 40.97 / 8, "h100-sxm": 98.32 / 8}


def planner_units(tokens: float | None, tokens_per_s: float | None, gpus: int, dev: Device | None) -> dict[str, Any]:
    """``time_to_train_s``, ``gpu_hours``, ``energy_kwh`` and, at the device's list price, ``price_per_gpu_hour``
    and ``cost`` for *tokens* at *tokens_per_s* (empty without tokens; a scenario's ``price:`` replaces the cost)."""
    if tokens is None or not tokens_per_s:
        return {}
    seconds = tokens / tokens_per_s
    hours = gpus * seconds / 3600
    out: dict[str, Any] = {"time_to_train_s": seconds, "gpu_hours": hours}
    if dev is not None:
        node = NODE_WATTS_PER_GPU.get(dev.name, NODE_SHARE_OF_TDP * dev.tdp_w)
        out["energy_kwh"] = hours * (dev.tdp_w + node) * PUE / 1000
        if dev.name in LIST_PRICE_PER_GPU_HOUR:
            out["price_per_gpu_hour"] = LIST_PRICE_PER_GPU_HOUR[dev.name]
            out["cost"] = hours * out["price_per_gpu_hour"]
    return out
