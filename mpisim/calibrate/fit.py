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

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from mpisim.calibrate.consistency import faster_than_the_host_cap
from mpisim.calibrate.measurements import Point, Series
from mpisim.calibrate.model import (
    CPU_PARAMS,
    EAGER_KEYS,
    GPU_PARAMS,
    NOT_MODELLED,
    Param,
    Shape,
    get,
    path_kind,
    predict,
    present,
    put,
    shape_of,
    si_value,
    unit_text,
    with_values,
)
from mpisim.engine.units import format_size
from mpisim.errors import ConfigError

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
    """``osu_latency.txt:7 (latency 1 MiB)``: the file's name (not its folder), line, test, size."""
    return f"{Path(series.file).name}:{point.line} ({series.test} {format_size(point.nbytes)})"


class Problem:
    """The measured series and the base preset; predicts every point for a candidate preset."""

    def __init__(self, series: Sequence[Series], base: Mapping[str, Any], nodes: int, ranks_per_node: int) -> None:
        self.notes: list[str] = []
        #: Measurements that no cluster could produce together (:mod:`~mpisim.calibrate.consistency`).
        self.disagreements: list[str] = []
        kept = []
        for s in series:
            if s.test in NOT_MODELLED:
                self.notes.append(f"{s.label}: read but left out of the fit ({NOT_MODELLED[s.test]})")
            else:
                kept.append(s)
            self.notes.extend(f"{Path(s.file).name}: {note}" for note in s.notes)
        if not kept:
            raise ConfigError("nothing to fit: " + "; ".join(self.notes), "", series[0].file if series else "")
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


def _duplex_cap(problem: Problem) -> tuple[float, str] | None:
    """The bibw figure at the largest size measured by both osu_bw and osu_bibw, and its point's
    name, when bibw falls short of 1.5x bw (C4b): both directions share one host resource.
    None otherwise."""
    bw = {p.nbytes: p.value for s in problem.series if s.test == "bandwidth" for p in s.points}
    bibw = {p.nbytes: (p.value, f"{Path(s.file).name}:{p.line}")
            for s in problem.series if s.test == "bibw" for p in s.points}
    common = sorted(set(bw) & set(bibw))
    if not common:
        return None
    size = common[-1]
    value, source = bibw[size]
    return (value, source) if value < DUPLEX * bw[size] else None


@dataclass
class _Solution:
    """One least-squares fit from one starting preset."""

    start: dict[str, Any]
    candidates: list[Param]
    x: np.ndarray
    free: list[int]
    reasons: dict[int, str]
    limits: dict[str, int]
    eager: list[EagerFit]
    cost: float
    residuals: Any  # (x over all candidates) -> relative errors of the fitted points
    worst: float


def _solve(problem: Problem, mask: Sequence[Sequence[bool]], measured: np.ndarray, start: dict[str, Any]) -> _Solution:
    """Identify, fit, find the knee, and repeat until nothing changes (at most four rounds)."""
    candidates = _candidates(problem, start)
    x_base = np.array([math.log(si_value(p.kind, get(start, p.keys[0]))) for p in candidates])
    eager = _eager_keys(problem, start)
    base_limits = {key: int(si_value("size", get(start, key))) for key in eager}
    limits = dict(base_limits)
    everything = list(range(len(candidates)))

    def residuals(x: np.ndarray, free: Sequence[int], limits: Mapping[str, int]) -> np.ndarray:
        full = x_base.copy()
        full[list(free)] = x
        preset = with_values(start, candidates, np.exp(full), limits)
        return _flat(problem.predict(preset), mask) / measured - 1

    sensitivity = _sensitivity(candidates, x_base, lambda y: residuals(y, everything, limits),
                               residuals(x_base, everything, limits))
    free, reasons = _identifiable(candidates, sensitivity)
    x = x_base.copy()
    lower, upper = _bounds(candidates, x_base)
    found: dict[str, EagerFit] = {}
    for key in eager:  # the knee first: a fit on the wrong side of it goes astray
        found[key] = _knee(key, problem, mask, measured, lambda lim: with_values(start, candidates, np.exp(x), lim),
                           limits, base_limits[key])
        limits[key] = found[key].value
    for _round in range(4):
        if free:
            solution = least_squares(residuals, x[free], args=(free, limits), bounds=(lower[free], upper[free]),
                                     method="trf", x_scale="jac", diff_step=1e-3, xtol=1e-8, ftol=1e-10,
                                     gtol=1e-10, max_nfev=40)
            x[free] = solution.x
        changed = False
        for key in eager:
            found[key] = _knee(key, problem, mask, measured,
                               lambda lim: with_values(start, candidates, np.exp(x), lim), limits, base_limits[key])
            if found[key].value != limits[key]:
                limits[key] = found[key].value
                changed = True
        # A parameter driven to the edge of its range (an efficiency of 0.02, a latency 10^4 x
        # the base's) is not measured by the data but used to dodge it -- typically by making a
        # GPU protocol so slow that auto-selection stops choosing it. Keep the base's value.
        for k in list(free):
            if x[k] <= lower[k] + 1e-3 or (x[k] >= upper[k] - 1e-3 and candidates[k].kind != "fraction"):
                free.remove(k)
                x[k] = x_base[k]
                reasons[k] = "the fit drove it to the edge of its range, so the data does not determine it"
                changed = True
        if not changed:
            break
    r = residuals(x, everything, limits)
    return _Solution(start, candidates, x, free, reasons, limits, list(found.values()), float(r @ r),
                     lambda y: residuals(y, everything, limits), float(np.max(np.abs(r))))


#: Mechanisms a base preset may lack, tried only when the plain fit leaves errors above this.
TRY_MECHANISMS_ABOVE = 0.01


def fit(series: Sequence[Series], base: Mapping[str, Any], base_name: str, *, nodes: int, ranks_per_node: int,
        holdout: float = 0.0, seed: int = 0) -> FitResult:
    """Fit the parameters of preset *base* to *series*; see the module docstring.

    Two mechanisms a base preset may lack are tried when the plain fit cannot follow the data,
    and kept only if they cut the squared error by a fifth or more: a host cap on send + receive
    together (when ``osu_bibw`` stays below 1.5x ``osu_bw``, C4b) and a rendezvous overhead
    (when streaming bandwidth and ping-pongs disagree, C4).
    """
    problem = Problem(series, base, nodes, ranks_per_node)
    mask = holdout_mask(problem, holdout, seed)
    measured = _flat([[p.value for p in s.points] for s in problem.series], mask)
    best = _solve(problem, mask, measured, copy.deepcopy(dict(base)))
    trials: list[tuple[str, float, str]] = []
    cap = _duplex_cap(problem)
    if cap is not None and get(base, "inter") is not None and get(base, "inter.host_bandwidth") is None:
        trials.append(("inter.host_bandwidth", cap[0], "bandwidth"))
    if get(base, "mpi") is not None and not get(base, "mpi.rendezvous_overhead") and _streams_and_pings(problem):
        zero_byte = sum(si_value("time", get(base, k) or "0 s")
                        for k in ("mpi.send_overhead", "inter.latency", "mpi.recv_overhead"))
        if zero_byte > 0:
            trials.append(("mpi.rendezvous_overhead", zero_byte, "time"))
    for key, seed_value, kind in trials:
        if best.worst <= TRY_MECHANISMS_ABOVE:
            break
        start = copy.deepcopy(best.start)
        put(start, key, unit_text(kind, seed_value))
        trial = _solve(problem, mask, measured, start)
        k = next((i for i, p in enumerate(trial.candidates) if p.keys[0] == key), None)
        if k is not None and k in trial.free and trial.cost < 0.8 * best.cost:
            problem.notes.append(f"{key} added: without it the fit's squared error is {best.cost:.3g}, with it "
                                 f"{trial.cost:.3g} ({_MECHANISMS[key]})")
            best = trial
        else:
            problem.notes.append(f"{key} tried and left out: it does not improve the fit ({_MECHANISMS[key]})")
    if cap is not None:
        inter_node = [s for s, shape in zip(problem.series, problem.shapes, strict=True) if shape.nodes > 1]
        problem.disagreements += faster_than_the_host_cap(inter_node, *cap,
                                                          eager_limit=best.limits.get(EAGER_KEYS["inter"], 0))
    return _result(problem, mask, base, base_name, best, holdout)


_MECHANISMS = {
    "inter.host_bandwidth": "osu_bibw stays below 1.5x osu_bw: both directions share one host resource (C4b)",
    "mpi.rendezvous_overhead": "large messages between nodes hold their connection for a time before their data",
}


def _result(problem: Problem, mask: Sequence[Sequence[bool]], base: Mapping[str, Any], base_name: str,
            best: _Solution, holdout: float) -> FitResult:
    preset = with_values(best.start, best.candidates, np.exp(best.x), best.limits)
    final = problem.predict(preset)
    base_values = problem.predict(base)
    sensitivity = _sensitivity(best.candidates, best.x, best.residuals, best.residuals(best.x))
    training = [(s, p) for s, ms in zip(problem.series, mask, strict=True) for p, m in zip(s.points, ms, strict=True) if m]
    fitted_params = []
    for k, param in enumerate(best.candidates):
        base_raw = get(base, param.keys[0])
        base_value = si_value(param.kind, base_raw) if base_raw is not None else None
        if k in best.free:
            column = np.abs(sensitivity[:, k])
            order = [i for i in np.argsort(-column, kind="stable")[:3] if column[i] > 0.1 * column.max()]
            if float(column.max(initial=0.0)) < INSENSITIVE:
                # Fitted, but at the fitted values a tighter limit binds (a link's efficiency above a
                # host cap): the data says only that it is at least this.
                fitted_params.append(FittedParam(param, base_value, float(np.exp(best.x[k])), True,
                                                 determined_by=["no point at the fitted values (a tighter limit "
                                                                "binds): any value from this one up fits"]))
                continue
            fitted_params.append(FittedParam(param, base_value, float(np.exp(best.x[k])), True,
                                             determined_by=[point_name(*training[i]) for i in order]))
        else:
            fitted_params.append(FittedParam(param, base_value, float(np.exp(best.x[k])), False, best.reasons[k]))
    points = []
    for s, ms, fs, bs in zip(problem.series, mask, final, base_values, strict=True):
        for p, m, f, b in zip(s.points, ms, fs, bs, strict=True):
            points.append(PointFit(s, p, b, f, not m))
    warnings = [f"{point_name(p.series, p.point)}: the fitted model is {p.error:+.1%} off; the model cannot "
                "follow the data here (a dip or step it has no parameter for)" for p in points if abs(p.error) > WARN_ERROR]
    warnings += problem.disagreements
    return FitResult(base_name, preset, fitted_params, best.eager, points, warnings, problem.notes, holdout,
                     problem.evaluations)


def _streams_and_pings(problem: Problem) -> bool:
    """True if inter-node ping-pongs and streaming bandwidth were both measured."""
    tests = {s.test for s, shape in zip(problem.series, problem.shapes, strict=True) if shape.nodes > 1}
    return "latency" in tests and bool(tests & {"bandwidth", "bibw", "mbw_mr"})


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
    for k in range(len(candidates)):
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
          preset_for: Any, limits: Mapping[str, int], base_limit: int) -> EagerFit:
    """Try every measured p2p size as the largest eager message; keep the best (the base's on a tie)."""
    kind = "inter" if key.endswith("inter") else "intra"
    sizes = sorted({p.nbytes for s, shape, ms in zip(problem.series, problem.shapes, mask, strict=True)
                    if s.metric != "time_s" and path_kind(shape) == kind
                    for p, m in zip(s.points, ms, strict=True) if m})
    if len(sizes) < 2:
        return EagerFit(key, base_limit, base_limit, False, "fewer than two point-to-point sizes were measured")
    costs = {}
    for limit in [base_limit, limits[key], *sizes[:-1]]:
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
