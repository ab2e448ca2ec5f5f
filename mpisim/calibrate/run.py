"""``mpisim calibrate`` as a library call: read the files, fit, return the result.

::

    from mpisim.calibrate.run import calibrate
    result, files = calibrate(["osu_latency.txt", "osu_bw.txt"], base="ib-hdr")
"""

from __future__ import annotations

from collections.abc import Sequence

from mpisim.calibrate import nccl, osu
from mpisim.calibrate.fit import FitResult, fit
from mpisim.calibrate.measurements import Series, read_text
from mpisim.errors import ConfigError
from mpisim.network.presets import load_preset, preset_stem


def read_series(path: str, ranks: int | None, placement: str = "out-of-place") -> Series:
    """Parse one benchmark file, telling OSU from nccl-tests output by its content."""
    text = read_text(path)
    if osu.looks_like(text):
        return osu.parse(text, path, ranks)
    if nccl.looks_like(text):
        return nccl.parse(text, path, placement)
    raise ConfigError("neither OSU output (a '# OSU MPI ... Test' title) nor nccl-tests output "
                      "(a '#  size  count  type ...' table)", "", path)


def parse_share(text: str) -> float:
    """``20%`` or ``0.2`` -> 0.2; a share of the points in [0, 0.9]."""
    raw = text.strip()
    try:
        share = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ConfigError(f"expected a share of the points such as 20%, got {text!r}", "--holdout") from None
    if not 0 <= share <= 0.9:
        raise ConfigError(f"must be between 0% and 90%, got {text!r}", "--holdout")
    return share


def calibrate(files: Sequence[str], base: str, *, nodes: int | None = None, ranks_per_node: int | None = None,
              holdout: float = 0.0, placement: str = "out-of-place") -> FitResult:
    """Fit preset *base* to the benchmark *files*. *nodes*, *ranks_per_node*: the run's shape for
    files that do not say (default: the base preset's)."""
    preset = load_preset(base)
    nodes = nodes if nodes is not None else int(preset.get("nodes", 2))
    ranks_per_node = ranks_per_node if ranks_per_node is not None else int(preset.get("ranks_per_node", 1))
    for value, flag in ((nodes, "--nodes"), (ranks_per_node, "--ranks-per-node")):
        if value < 1:
            raise ConfigError(f"must be at least 1, got {value}", flag)
    if nodes * ranks_per_node > nccl.MAX_RANKS:
        raise ConfigError(f"{nodes} x {ranks_per_node} ranks: calibrate simulates the benchmark on every rank of "
                          f"the run, at most {nccl.MAX_RANKS:,}", "--nodes")
    series = [read_series(path, nodes * ranks_per_node, placement) for path in files]
    return fit(series, preset, preset_stem(base), nodes=nodes, ranks_per_node=ranks_per_node, holdout=holdout)
