"""Fitting a preset to measurements: least squares on relative error, from a base preset.

The fit, step by step:

1. **Predict** every measured point on the base preset (:mod:`~mpisim.calibrate.model`: each
   file becomes the mpisim workload that measures the same thing).
2. **Identify.** Move each candidate parameter by 5 % and see which predictions move: the
   column of relative changes is the parameter's *sensitivity*. A parameter no point is
   sensitive to (an NVLink protocol in a file of InfiniBand ping-pongs) cannot be fitted; nor
   can one whose column is (nearly) a combination of the columns of parameters already taken
   (the wire latency and the per-message overheads when every point is an eager ping-pong: the
   data sees only their sum). Both kinds stay at the base's value and are reported as such.
3. **Fit** the identifiable parameters: minimise the sum of squared relative errors
   ``(predicted - measured) / measured`` with scipy's trust-region least squares, in log space
   with bounds (efficiencies at most 1). Relative error treats a 1.6 us latency and a 23 GB/s
   bandwidth alike; absolute error would ignore every small-message point.
4. **Find the eager limit from the knee** of the latency curve: the eager limit is a threshold,
   not a smooth parameter, so each measured size is tried as the largest eager message, the
   best is kept, and the smooth parameters are fitted again.
5. **Hold out** (``--holdout 20%``): a fixed, seeded share of the points is left out of steps
   2-4 and only predicted, so the error on them says how far predictions can be trusted.

Why scipy: the problem is small (a few parameters, tens of points) but every residual is a
simulation, bounded parameters are the rule (an efficiency cannot exceed 1) and the
parameters' scales differ by twelve orders of magnitude; ``least_squares`` (trust-region
reflective) handles bounds and scaling properly, reports its own convergence, and is the
well-tested tool for exactly this. A hand-written Gauss-Newton would re-implement it badly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from mpisim.calibrate.measurements import Point, Series
from mpisim.calibrate.model import (
    CPU_PARAMS, EAGER_KEYS, GPU_PARAMS, NOT_MODELLED, Param, Shape, get, path_kind, predict, present, put,
    shape_of, si_value, unit_text, with_values,
)

#: Relative step of the sensitivity check (5 %).
PROBE = math.log(1.05)
#: A parameter whose largest relative effect on any point, per unit of log change, is below this
#: is one no point depends on (doubling it would move no prediction by 0.1 %).
INSENSITIVE = 1.5e-3
#: A sensitivity column that keeps less than this share of its length once the columns of the
#: parameters already taken are projected out cannot be told apart from them.
COLLINEAR = 0.05
#: A fitted point further off than this gets a warning: the model cannot follow the data there.
WARN_ERROR = 0.05
#: bibw below this multiple of bw at the same size means the host caps both directions together.
DUPLEX = 1.5


@dataclass
class FittedParam:
    """One parameter's outcome: fitted (with the points that determine it) or kept, and why."""

    param: Param
    base: float | None  # None: the base has no such cap
    value: float
    fitted: bool
    reason: str = ""
    determined_by: list[str] = field(default_factory=list)


@dataclass
class EagerFit:
    """The eager limit of one path kind, found from the knee (or kept)."""

    key: str
    base: int
    value: int
    fitted: bool
    reason: str


@dataclass
class PointFit:
    """One measured point with the base's and the fitted preset's predictions."""

    series: Series
    point: Point
    base: float
    fitted: float
    held_out: bool

    @property
    def error(self) -> float:
        return self.fitted / self.point.value - 1

    @property
    def base_error(self) -> float:
        return self.base / self.point.value - 1


@dataclass
class FitResult:
    """Everything the report and the written preset need."""

    base_name: str
    preset: dict[str, Any]
    params: list[FittedParam]
    eager: list[EagerFit]
    points: list[PointFit]
    warnings: list[str]
    notes: list[str]
    holdout: float
    cost_evaluations: int

    def errors(self, held_out: bool) -> list[float]:
        return [abs(p.error) for p in self.points if p.held_out == held_out]


def point_name(series: Series, point: Point) -> str:
    from mpisim.engine.units import format_size

    return f"{series.file}:{point.line} ({series.test} {format_size(point.nbytes)})"


class Problem:
    """The measured series and the base preset; predicts every point for a candidate preset."""

    def __init__(self, series: Sequence[Series], base: Mapping[str, Any], nodes: int, ranks_per_node: int) -> None:
        self.notes: list[str] = []
        kept = []
        for s in series:
            if s.test in NOT_MODELLED:
                self.notes.append(f"{s.label}: read but left out of the fit ({NOT_MODELLED[s.test]})")
            else:
                kept.append(s)
            self.notes.extend(f"{s.file}: {note}" for note in s.notes)
        self.series = kept
        self.shapes: list[Shape] = [shape_of(s, nodes, ranks_per_node) for s in kept]
        self.base = dict(base)
        self.evaluations = 0

    def predict(self, preset: Mapping[str, Any]) -> list[list[float]]:
        self.evaluations += 1
        return [predict(s, preset, shape) for s, shape in zip(self.series, self.shapes, strict=True)]


def _flat(values: list[list[float]], mask: Sequence[Sequence[bool]]) -> np.ndarray:
    return np.array([v for vs, ms in zip(values, mask, strict=True) for v, m in zip(vs, ms, strict=True) if m])


def holdout_mask(problem: Problem, share: float, seed: int = 0) -> list[list[bool]]:
    """True for the points the fit uses; a seeded random *share* of them is held out."""
    flat = [(i, j) for i, s in enumerate(problem.series) for j in range(len(s.points))]
    held = set()
    if share > 0:
        count = min(len(flat) - 1, max(1, round(share * len(flat))))
        order = np.random.default_rng(seed).permutation(len(flat))
        held = {flat[k] for k in order[:count]}
    return [[(i, j) not in held for j in range(len(s.points))] for i, s in enumerate(problem.series)]


def _candidates(problem: Problem, base: Mapping[str, Any]) -> list[Param]:
    tools = {s.tool for s in problem.series}
    pool = (CPU_PARAMS if "osu" in tools else ()) + (GPU_PARAMS if "nccl-tests" in tools else ())
    # A fabric no series crosses has nothing to say about its parameters: skip the probes.
    unused = set()
    if all(shape.ranks_per_node == 1 for shape in problem.shapes):
        unused.add("intra")
    if all(shape.nodes == 1 for shape in problem.shapes):
        unused.add("inter")
    seen: list[Param] = []
    for param in pool:
        if param.keys[0].split(".")[0] in unused:
            continue
        if param not in seen and present(base, param):
            seen.append(param)
    return seen


def _duplex_cap(problem: Problem) -> float | None:
    """The bibw figure at the largest size measured by both osu_bw and osu_bibw, when bibw falls
    short of twice bw (C4b): both directions share one host resource. None otherwise."""
    bw = {p.nbytes: p.value for s in problem.series if s.test == "bandwidth" for p in s.points}
    bibw = {p.nbytes: p.value for s in problem.series if s.test == "bibw" for p in s.points}
    common = sorted(set(bw) & set(bibw))
    if not common:
        return None
    size = common[-1]
    return bibw[size] if bibw[size] < DUPLEX * bw[size] else None


def fit(series: Sequence[Series], base: Mapping[str, Any], base_name: str, *, nodes: int, ranks_per_node: int,
        holdout: float = 0.0, seed: int = 0) -> FitResult:
    """Fit the parameters of preset *base* to *series*; see the module docstring."""
    problem = Problem(series, base, nodes, ranks_per_node)
    start = dict(base)
    warnings: list[str] = []
    cap = _duplex_cap(problem)
    cap_added = cap is not None and get(start, "inter.host_bandwidth") is None and get(start, "inter") is not None
    if cap_added:
        start = with_values(start, [], [])
        put(start, "inter.host_bandwidth", unit_text("bandwidth", cap))
    # Mechanisms the base may lack (0 = none) start from a value the data suggests; if the fit
    # finds them negligible they are dropped again (see _negligible).
    optional: list[str] = []  # keys of mechanisms the base lacks
    if get(start, "mpi") is not None and not get(start, "mpi.rendezvous_overhead") and _streams_and_pings(problem):
        zero_byte = sum(si_value("time", get(start, k) or "0 s") for k in
                        ("mpi.send_overhead", "inter.latency", "mpi.recv_overhead"))
        if zero_byte > 0:
            start = with_values(start, [], [])
            put(start, "mpi.rendezvous_overhead", unit_text("time", zero_byte))
            optional.append("mpi.rendezvous_overhead")
    if cap_added:
        optional.append("inter.host_bandwidth")
    mask = holdout_mask(problem, holdout, seed)
    measured = _flat([[p.value for p in s.points] for s in problem.series], mask)
    candidates = _candidates(problem, start)
    x_base = np.array([math.log(si_value(p.kind, get(start, p.keys[0]))) for p in candidates])
    eager = _eager_keys(problem, start)
    limits = {key: int(si_value("size", get(start, key))) for key in eager}

    dropped: list[str] = []  # optional mechanisms the data does not show: absent from the preset

    def preset_at(x: np.ndarray, limits: Mapping[str, int], without: Sequence[str] = ()) -> dict[str, Any]:
        preset = with_values(start, candidates, np.exp(x), limits)
        for key in (*dropped, *without):
            _remove(preset, key)
        return preset

    def residuals(x: np.ndarray, free: Sequence[int], limits: Mapping[str, int], without: Sequence[str] = ()) -> np.ndarray:
        full = x_base.copy()
        full[list(free)] = x
        return _flat(problem.predict(preset_at(full, limits, without)), mask) / measured - 1

    everything = list(range(len(candidates)))
    base_residuals = residuals(x_base, everything, limits)
    sensitivity = _sensitivity(candidates, x_base, lambda x: residuals(x, everything, limits), base_residuals)
    free, reasons = _identifiable(candidates, sensitivity)
    x = x_base.copy()
    lower, upper = _bounds(candidates, x_base)
    eager_result: dict[str, EagerFit] = {}
    for _round in range(4):
        if free:
            solution = least_squares(residuals, x[free], args=(free, limits), bounds=(lower[free], upper[free]),
                                     method="trf", diff_step=1e-3, xtol=1e-7, ftol=1e-9, gtol=1e-9, max_nfev=30)
            x[free] = solution.x
        changed = False
        for key in eager:
            found = _knee(key, problem, mask, measured, lambda lim: preset_at(x, lim), limits)
            eager_result[key] = found
            if found.value != limits[key]:
                limits = {**limits, key: found.value}
                changed = True
        # A parameter driven to the edge of its range (an efficiency of 0.02, a latency 1000x
        # the base's) is not measured by the data but used to dodge it -- typically by making a
        # GPU protocol so slow that auto-selection stops choosing it. Keep the base's value.
        for k in list(free):
            at_edge = x[k] <= lower[k] + 1e-3 or (x[k] >= upper[k] - 1e-3 and candidates[k].kind != "fraction")
            if at_edge:
                free.remove(k)
                x[k] = x_base[k]
                reasons[k] = "the fit drove it to the edge of its range, so the data does not determine it"
                changed = True
        remaining = [key for key in optional if key not in dropped]
        for key in _negligible(candidates, x, remaining, free,
                               lambda y, without=(): residuals(y, everything, limits, without)):
            k = next(i for i, p in enumerate(candidates) if p.keys[0] == key)
            if k in free:
                free.remove(k)
            dropped.append(key)
            changed = True
        if not changed:
            break
    preset = preset_at(x, limits)
    for key in dropped:
        problem.notes.append(f"{key}: the data shows none (its fitted effect is below 0.5 % on every point)")
    if cap_added and cap is not None and "inter.host_bandwidth" not in dropped:
        notes_cap = (f"osu_bibw reaches {cap / 1e6:.0f} MB/s, less than {DUPLEX}x osu_bw: the host caps send + "
                     "receive together (published.md C4b), so inter.host_bandwidth is fitted")
        problem.notes.append(notes_cap)
    final = problem.predict(preset)
    base_values = problem.predict(base)
    final_sensitivity = _sensitivity(candidates, x, lambda y: residuals(y, everything, limits),
                                     residuals(x, everything, limits))
    fitted_params = []
    training = [(s, p) for s, ms in zip(problem.series, mask, strict=True) for p, m in zip(s.points, ms, strict=True) if m]
    for k, param in enumerate(candidates):
        base_raw = get(base, param.keys[0])
        base_value = si_value(param.kind, base_raw) if base_raw is not None else None
        if param.keys[0] in dropped:
            fitted_params.append(FittedParam(param, base_value, 0.0, False, "the data shows none"))
        elif k in free:
            column = np.abs(final_sensitivity[:, k])
            order = [i for i in np.argsort(-column, kind="stable")[:3] if column[i] > 0.1 * column.max()]
            fitted_params.append(FittedParam(param, base_value, float(np.exp(x[k])), True,
                                             determined_by=[point_name(*training[i]) for i in order]))
        else:
            fitted_params.append(FittedParam(param, base_value, float(np.exp(x[k])), False, reasons[k]))
    points = []
    for s, ms, fs, bs in zip(problem.series, mask, final, base_values, strict=True):
        for p, m, f, b in zip(s.points, ms, fs, bs, strict=True):
            points.append(PointFit(s, p, b, f, not m))
    for p in points:
        if abs(p.error) > WARN_ERROR:
            warnings.append(f"{point_name(p.series, p.point)}: the fitted model is {p.error:+.1%} off; "
                            "the model cannot follow the data here (a dip or step it has no parameter for)")
    return FitResult(base_name, preset, fitted_params, list(eager_result.values()), points, warnings, problem.notes,
                     holdout, problem.evaluations)


def _streams_and_pings(problem: Problem) -> bool:
    """True if inter-node ping-pongs and streaming bandwidth were both measured."""
    tests = {s.test for s, shape in zip(problem.series, problem.shapes, strict=True) if shape.nodes > 1}
    return "latency" in tests and bool(tests & {"bandwidth", "bibw", "mbw_mr"})


def _negligible(candidates: Sequence[Param], x: np.ndarray, optional: Sequence[str], free: Sequence[int],
                residuals: Any) -> list[str]:
    """Optional mechanisms whose removal moves no point by 0.5 %: the data does not show them."""
    found = []
    at = None
    for k, param in enumerate(candidates):
        if param.keys[0] not in optional:
            continue
        if k in free:
            at = residuals(x) if at is None else at
            if float(np.max(np.abs(residuals(x, (param.keys[0],)) - at))) >= 5e-3:
                continue
        found.append(param.keys[0])
    return found


def _remove(preset: dict[str, Any], key: str) -> None:
    parts = key.split(".")
    node = preset
    for part in parts[:-1]:
        node = node[part]
    node.pop(parts[-1], None)


def _bounds(candidates: Sequence[Param], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Four decades either way; an efficiency never above 1 (log 0)."""
    span = math.log(1e4)
    lower, upper = x - span, x + span
    for k, param in enumerate(candidates):
        if param.kind == "fraction":
            upper[k] = 0.0
            lower[k] = max(lower[k], math.log(0.02))  # no link or protocol reaches less than 2 %
    return lower, upper


def _sensitivity(candidates: Sequence[Param], x: np.ndarray, residuals: Any, at: np.ndarray) -> np.ndarray:
    """Columns d(relative prediction)/d(log parameter), by 5 % steps (down for an efficiency at 1)."""
    columns = np.zeros((len(at), len(candidates)))
    for k, param in enumerate(candidates):
        step = -PROBE if param.kind == "fraction" and x[k] > -PROBE else PROBE
        moved = x.copy()
        moved[k] += step
        columns[:, k] = (residuals(moved) - at) / step
    return columns


def _identifiable(candidates: Sequence[Param], sensitivity: np.ndarray) -> tuple[list[int], dict[int, str]]:
    """Greedy Gram-Schmidt over the columns in the candidates' order; see the module docstring."""
    basis: list[np.ndarray] = []
    taken: list[int] = []
    reasons: dict[int, str] = {}
    for k, param in enumerate(candidates):
        column = sensitivity[:, k]
        length = float(np.linalg.norm(column))
        if float(np.max(np.abs(column), initial=0.0)) < INSENSITIVE:
            reasons[k] = "no measured point depends on it"
            continue
        rest = column.copy()
        for b in basis:
            rest -= (rest @ b) * b
        if float(np.linalg.norm(rest)) < COLLINEAR * length:
            like = [candidates[j].name for j in taken
                    if abs(float(column @ sensitivity[:, j])) > 0.3 * length * float(np.linalg.norm(sensitivity[:, j]))]
            reasons[k] = f"these points cannot tell it from {', '.join(like) or 'the fitted parameters'}"
            continue
        basis.append(rest / float(np.linalg.norm(rest)))
        taken.append(k)
    return taken, reasons


def _eager_keys(problem: Problem, preset: Mapping[str, Any]) -> list[str]:
    keys = []
    for s, shape in zip(problem.series, problem.shapes, strict=True):
        key = EAGER_KEYS[path_kind(shape)]
        if s.metric in ("latency_s", "bandwidth_Bps") and get(preset, key) is not None and key not in keys:
            keys.append(key)
    return keys


def _knee(key: str, problem: Problem, mask: Sequence[Sequence[bool]], measured: np.ndarray,
          preset_for: Any, limits: Mapping[str, int]) -> EagerFit:
    """Try every measured p2p size as the largest eager message; keep the best (the base's on a tie)."""
    kind = "inter" if key.endswith("inter") else "intra"
    sizes = sorted({p.nbytes for s, shape, ms in zip(problem.series, problem.shapes, mask, strict=True)
                    if s.metric != "time_s" and path_kind(shape) == kind
                    for p, m in zip(s.points, ms, strict=True) if m})
    base_limit = limits[key]
    if len(sizes) < 2:
        return EagerFit(key, base_limit, base_limit, False, "fewer than two point-to-point sizes were measured")
    costs = {}
    for limit in [base_limit, *sizes[:-1]]:
        r = _flat(problem.predict(preset_for({**limits, key: limit})), mask) / measured - 1
        costs.setdefault(limit, float(r @ r))
    best = min(costs.values())
    tied = [limit for limit, cost in costs.items() if cost <= best * (1 + 1e-9) + 1e-15]
    if len(set(costs.values())) == 1:
        return EagerFit(key, base_limit, base_limit, False,
                        "no candidate limit changes any prediction (no p2p sizes on both sides of the knee)")
    chosen = base_limit if base_limit in tied else min(tied)
    below = max((s for s in sizes if s <= chosen), default=0)
    above = next((s for s in sizes if s > chosen), None)
    where = f"between {below} B (eager) and {above} B (rendezvous)" if above else f"at or above {below} B"
    if chosen == base_limit:
        return EagerFit(key, base_limit, chosen, False, f"the base's value fits the knee of the data, {where}")
    return EagerFit(key, base_limit, chosen, True, f"knee of the latency curve {where}")
