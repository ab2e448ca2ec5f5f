"""Regenerate the example reports in ``reports/``: ``python -m mpisim.teaching.examples [DIR]``.

Run it from the repository root whenever the output of mpisim changes (new figures, new
findings, new numbers); it rewrites, in DIR (default ``reports``):

* ``capacity-plan-300m/`` -- a capacity plan: a 300M-parameter model trained data-parallel on 1
  to 64 nodes over three interconnects (``scenarios/capacity-plan-300m.yaml``);
* ``capacity-plan-7b-h100/`` -- a 2026 capacity plan: a 7B-parameter bf16 model data-parallel on
  32 to 512 H100s with 200 or 400 Gb/s rails (``scenarios/capacity-plan-7b-h100.yaml``);
* ``training-7b-h100-layouts/`` -- which layout for a 7B model on 64 H100s: tensor x pipeline
  x data parallelism, where each layout's iteration goes, and the pipeline's schedule
  (``scenarios/training-7b-h100-layouts.yaml``);
* ``nccl-allreduce-dgx-a100/`` -- an algorithm comparison: ring against double binary tree
  allreduce on one DGX A100, nccl-tests style (``scenarios/nccl-allreduce-dgx-a100.yaml``);
* ``teaching/`` -- a walk-through: ``mpisim explain`` of ring and recursive-doubling allreduce
  on 4 ranks, with their diagrams;
* ``calibration-cloud-tcp/`` -- a preset fitted by ``mpisim calibrate`` to the published cloud
  TCP measurements kept in its ``measurements/`` folder (run as a command: calibration sits
  beside this layer, not below it);
* ``README.md`` -- the index of the above.

Each scenario report is exactly what ``mpisim run FILE -o DIR`` writes, except that, to keep
the repository small, the worlds that no figure draws keep their totals but not their
individual message and span records (:func:`mpisim.report.render.slim`); ``mpisim report
DIR`` renders the same report again from the slim results.json. The capacity plan scenario
records neither messages nor spans (21 worlds of up to 64 ranks would hold millions of them);
its example turns spans on (``--set trace.spans=true``) so that it has timelines, of which the
slim result keeps only those drawn. The 7B capacity plan draws only totals and link counters,
so its example keeps no world's records (its 512-GPU worlds hold 14 336 collective calls each). The training layouts example turns spans on too, for its
pipeline timeline, and keeps the records of that one world only (six worlds of 64 GPUs with
every pass and collective would be a hundred megabytes).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mpisim.report.records import RunResult
from mpisim.report.render import pipeline_worlds, slim, write_outputs
from mpisim.scenario.load import load_file
from mpisim.scenario.observe import wants_link_records
from mpisim.scenario.run import run_scenario
from mpisim.teaching import explain, format_explanation, write_diagram

__all__ = ["EXAMPLES", "TEACHING", "main"]


@dataclass(frozen=True)
class Example:
    """One example report: which scenario, with which overrides, and what it shows."""

    name: str
    scenario: str
    overrides: tuple[tuple[str, object], ...]
    about: str
    #: The worlds whose records the slim result keeps (None: those drawn, as :func:`slim` picks).
    keep: Callable[[RunResult], list[int]] | None = None

    @property
    def command(self) -> str:
        """The equivalent ``mpisim run`` command line."""
        sets = " ".join(f"--set {key}={str(value).lower()}" for key, value in self.overrides)
        return f"mpisim run {self.scenario} -o reports/{self.name}" + (f" {sets}" if sets else "")


def no_records(result: RunResult) -> list[int]:
    """Keep no world's records: every figure of the report is drawn from totals and link counters."""
    return []


def first_pipeline(result: RunResult) -> list[int]:
    """Keep the records of the first world drawn as a pipeline timeline only."""
    return pipeline_worlds(result)[:1]


EXAMPLES = (
    Example("capacity-plan-300m", "scenarios/capacity-plan-300m.yaml",
            (("trace.spans", True),),
            "Capacity plan: iteration time, scaling efficiency and exposed communication of a 300M-parameter "
            "model on 1 to 64 nodes, over 25 GbE TCP, RoCE 100G and InfiniBand HDR."),
    Example("capacity-plan-7b-h100", "scenarios/capacity-plan-7b-h100.yaml", (),
            "Capacity plan, 2026: a 7B-parameter bf16 model data-parallel on 32 to 512 H100s (dgx-h100 nodes), "
            "200 vs 400 Gb/s rails: communication per iteration, exposed time and scaling efficiency.", keep=no_records),
    Example("training-7b-h100-layouts", "scenarios/training-7b-h100-layouts.yaml", (("trace.spans", True),),
            "Which layout: Llama-2-7B on 64 H100s over tensor x pipeline x data parallelism; where each layout's "
            "iteration goes (compute, bubble, tp/pp/dp communication), TFLOP/s, MFU, memory per GPU, and the "
            "1F1B pipeline's passes stage by stage.", keep=first_pipeline),
    Example("nccl-allreduce-dgx-a100", "scenarios/nccl-allreduce-dgx-a100.yaml", (),
            "Algorithm comparison: ring vs double binary tree allreduce on one DGX A100, from 8 B to 1 GiB "
            "(the nccl-tests view), with timelines and NVSwitch link use."),
)

#: (collective, algorithm, ranks) walked through in reports/teaching/.
TEACHING = (("allreduce", "ring", 4), ("allreduce", "recursive_doubling", 4))


def write_example(example: Example, out: Path) -> Path:
    """Run one example scenario and write its slim report into ``out/<name>``."""
    scenario = load_file(example.scenario, list(example.overrides))
    if wants_link_records(scenario):  # as 'mpisim run -o' does
        scenario = load_file(example.scenario, [*example.overrides, ("trace.links", True)])
    result = run_scenario(scenario, jobs=None)
    target = out / example.name
    write_outputs(slim(result, None if example.keep is None else example.keep(result)), target)
    return target


def write_teaching(out: Path) -> Path:
    """Write the explain walk-throughs (text and diagrams) into ``out/teaching``."""
    target = out / "teaching"
    target.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Teaching walk-through: allreduce, step by step",
        "",
        "Produced by `mpisim explain` on the default teaching network (analytic model, every pair of ranks "
        "on its own 1 GB/s link with 1 us latency). Rank r starts with `x_r[i] = r*10 + i`. Each step lists "
        "its messages (`(x0+x3)[3]` is element 3 of rank 0's input plus element 3 of rank 3's) and then "
        "which elements of every input each rank has, alone or summed in.",
        "",
        "Ring allreduce sends small blocks in 2(p-1) steps, so every link carries only 2(p-1)/p of the "
        "vector; recursive doubling finishes in lg p steps but sends the whole vector each time. Compare the "
        "step counts and the cost formulas below.",
        "",
    ]
    for collective, algorithm, ranks in TEACHING:
        ex = explain(collective, algorithm, ranks)
        diagram = write_diagram(ex, target)
        lines += [
            f"## {collective} / {algorithm} on {ranks} ranks",
            "",
            f"`mpisim explain {collective} {algorithm} --ranks {ranks} -o reports/teaching`",
            "",
            f"![{collective} {algorithm} diagram]({diagram.name})",
            "",
            "```text",
            format_explanation(ex).rstrip(),
            "```",
            "",
        ]
    (target / "README.md").write_text("\n".join(lines), encoding="utf-8")
    return target


CALIBRATION = "calibration-cloud-tcp"


def calibration_command(out: Path) -> list[str]:
    """``python -m mpisim calibrate ...`` for the calibration example, writing into *out*."""
    inputs = Path("reports") / CALIBRATION / "measurements"
    target = out / CALIBRATION
    return [sys.executable, "-m", "mpisim", "calibrate",
            *(str(inputs / f"{name}.txt") for name in ("osu_bibw", "osu_bw", "osu_latency")),  # as the shell lists *.txt
            "--base", "cloud-100g-tcp", "-o", str(target / "cloud-tcp.yaml"), "--report", str(target)]


def write_calibration(out: Path) -> Path:
    """Run the calibration example's command (a subprocess: calibrate sits beside this layer)."""
    (out / CALIBRATION).mkdir(parents=True, exist_ok=True)
    subprocess.run(calibration_command(out), check=True, stdout=subprocess.DEVNULL)
    return out / CALIBRATION


def write_index(out: Path) -> None:
    """Write ``out/README.md``: what each example shows and the command that regenerates them all."""
    lines = [
        "# Example reports",
        "",
        "Generated by mpisim, not by hand. Regenerate all of them, from the repository root, whenever the "
        "output of mpisim changes:",
        "",
        "```sh",
        "python -m mpisim.teaching.examples",
        "```",
        "",
        "| report | what it shows | equivalent command |",
        "| :--- | :--- | :--- |",
    ]
    for example in EXAMPLES:
        lines.append(f"| [{example.name}]({example.name}/report.md) | {example.about} | `{example.command}` |")
    walk = " ".join(f"`mpisim explain {c} {a} --ranks {p} -o reports/teaching`;" for c, a, p in TEACHING).rstrip(";")
    lines.append(f"| [teaching](teaching/README.md) | Teaching walk-through: ring and recursive-doubling allreduce "
                 f"on 4 ranks, step by step, with diagrams. | {walk} |")
    lines.append(f"| [{CALIBRATION}]({CALIBRATION}/report.md) | Calibration: the published cloud TCP measurements (C4, "
                 "C4b) fitted from `cloud-100g-tcp`; every point against both presets, residuals, the fitted preset. | "
                 f"`{' '.join(calibration_command(Path('reports'))[2:])}` |")
    lines += [
        "",
        "Each scenario report directory holds `report.md` (start there), `figures/`, `results.json` (from which "
        "`mpisim report DIR` renders the report again), CSV tables and `trace.json` (open it in Perfetto, "
        "ui.perfetto.dev). To keep the repository small, worlds that no figure draws keep their totals but not "
        "their individual message and span records; "
        "`mpisim run` without these reductions gives the same report with complete records.",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate every example report into the directory given (default ``reports``)."""
    parser = argparse.ArgumentParser(prog="python -m mpisim.teaching.examples",
                                     description="Regenerate every example report (the committed reports/).")
    parser.add_argument("out", nargs="?", default="reports", help="directory to write into (default: reports)")
    out = Path(parser.parse_args(argv).out)
    out.mkdir(parents=True, exist_ok=True)
    for example in EXAMPLES:
        print(f"{example.name}: {write_example(example, out)}", flush=True)
    print(f"teaching: {write_teaching(out)}", flush=True)
    print(f"{CALIBRATION}: {write_calibration(out)}", flush=True)
    write_index(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
