"""The text ``mpisim explain`` prints and its message diagram."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from mpisim.errors import ConfigError
from mpisim.report.tables import fmt_time
from mpisim.scenario.load import read_yaml
from mpisim.teaching.decoding import describe_pieces, indices_text
from mpisim.teaching.differences import GENERIC_CAVEAT, differences
from mpisim.teaching.explain import ROOTED, Explanation, explain
from mpisim.teaching.formulas import FormulaError, cost_paragraph, definitions, evaluate, formulas, substitute
from mpisim.teaching.roundview import format_rounds
from mpisim.teaching.spacetime import write_frames
from mpisim.workloads.collective import REDUCING


def _array(values: np.ndarray | None, limit: int = 16) -> str:
    if values is None:
        return "None"
    shown = ", ".join(str(int(v)) for v in values.ravel()[:limit])
    return f"[{shown}{', ...' if values.size > limit else ''}]"


def _holdings_table(ex: Explanation, step: int) -> list[str]:
    held = ex.holdings(step)
    origins = [ex.root] if ex.collective in ("bcast", "scatter") else list(range(ex.p))
    if ex.p > 12:
        total = len(origins) * ex.count
        return [f"    rank {r:>2}: {sum(len(held[r].get(o, ())) for o in origins)} of {total} elements"
                for r in range(ex.p)]
    cells = [[indices_text(sorted(held[r].get(o, ())), ex.count) or "·" for o in origins] for r in range(ex.p)]
    width = max(4, *(len(c) for row in cells for c in row))
    lines = ["    " + " " * 8 + "".join(f"{'x' + str(o):>{width + 2}}" for o in origins)]
    lines += [f"    rank {r:>2} " + "".join(f"{c:>{width + 2}}" for c in row) for r, row in enumerate(cells)]
    return lines


def _cost_lines(ex: Explanation) -> list[str]:
    """The Cost block: the formula that applies at this p, substituted, next to the simulated time.

    The docstring's headline formula is often written for p a power of two; at another p the
    cost function evaluates another one (the non-power-of-two fold of rabenseifner), or a
    bound. The formula printed is the one whose value is the one shown; when no docstring
    formula gives it, that is said instead of printing a formula that evaluates to another
    number.
    """
    doc = ex.algorithm.description or ""
    paragraph = cost_paragraph(doc)
    lines = ["Cost"]
    if paragraph:
        lines += textwrap.wrap("the algorithm's cost: " + re.sub(r"^Cost:\s*", "", paragraph), 96, initial_indent="  ", subsequent_indent="    ")
    q = int(ex.values.get("p'", 1))
    values = {"p": str(ex.p), "n": f"{ex.nbytes}B", "α": fmt_time(ex.alpha).replace(" ", ""),
              "β": f"{ex.beta * 1e9:.4g}ns/B", "γ": f"{ex.gamma * 1e9:.4g}ns/B", "p'": str(q)}
    bandwidth = f" ({1 / ex.beta / 1e9:.4g} GB/s)" if ex.beta > 0 else ""
    lines.append(f"  with p = {ex.p}, n = {ex.nbytes} B, α = {fmt_time(ex.alpha)}, β = {ex.beta * 1e9:.4g} ns/B{bandwidth}, "
                 f"γ = {ex.gamma * 1e9:.4g} ns/B:")
    if ex.segment is not None and "k" in ex.values:
        k, s = int(ex.values["k"]), ex.values["s"]
        values.update({"k": str(k), "s": f"{s:g}B"})
        lines += textwrap.wrap(f"segments: k = {k} of s = {s:g} B (explain cut the {ex.nbytes} B buffer into "
                               f"{ex.segment} B segments so the pipeline shows; the library's segments are much "
                               "larger)", 96, initial_indent="  ", subsequent_indent="    ")
        defined = {name: text for name, text in definitions(ex.algorithm).items() if name in ex.formula_text}
        for name, text in defined.items():
            lines.append(f"    {name} = {text} = {fmt_time(ex.values_with_definitions[name])}")
    if ex.model_s is not None:
        formula = ex.formula
        if formula is not None:
            if formula.scope == "p not a power of two":
                lines += textwrap.wrap(f"p = {ex.p} is not a power of two: p' = {q} ranks run the power-of-two "
                                   "algorithm and the others fold in first, so the formula for that case applies:",
                                   96, initial_indent="  ", subsequent_indent="  ")
            elif formula.scope == "p = 2":
                lines += textwrap.wrap("p = 2 is a case of its own (see the algorithm's cost), so the "
                                       "formula for it applies:", 96, initial_indent="  ", subsequent_indent="  ")
            lines.append(f"    {formula.text}")
            lines.append(f"  = {substitute(formula.text, values)}")
            lines.append(f"  = {fmt_time(ex.model_s)}   closed form" + (f"  ({formula.note})" if formula.note else ""))
        else:
            head = formulas(ex.algorithm)
            other = None
            if head:
                try:
                    other = evaluate(head[0].text, ex.values_with_definitions)
                except (FormulaError, ValueError, ZeroDivisionError):
                    lines.append(f"    {head[0].text}")
            if other is None:
                lines.append(f"  = {fmt_time(ex.model_s)}   closed form (the cost function's value; explain cannot")
                lines.append("    substitute every symbol of this formula)")
            else:
                written = f" (written for {head[0].scope})" if head[0].scope else ""
                lines += textwrap.wrap(f"{head[0].text}{written} gives {fmt_time(other)} here and does not apply at "
                                       f"p = {ex.p}, so no formula is printed for it:", 96,
                                       initial_indent="    ", subsequent_indent="    ")
                lines.append(f"  = {fmt_time(ex.model_s)}   closed form: the cost function's estimate for this p, a bound")
    else:
        lines.append("  (no closed-form cost function is registered for this algorithm)")
    lines.append(f"    {fmt_time(ex.simulated_s)}   simulated (last rank's exit - first rank's entry)"
                 + (f", {ex.simulated_s / ex.model_s:.3f}x the closed form" if ex.model_s else ""))
    if ex.model_s is not None and not ex.matches:
        reasons = differences(ex)
        if reasons:
            lines.append("  Why they differ:")
            for reason in reasons:
                lines += textwrap.wrap(reason, 96, initial_indent="  - ", subsequent_indent="    ")
        else:
            lines += textwrap.wrap(GENERIC_CAVEAT, 96, initial_indent="  ", subsequent_indent="  ")
    return lines


def format_explanation(ex: Explanation) -> str:
    """Return the step-by-step text that ``mpisim explain`` prints."""
    algo = ex.algorithm
    out = [f"{ex.collective} / {algo.name} on {ex.p} ranks" + (f", root {ex.root}" if ex.collective in ROOTED else ""),
           ""]
    doc_paras = re.split(r"\n\s*\n", algo.description or algo.summary)
    for para in doc_paras:
        text = " ".join(line.strip() for line in para.splitlines())
        if text.startswith(("Cost", "Raises")):
            continue
        out += [*textwrap.wrap(text, 96, initial_indent="  ", subsequent_indent="  "), ""]
    if algo.reference:
        out += [f"  Reference: {algo.reference}", ""]
    out.append(f"Network: {ex.network}, on a {ex.topology}; α = {fmt_time(ex.alpha)} per message, "
               f"β = {ex.beta * 1e9:.4g} ns per byte, γ = {ex.gamma * 1e9:.4g} ns per byte reduced.")
    if ex.collective != "barrier":
        out.append(f"Inputs: {ex.count} int64 elements per rank; rank r holds x_r[i] = r*{ex.base} + i.")
        shown = range(ex.p) if ex.collective not in ("bcast", "scatter") else [ex.root]
        for r in shown:
            out.append(f"  x{r} = {_array(ex.inputs[r])}")
        if ex.collective in ("bcast", "scatter"):
            out.append("  (only the root's buffer matters; the others are overwritten)")
    out.append("")
    # Rounds lead: on the single-port network they are what the closed form counts; the causal
    # steps after them show how each message depends on the one before.
    out += format_rounds(ex)
    reducing = ex.collective in REDUCING
    for step in range(1, ex.steps + 1):
        msgs = [m for m in ex.messages if m.step == step]
        t0, t1 = min(m.t_post for m in msgs), max(m.t_done for m in msgs)
        out.append(f"Step {step}  ({fmt_time(t0)} -> {fmt_time(t1)}, {len(msgs)} message{'s' if len(msgs) != 1 else ''})")
        for m in msgs:
            carries = describe_pieces(m.pieces) if m.pieces is not None else (
                "a token (no data)" if m.nbytes == 0 else f"{m.nbytes} B")
            values = f" = {_array(m.values, 8)}" if m.values is not None and m.values.size and m.pieces else ""
            out.append(f"  rank {m.src:>2} -> rank {m.dst:>2}  {m.nbytes:>6} B {m.protocol:<10} {carries}{values}")
        if ex.decoded and ex.collective != "barrier":
            out.append(f"  after step {step}, each rank has these elements of each input"
                       + (" (alone or summed in):" if reducing else ":"))
            out += _holdings_table(ex, step)
        out.append("")
    if not ex.messages:
        out += ["No messages: nothing to communicate.", ""]
    out.append("Result (what each rank's call returned, and numpy's answer):")
    for r, (got, want) in enumerate(zip(ex.outputs, ex.expected, strict=True)):
        ok = (got is None and want is None) or (got is not None and want is not None and np.array_equal(got, want))
        out.append(f"  rank {r:>2}: {_array(got, 32)}   numpy: {_array(want, 32)}   {'ok' if ok else 'DIFFERENT'}")
    out.append("")
    out += _cost_lines(ex)
    for note in ex.notes:
        out.append(f"Note: {note}")
    return "\n".join(out) + "\n"


def write_diagram(ex: Explanation, out_dir: str | Path) -> Path:
    """Write ``<collective>-<algorithm>-p<P>.png`` into *out_dir*: ranks x steps, one arrow per message."""
    # Lazy: matplotlib costs about a second to import, and the text explanation never needs it.
    from mpisim.report.plots import diagram, style

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    messages = []
    for m in ex.messages:
        label = describe_pieces(m.pieces) if m.pieces else ("token" if m.nbytes == 0 else f"{m.nbytes} B")
        messages.append({"src": m.src, "dst": m.dst, "step": m.step, "label": label})
    steps = []
    for step in range(1, ex.steps + 1):
        mine = [m for m in ex.messages if m.step == step]
        steps.append(f"{fmt_time(min(m.t_post for m in mine))}\n-> {fmt_time(max(m.t_done for m in mine))}")
    title = f"{ex.collective} / {ex.algorithm.name} on {ex.p} ranks: {ex.steps} steps, simulated {fmt_time(ex.simulated_s)}"
    fig = diagram.plot_message_diagram(ex.p, messages, title=title, step_labels=steps)
    path = out / f"{ex.collective}-{ex.algorithm.name}-p{ex.p}.png"
    style.save_png(fig, path)
    return path


def explain_to(out: TextIO, collective: str, algorithm: str, ranks: int, *, count: int | None = None,
               topology: str | None = None, network: str | None = None, root: int = 0, ports: int | None = None,
               output: str | None = None) -> bool:
    """``mpisim explain``: print the explanation of *algorithm* on *ranks* ranks; return whether it matched numpy.

    *topology* is a preset name or an inline YAML mapping (``"{preset: ib-hdr, ...}"``); with
    *output* the diagram is written there too. Raises ConfigError (exit 2) for bad input or a
    diagram that cannot be written.
    """
    chosen: Any = topology
    if topology is not None and any(ch in topology for ch in "{:"):
        chosen = read_yaml(topology, "--topology")
    ex = explain(collective, algorithm, ranks, count=count, topology=chosen, network=network, root=root, ports=ports)
    out.write(format_explanation(ex))
    if output:
        try:
            path = write_diagram(ex, output)
            frames = write_frames(ex, ex.rounds, output)
        except OSError as exc:
            raise ConfigError(f"cannot write the diagram: {exc.strerror or exc}", "-o", output) from None
        out.write(f"\ndiagram written to {path}\n")
        if frames:
            out.write(f"space-time diagram, one frame per round: {len(frames)} files in {frames[0].parent} "
                      f"({frames[-1].name} animates them)\n")
    return ex.correct
