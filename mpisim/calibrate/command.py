"""``mpisim calibrate FILE ... --base PRESET``: fit, print the summary, write the preset and the report.

The command line only parses the arguments; this is what it then does, in one place, so that the
package's heavy imports (scipy for the fit, matplotlib for the residual figure) happen only when a
calibration runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from mpisim.calibrate.output import preset_text, summary, write_report
from mpisim.calibrate.run import calibrate, parse_share
from mpisim.errors import ConfigError
from mpisim.scenario.files import write_atomic

__all__ = ["calibrate_files"]


def calibrate_files(files: Sequence[str], base: str, out: TextIO, *, nodes: int | None = None,
                    ranks_per_node: int | None = None, holdout: str = "0%", in_place: bool = False,
                    output: str | None = None, report: str | None = None) -> None:
    """Fit preset *base* to the measurement *files*, print the summary, write *output* and *report*.

    *holdout* is a share of the points (``"20%"``) left out of the fit and reported; *output* a
    preset file name ending in ``.yaml``; *report* a directory for report.md and residuals.png.
    Raises ConfigError (exit 2) for bad input or a file that cannot be written.
    """
    if output and not output.endswith((".yaml", ".yml")):
        raise ConfigError(f"a preset file name ends in .yaml, got {output!r}", "-o")
    result = calibrate(files, base, nodes=nodes, ranks_per_node=ranks_per_node, holdout=parse_share(holdout),
                       placement="in-place" if in_place else "out-of-place")
    out.write(summary(result))
    try:
        if output:
            write_atomic(output, preset_text(result, files, output))
            out.write(f"preset written to {output}\n")
        if report:
            out.write(f"report written to {write_report(result, files, Path(report))}\n")
    except OSError as exc:
        raise ConfigError(f"cannot write it: {exc.strerror or exc}", "", output or report) from None
