"""Teaching: run one collective algorithm on small integer arrays and explain it step by step.

``mpisim explain allreduce ring --ranks 4`` builds a small world (by default: the
:data:`DEFAULT_NETWORK_MODEL` network model, the contention-free ``analytic`` one, on a ``full``
topology, every pair of ranks joined by its own 1 GB/s link with 1 us latency; both are set in
:func:`_network_raw` alone), gives rank r the array ``x_r = [r*B + i]`` (B = 10, or 100 for longer
arrays, so a value shows where it came from), runs the algorithm once and prints:

1. every **step**: each message (who sends to whom, which elements it carries, their values)
   and then **what each rank has** -- for every other rank's input, which of its elements have
   reached this rank so far, on their own or summed into a partial result;
2. the **final buffers**, next to numpy's answer;
3. the algorithm's **cost formula** from its docstrings, with p, n, alpha, beta and gamma
   substituted, and its value next to the simulated time. The formula printed is the one that
   gives the cost function's value at this p (:func:`applicable_formula`: the
   non-power-of-two fold of rabenseifner on 5 ranks, not its power-of-two headline); where no
   docstring formula does, explain says the value is the cost function's bound. Where the
   simulated time differs from it, **why** (:func:`differences`): a count the formula's blocks
   do not divide, a network other than the teaching one, or the algorithm's own reason (a
   binomial barrier's tokens hold no port, the folds at p not a power of two, a formula that is
   an estimate). On the teaching network the two are otherwise equal (README, "Reports, traces
   and teaching", lists where); tests/report/test_explain.py holds every algorithm to that.

A pipelined algorithm cuts its buffer into segments of hundreds of KiB, so the few elements
of an explanation would travel as one segment; explain runs it with segments of a few
elements (:func:`segment_size`), so the pipeline shows.

**How it works without touching the algorithms.** Algorithms never say what a "step" is, so
steps are recovered from the messages: a message's step is one more than the step of the
latest message its sender had received before posting it (its causal depth). In a ring every
message of round k depends on one of round k-1; in a linear broadcast all messages are step 1.

What a message *carries* is recovered by running the algorithm a second time on encoded
inputs: rank r's element i becomes ``i * 2^p + 2^r``. A sum of such values over a set S of
ranks (each counted once, as any correct reduction does) is ``|S| * i * 2^p + sum(2^r)``:
its low p bits name the ranks in S and the rest gives i. Data-movement collectives carry
single values, which decode the same way. Timing depends on byte counts only, so both runs
send the same messages at the same times, and the printed values come from the first run.

The messages are observed with a :class:`~mpisim.mpi.world.World` subclass that notes each
send as it is posted (the payload's contents) and pairs it with the engine's message record
(its delivery time), so the MPI layer itself needs no hook.
"""

from __future__ import annotations

import math
import re
import textwrap
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import mpisim.collectives  # noqa: F401  (registers every algorithm)
from mpisim.collectives import allreduce as allreduce_module
from mpisim.collectives import bcast as bcast_module
from mpisim.collectives import registry
from mpisim.collectives.costmodel import ceil_lg, floor_lg, pof2_at_most
from mpisim.collectives.dispatch import size_of_call
from mpisim.collectives.select import network_parameters
from mpisim.engine.sim import Simulation
from mpisim.engine.trace import Tracer
from mpisim.errors import ConfigError
from mpisim.mpi.constants import PROC_NULL
from mpisim.mpi.payload import Payload
from mpisim.mpi.world import World
from mpisim.network.base import make_model
from mpisim.network.presets import resolve_topology
from mpisim.network.topology import build_topology
from mpisim.scenario.load import load_dict
from mpisim.workloads.collective import REDUCING, expected_output, reduce_in_rank_order

__all__ = ["DEFAULT_NETWORK_MODEL", "Explanation", "Formula", "differences", "evaluate", "explain", "format_explanation",
           "formulas",
           "reference", "substitute", "write_diagram"]

ROOTED = frozenset({"bcast", "reduce", "gather", "scatter"})
#: Provenance decoding needs 2^p to fit beside the element index in an int64.
MAX_DECODED_RANKS = 40
MAX_RANKS = 64
DEFAULT_TOPOLOGY = {"kind": "full", "bandwidth": "1 GB/s", "latency": "1 us"}


#: The network every explanation runs on unless --topology / --network say otherwise: the one
#: place to change when a different teaching network becomes the default.
DEFAULT_NETWORK_MODEL = "analytic"
#: Messages a rank sends (and receives) at once in an explanation, unless --ports says otherwise:
#: one, the textbooks' single-port network, on which the closed forms count the rounds drawn.
DEFAULT_PORTS = 1


def _network_raw(topology: str | dict[str, Any] | None, network: str | None, p: int,
                 ports: int | None = None) -> dict[str, Any]:
    """Return the scenario keys ``topology`` and ``network`` of an explanation on *p* ranks."""
    spec: dict[str, Any] = {"model": network or DEFAULT_NETWORK_MODEL}
    ports = DEFAULT_PORTS if ports is None else ports
    if ports:  # 0: no limit, every message of a rank may be in flight at once
        spec["ports"] = ports
    return {"topology": _topology_raw(topology, p), "network": spec}


@dataclass(frozen=True)
class Segmented:
    """An algorithm that cuts its buffer into segments of a module-level size.

    ``constant`` names the size (bytes) in ``module``; ``pieces`` is how many segments explain
    aims for; ``k_and_s`` gives (k, s) of its cost formula for a call of n bytes and segments
    of *seg* bytes, as its cost function computes them.
    """

    module: Any
    constant: str
    pieces: int
    k_and_s: Any


SEGMENTED = {
    ("bcast", "pipelined_chain"): Segmented(bcast_module, "CHAIN_SEGMENT", 4,
                                            lambda n, seg: (max(1, math.ceil(n / seg)), seg)),
    ("allreduce", "parameter_server"): Segmented(allreduce_module, "PS_SEGMENT", 4,
                                                 lambda n, seg: (max(1, math.ceil(n / seg)), min(seg, n))),
    ("allreduce", "double_binary_tree"): Segmented(allreduce_module, "DBT_SEGMENT", 2,
                                                   lambda n, seg: (max(1, math.ceil(n / 2 / seg)), min(seg, n / 2))),
}


@contextmanager
def segment_size(collective: str, algorithm: str, nbytes: int | None) -> Iterator[None]:
    """Run the block with *algorithm*'s segment size set to *nbytes* (None: unchanged), then restore it.

    Segment sizes are library constants of hundreds of KiB, far beyond the few elements an
    explanation shows, so a pipelined algorithm would run as one segment and never pipeline.
    The algorithm and its cost function read the constant when called, so setting it for the
    duration of one explanation shows the pipeline without changing the algorithm.
    """
    seg = SEGMENTED.get((collective, algorithm))
    if seg is None or nbytes is None:
        yield
        return
    module = seg.module
    saved = getattr(module, seg.constant)
    setattr(module, seg.constant, nbytes)
    try:
        yield
    finally:
        setattr(module, seg.constant, saved)


def chosen_segment(collective: str, algorithm: str, count: int, itemsize: int = 8) -> int | None:
    """The segment size (bytes, whole elements) that cuts *count* elements into the algorithm's
    ``pieces`` segments (per tree for the double binary tree); None for an unsegmented algorithm."""
    seg = SEGMENTED.get((collective, algorithm))
    if seg is None or count < 2:
        return None
    per = count / 2 if algorithm == "double_binary_tree" else count
    return max(1, math.ceil(per / seg.pieces)) * itemsize


# ----------------------------------------------------------------------------- observing sends


class _ObservedWorld(World):
    """A World that notes the contents of every message as its send is posted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.posted: list[tuple[tuple[int, int, int, int], float, np.ndarray | None]] = []

    def post_send(self, comm: Any, buf: Any, dest: int, tag: int, *, synchronous: bool = False) -> Any:
        req = super().post_send(comm, buf, dest, tag, synchronous=synchronous)
        if dest != PROC_NULL:
            array = buf.array if isinstance(buf, Payload) else np.asarray(buf)
            contents = None if array is None else np.array(array, copy=True)
            self.posted.append(((comm.world_rank, comm.group[dest], comm.context, tag), self.env.now, contents))
        return req


@dataclass
class Message:
    """One message of the explained run."""

    src: int
    dst: int
    nbytes: int
    protocol: str
    t_post: float
    t_done: float
    values: np.ndarray | None = None  # what it carried (first run)
    pieces: list[tuple[frozenset[int], int]] | None = None  # per element: (ranks summed in, element index)
    step: int = 0


def _messages(world: _ObservedWorld) -> list[Message]:
    """Pair the posted contents with the engine's message records (FIFO per envelope)."""
    queues: dict[tuple[int, int, int, int], list[np.ndarray | None]] = defaultdict(list)
    for key, _t, contents in world.posted:
        queues[key].append(contents)
    out = []
    for rec in world.tracer.messages:
        queue = queues.get((rec.src, rec.dst, rec.context, rec.tag))
        contents = queue.pop(0) if queue else None
        out.append(Message(rec.src, rec.dst, rec.nbytes, rec.protocol, rec.t_post, rec.t_done, contents))
    out.sort(key=lambda m: (m.t_post, m.src, m.dst, m.t_done))
    return out


def assign_steps(messages: Sequence[Message]) -> None:
    """Set each message's step: 1 + the step of the latest message its sender received before posting it."""
    received: dict[int, list[Message]] = defaultdict(list)
    for msg in sorted(messages, key=lambda m: (m.t_post, m.t_done)):
        before = [m.step for m in received[msg.src] if m.t_done <= msg.t_post]
        msg.step = 1 + max(before, default=0)
        received[msg.dst].append(msg)


# ----------------------------------------------------------------------------- provenance


def encode(p: int, count: int) -> list[np.ndarray]:
    """Return the encoded inputs: rank r's element i is ``i * 2^p + 2^r``."""
    return [np.arange(count, dtype=np.int64) * (1 << p) + (1 << r) for r in range(p)]


def decode(value: int, p: int, count: int | None = None) -> tuple[frozenset[int], int] | None:
    """Return (ranks summed into *value*, element index), or None if it is not such a sum.

    With *count*, an element index at or beyond it is not a sum of inputs either.
    """
    mask = int(value) & ((1 << p) - 1)
    ranks = frozenset(r for r in range(p) if mask >> r & 1)
    high = int(value) >> p
    if not ranks or high % len(ranks) or (count is not None and high // len(ranks) >= count):
        return None
    return ranks, high // len(ranks)


def _ranks_text(ranks: frozenset[int]) -> str:
    """``{0,1,2,5}`` -> ``"0-2,5"``."""
    ordered = sorted(ranks)
    runs: list[list[int]] = []
    for r in ordered:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ",".join(f"{run[0]}-{run[-1]}" if len(run) > 2 else ",".join(map(str, run)) for run in runs)


def _indices_text(indices: Sequence[int], count: int | None = None) -> str:
    if count is not None and list(indices) == list(range(count)):
        return "all"
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ",".join(f"{run[0]}..{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def describe_pieces(pieces: Sequence[tuple[frozenset[int], int] | None]) -> str:
    """Describe what a message carries: ``x0[0..1]``, ``(x0+x1)[2]``, ``Σx{0-3}[1]``, one run at a time."""
    parts: list[str] = []
    run: list[Any] = []

    def flush() -> None:
        if not run:
            return
        ranks, first, last = run
        if ranks is None:
            parts.append("?")
        else:
            if len(ranks) == 1:
                who = f"x{next(iter(ranks))}"
            elif len(ranks) <= 3:
                who = "(" + "+".join(f"x{r}" for r in sorted(ranks)) + ")"
            else:
                who = f"Σx{{{_ranks_text(ranks)}}}"
            parts.append(f"{who}[{first}]" if first == last else f"{who}[{first}..{last}]")

    for piece in pieces:
        ranks, index = piece if piece is not None else (None, None)
        if run and ranks is not None and run[0] == ranks and index == run[2] + 1:
            run[2] = index
            continue
        flush()
        run[:] = [ranks, index, index]
    flush()
    return " ".join(parts) if parts else "nothing (a zero-byte message)"


# ----------------------------------------------------------------------------- reference


def reference(collective: str, inputs: Sequence[np.ndarray], root: int = 0) -> list[np.ndarray | None]:
    """Return what each rank must get back (op = sum), computed with numpy; None where MPI returns nothing.

    The same definition the collective workload verifies its results against.
    """
    reduction = reduce_in_rank_order("sum", inputs) if collective in REDUCING else None
    return [expected_output(collective, "sum", root, rank, inputs, reduction) for rank in range(len(inputs))]


# ----------------------------------------------------------------------------- cost formula


_SYMBOL_CHARS = set("pnαβγṗks")


def cost_paragraph(doc: str) -> str:
    """Return the docstring's ``Cost`` paragraph (one line), or '' if it has none."""
    paragraphs = re.split(r"\n\s*\n", doc)
    for para in paragraphs:
        text = " ".join(line.strip() for line in para.splitlines())
        if text.startswith("Cost"):
            return text
    return ""


def cost_formula(paragraph: str) -> str:
    """Cut the formula out of a ``Cost...: <formula> <commentary>`` paragraph."""
    match = re.match(r"Cost[^:]*:\s*(.*)", paragraph)
    if not match:
        return ""
    text = match.group(1)
    cut = len(text)
    for stop in (" if ", "; ", " (see", ". ", ", n =", " for p", " -- ", ": ", " Exact", ", plus", ", exact",
                 " with ", ", the ", " Thakur"):
        at = text.find(stop)
        if 0 < at < cut:
            cut = at
    return text[:cut].strip().rstrip(".,;")


class FormulaError(ValueError):
    """A formula uses notation or symbols :func:`evaluate` does not know."""


_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|(T_last|s_last|p'|lg|[pnαβγksTD])|([-+/·()⌈⌉⌊⌋]))")
#: Symbols a formula may define in terms of others (``T = α + sβ``), from the docstrings.
_DEFINED = ("T", "s_last", "T_last", "D")


def evaluate(formula: str, values: dict[str, float]) -> float:
    """Evaluate a cost formula written as the docstrings write them, with *values* for its symbols.

    The notation: ``lg`` is log2 of the atom after it (``lg p·α``, ``⌊lg p⌋``), ``⌈x⌉`` and
    ``⌊x⌋`` round, ``p'`` is a symbol of its own (the largest power of two below p), ``·`` or
    juxtaposition multiplies (``2((p-1)/p)nβ``), and ``/`` binds like a product, left to right.
    Segmented algorithms also use k (segments), s (segment bytes) and the symbols the docstrings
    define from them (T, T_last, s_last, D), which *values* must then hold. Raises FormulaError
    for anything else.
    """
    tokens: list[str] = []
    pos = 0
    text = formula.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise FormulaError(f"cannot read {text[pos:]!r}")
        tokens.append(next(g for g in match.groups() if g is not None))
        pos = match.end()
    at = 0

    def peek() -> str | None:
        return tokens[at] if at < len(tokens) else None

    def take() -> str:
        nonlocal at
        at += 1
        return tokens[at - 1]

    def atom() -> float:
        tok = take() if peek() is not None else ""
        if tok == "lg":
            return math.log2(atom())
        if tok in ("(", "⌈", "⌊"):
            inner = expr()
            closing = {"(": ")", "⌈": "⌉", "⌊": "⌋"}[tok]
            if take() != closing:
                raise FormulaError(f"unbalanced {tok!r}")
            return inner if tok == "(" else math.ceil(inner - 1e-12) if tok == "⌈" else math.floor(inner + 1e-12)
        if tok in values:
            return values[tok]
        try:
            return float(tok)
        except ValueError:
            raise FormulaError(f"unknown symbol {tok!r}") from None

    def term() -> float:
        value = atom()
        while peek() is not None and peek() not in ("+", "-", ")", "⌉", "⌋"):
            op = peek()
            if op in ("/", "·"):
                take()
            rhs = atom()
            value = value / rhs if op == "/" else value * rhs
        return value

    def expr() -> float:
        value = term()
        while peek() in ("+", "-"):
            value = value + term() if take() == "+" else value - term()
        return value

    result = expr()
    if at != len(tokens):
        raise FormulaError(f"unexpected {tokens[at]!r}")
    return result


@dataclass(frozen=True)
class Formula:
    """A closed form as written in a docstring, and for which rank counts it is written."""

    text: str
    scope: str  # "p a power of two", "p not a power of two", or "" (any p)
    note: str = ""  # "an upper bound" ("at most") or "an estimate" ("about"); "" for the formula itself


def formulas(algo: registry.Algorithm) -> list[Formula]:
    """Return the closed forms an algorithm's docstrings state: the general one, then special cases.

    The algorithm's ``Cost:`` paragraph gives the headline formula; its cost function's
    docstring may add the one for p not a power of two (``Otherwise (p' = ...): ...``) or a
    bound (``else at most ...``).
    """
    paragraph = cost_paragraph(algo.description or "")
    head = cost_formula(paragraph).split(" for ")[0].split(", T =")[0].strip()
    cost_doc = " ".join((getattr(algo.cost, "__doc__", None) or "").split())
    first = cost_doc.split(". ")[0]
    pof2 = "p a power of two" in first or "for p a power of two" in paragraph
    out = [Formula(head, "p a power of two" if pof2 else "")] if head else []
    for pattern, note in ((r"Otherwise \(p' = [^)]*\):\s*(.+?)(?:\s--|\.\s|\.$|$)", ""),
                          (r"else at most\s*(.+?)(?:\.\s|\.$|$)", "an upper bound"),
                          (r"otherwise about\s*(.+?)(?:, see|\.\s|\.$|$)", "an estimate")):
        match = re.search(pattern, cost_doc) or re.search(pattern, paragraph)
        if match:
            out.append(Formula(match.group(1).strip().rstrip(".,;"), "p not a power of two", note))
    # A case of its own for two ranks (the parameter server's one worker): "(p = 2): <formula> -- why".
    match = re.search(r"\(p = 2\):\s*(.+?)(?:\s--|\.\s|\.$|$)", cost_doc)
    if match:
        out.append(Formula(match.group(1).strip().rstrip(".,;"), "p = 2"))
    return out


def definitions(algo: registry.Algorithm) -> dict[str, str]:
    """Return the auxiliary symbols the docstrings define (``T = α + sβ``), symbol -> formula."""
    text = " ".join(((algo.description or "") + " " + (getattr(algo.cost, "__doc__", None) or "")).split())
    out: dict[str, str] = {}
    for name in _DEFINED:
        match = re.search(rf"(?<![\w]){name} = ([^,;()]+?(?:\([^)]*\)[^,;()]*?)?)(?=\s+for\b|,|;|\)|\.\s|$)", text)
        if match and name not in out:
            out[name] = match.group(1).strip()
    return out


def _with_definitions(algo: registry.Algorithm, values: dict[str, float]) -> dict[str, float]:
    """Return *values* plus every defined symbol (T, T_last, ...) that can be evaluated from them."""
    values = dict(values)
    pending = dict(definitions(algo))
    while pending:
        done = []
        for name, text in pending.items():
            try:
                values[name] = evaluate(text, values)
                done.append(name)
            except (FormulaError, ValueError, ZeroDivisionError):
                continue
        if not done:
            break
        for name in done:
            del pending[name]
    return values


def applicable_formula(algo: registry.Algorithm, values: dict[str, float], model_s: float) -> Formula | None:
    """Return the docstring formula that gives the registered cost function's value here, if any.

    *values* holds p, p', n, α, β, γ (and k, s for a segmented algorithm).
    """
    values = _with_definitions(algo, values)
    for formula in formulas(algo):
        try:
            value = evaluate(formula.text, values)
        except (FormulaError, ValueError, ZeroDivisionError):
            continue
        if math.isclose(value, model_s, rel_tol=1e-6, abs_tol=1e-15):
            return formula
    return None


def pof2_below(p: int) -> int:
    """The largest power of two below *p* (p itself is not below), at least 1: the p' of the formulas."""
    q = 1 << (p.bit_length() - 1)
    return max(q // 2 if q == p else q, 1)


def substitute(formula: str, values: dict[str, str]) -> str:
    """Replace the symbols p, n, α, β, γ in *formula* by *values*, with ``·`` for implicit products.

    A symbol is replaced only where it stands alone (``lg p``, ``nβ``, ``(p-1)``), not inside
    a word (``T_last``). Symbols without a value are left as they are.
    """
    out: list[str] = []
    last_was_value = False
    if "p'" in values:  # p' is one symbol: swap in a stand-in that no word contains
        formula = formula.replace("p'", "ṗ")
        values = {**values, "ṗ": values["p'"]}
    for i, ch in enumerate(formula):
        prev = formula[i - 1] if i > 0 else " "
        nxt = formula[i + 1] if i + 1 < len(formula) else " "
        # A letter before or after makes it part of a word, unless that letter is a symbol too (nβ).
        prev_ok = prev in _SYMBOL_CHARS or not (prev.isascii() and (prev.isalpha() or prev == "_"))
        next_ok = nxt in _SYMBOL_CHARS or not (nxt.isascii() and (nxt.isalnum() or nxt == "_"))
        standalone = ch in _SYMBOL_CHARS and ch in values and prev_ok and next_ok
        if standalone:
            if out and (out[-1][-1:].isalnum() or out[-1][-1:] in (")", "⌉", "⌋") or last_was_value):
                out.append("·")
            out.append(values[ch])
            last_was_value = True
            continue
        if last_was_value and ch == "(":
            out.append("·")
        out.append(ch)
        last_was_value = False
    return "".join(out)


# ----------------------------------------------------------------------------- running


@dataclass
class Explanation:
    """Everything ``mpisim explain`` prints (see :func:`format_explanation`)."""

    collective: str
    algorithm: registry.Algorithm
    p: int
    count: int
    root: int
    base: int
    topology: str
    network: str
    alpha: float
    beta: float
    gamma: float
    nbytes: int  # the call's size in the cost formulas' convention
    inputs: list[np.ndarray]
    messages: list[Message]
    outputs: list[np.ndarray | None]
    expected: list[np.ndarray | None]
    simulated_s: float
    model_s: float | None
    decoded: bool
    notes: list[str] = field(default_factory=list)
    #: Segment size (bytes) a segmented algorithm ran with; None for the others.
    segment: int | None = None
    #: The docstring formula that gives the cost function's value at this p (None: none does).
    formula: Formula | None = None
    #: The numbers the formula is evaluated with: p, p', n, α, β, γ (and k, s if segmented).
    values: dict[str, float] = field(default_factory=dict)
    #: Messages a rank sends (and receives) at once: 1 on the teaching network, None for no limit.
    ports: int | None = DEFAULT_PORTS
    #: The network model's name, and whether the topology is explain's own full network.
    model: str = DEFAULT_NETWORK_MODEL
    full_topology: bool = True

    @property
    def teaching(self) -> bool:
        """True on the teaching network: the analytic model on the full topology, one port per rank."""
        return self.full_topology and self.model == DEFAULT_NETWORK_MODEL and self.ports == 1

    @property
    def matches(self) -> bool:
        """True when the simulated time equals the closed form (within 1e-9, relative)."""
        return self.model_s is not None and math.isclose(self.simulated_s, self.model_s, rel_tol=1e-9, abs_tol=1e-15)

    @property
    def formula_text(self) -> str:
        """The text of the formula printed (the applicable one, else the headline one)."""
        if self.formula is not None:
            return self.formula.text
        head = formulas(self.algorithm)
        return head[0].text if head else ""

    @property
    def values_with_definitions(self) -> dict[str, float]:
        """:attr:`values` plus the symbols the docstrings define from them (T, T_last, ...)."""
        return _with_definitions(self.algorithm, self.values)

    @property
    def steps(self) -> int:
        """Number of steps (the deepest message's step)."""
        return max((m.step for m in self.messages), default=0)

    @property
    def correct(self) -> bool:
        """True when every rank's output equals numpy's."""
        return all(
            (out is None and exp is None) or (out is not None and exp is not None and np.array_equal(out, exp))
            for out, exp in zip(self.outputs, self.expected, strict=True)
        )

    def holdings(self, step: int) -> list[dict[int, set[int]]]:
        """Per rank: origin rank -> element indices of its input that have reached this rank by *step*.

        A rank starts with its own input; an element counts as reached whether it arrived on
        its own or summed into a partial result.
        """
        held = [{r: set(range(self.count))} for r in range(self.p)]
        for msg in self.messages:
            if msg.step > step or not msg.pieces:
                continue
            for piece in msg.pieces:
                if piece is None:
                    continue
                ranks, index = piece
                for origin in ranks:
                    held[msg.dst].setdefault(origin, set()).add(index)
        return held


def _topology_raw(topology: str | dict[str, Any] | None, p: int) -> Any:
    """The scenario ``topology`` value for *p* ranks: the default full network, a preset, or a mapping."""
    if topology is None:
        return {"nodes": p, "ranks_per_node": 1, "inter": dict(DEFAULT_TOPOLOGY)}
    if isinstance(topology, str):
        spec, _ = resolve_topology(topology)
        per_node = spec.ranks_per_node
        if p % per_node:
            raise ConfigError(f"preset {topology!r} has {per_node} ranks per node, so --ranks must be a multiple "
                              f"of {per_node}, got {p}", "--ranks")
        return {"preset": topology, "nodes": p // per_node}
    return topology


def _run(world: _ObservedWorld, collective: str, algorithm: str, inputs: list[np.ndarray], root: int) -> list[Any]:
    def program(comm: Any) -> Any:
        yield from comm.world.synchronize(comm.world_rank)
        if collective == "barrier":
            return (yield from comm.barrier(algorithm=algorithm))
        kwargs: dict[str, Any] = {"algorithm": algorithm}
        if collective in ROOTED:
            kwargs["root"] = root
        return (yield from getattr(comm, collective)(np.array(inputs[comm.rank]), **kwargs))

    procs = world.launch(program)
    world.run()
    return [proc.value for proc in procs]


def explain(collective: str, algorithm: str, ranks: int = 4, *, count: int | None = None,
            topology: str | dict[str, Any] | None = None, network: str | None = None, root: int = 0,
            segment: int | None = None, ports: int | None = None) -> Explanation:
    """Run *algorithm* of *collective* on *ranks* ranks with small arrays and return the explanation.

    *count* is the number of elements each rank passes (default: *ranks*, so a block is one
    element). *network* defaults to :data:`DEFAULT_NETWORK_MODEL`; *ports* limits the messages a
    rank sends (and receives) at once: by default :data:`DEFAULT_PORTS` (1, the textbooks'
    single-port network), 0 for no limit. A segmented algorithm
    (:data:`SEGMENTED`) runs with segments of *segment* bytes, by default a size that cuts the
    buffer into several segments (:func:`chosen_segment`), so the pipeline shows. Raises
    ConfigError for an unknown algorithm, a rank count it cannot run on, or a bad topology.
    """
    if not 2 <= ranks <= MAX_RANKS:
        raise ConfigError(f"explain needs between 2 and {MAX_RANKS} ranks, got {ranks}", "--ranks")
    count = ranks if count is None else count
    if not 0 <= count <= 4096:
        raise ConfigError(f"explain needs a count between 0 and 4096, got {count}", "--count")
    if collective in ROOTED and not 0 <= root < ranks:
        raise ConfigError(f"root {root} is not a rank of {ranks}", "--root")
    try:
        algo = registry.get(collective, algorithm)
    except registry.UnknownAlgorithm as err:
        raise ConfigError(str(err), "algorithm") from None
    problem = algo.why_not(ranks)
    if problem:
        raise ConfigError(problem, "--ranks")
    if segment is not None and segment < 8:
        raise ConfigError(f"a segment must hold at least one 8-byte element, got {segment} B", "--segment")
    if segment is None:
        segment = chosen_segment(collective, algorithm, count)
    raw = {
        "name": f"explain-{collective}-{algorithm}",
        **_network_raw(topology, network, ranks, ports),
        "payload": "data",
        "workload": {"kind": "collective", "collective": collective, "algorithm": algorithm},
    }
    if collective != "barrier":
        raw["workload"]["sizes"] = ["8 B"]
    spec, _ = resolve_topology(raw["topology"])
    problem = algo.why_not_on(spec)
    if problem:  # nvls off an NVLS switch: say which --topology has one
        raise ConfigError(f"{problem}; e.g. --topology dgx-h100 --ranks 8", "--topology")
    scenario = load_dict(raw)
    if scenario.ranks != ranks:
        raise ConfigError(f"the topology has {scenario.ranks} ranks, but --ranks is {ranks}", "--topology")

    def new_world() -> _ObservedWorld:
        sim = Simulation(scenario, seed=scenario.seed, tracer=Tracer(messages=True, spans=True))
        topo = build_topology(scenario.topology)
        return _ObservedWorld(sim, topo, make_model(scenario.network.model, sim, topo, scenario.network.ports), scenario.mpi)

    with segment_size(collective, algorithm, segment):
        return _explain(collective, algo, ranks, count, topology, root, scenario, new_world, segment)


def _network_name(network: Any) -> str:
    """Name the explanation's network model and its port limit, e.g. ``analytic model, single-port (...)``."""
    if network.ports == 1:
        return (f"{network.model} model, single-port (each rank sends one data message and receives one at a "
                "time, the network the textbook formulas count rounds on; --ports 0 lifts the limit)")
    if network.ports:
        return f"{network.model} model, {network.ports} ports per rank"
    return f"{network.model} model, multi-port (all of a rank's messages in flight at once)"


def _explain(collective: str, algo: registry.Algorithm, ranks: int, count: int, topology: Any, root: int,
             scenario: Any, new_world: Any, segment: int | None) -> Explanation:
    """Run the explanation proper (see :func:`explain`), segment size already in place."""
    algorithm = algo.name
    base = 10 if count <= 10 else 100 if count <= 100 else 10_000
    inputs = [np.arange(count, dtype=np.int64) + r * base for r in range(ranks)]
    world = new_world()
    outputs = [None if out is None else np.asarray(out.array if isinstance(out, Payload) else out)
               for out in _run(world, collective, algorithm, inputs, root)]
    messages = _messages(world)
    decoded = ranks <= MAX_DECODED_RANKS
    notes = []
    if decoded:
        coded = new_world()
        _run(coded, collective, algorithm, encode(ranks, count), root)
        coded_messages = _messages(coded)
        same = len(coded_messages) == len(messages) and all(
            (a.src, a.dst, a.nbytes, a.t_post) == (b.src, b.dst, b.nbytes, b.t_post)
            for a, b in zip(messages, coded_messages, strict=True)
        )
        if same:
            for msg, twin in zip(messages, coded_messages, strict=True):
                if twin.values is not None and twin.values.dtype == np.int64:
                    msg.pieces = [decode(v, ranks, count) for v in twin.values.ravel()]
        else:
            decoded = False
            notes.append("the encoded run sent different messages, so what each message carries is not shown")
    assign_steps(messages)
    records = world.tracer.collectives
    simulated = max(r.t_exit for r in records) - min(r.t_enter for r in records) if records else 0.0
    alpha, beta, gamma = network_parameters(world.comm_world(0))
    nbytes = 0 if collective == "barrier" else size_of_call(collective, count * 8, ranks)
    model = algo.cost(ranks, nbytes, alpha, beta, gamma) if algo.cost is not None else None
    topo_name = "full network (every pair of ranks on its own link)" if topology is None else str(
        topology if isinstance(topology, str) else scenario.topology.name)
    values: dict[str, float] = {"p": ranks, "p'": pof2_below(ranks), "n": nbytes, "α": alpha, "β": beta, "γ": gamma}
    seg = SEGMENTED.get((collective, algorithm))
    if seg is not None:
        values["k"], values["s"] = seg.k_and_s(nbytes, getattr(seg.module, seg.constant))
    formula = applicable_formula(algo, values, model) if model is not None else None
    return Explanation(collective, algo, ranks, count, root, base, topo_name, _network_name(scenario.network), alpha, beta,
                       gamma, nbytes, inputs, messages, outputs, reference(collective, inputs, root), simulated,
                       model, decoded, notes, segment=segment if seg is not None else None, formula=formula,
                       values=values, ports=scenario.network.ports, model=scenario.network.model,
                       full_topology=topology is None)


# ----------------------------------------------------------------------------- why the times differ

#: Printed when the simulated time differs from the closed form and :func:`differences` knows no
#: reason; tests/report/test_explain.py holds every registered algorithm to a specific one.
GENERIC_CAVEAT = ("The formula is exact only for some rank counts (or assumes one message at a time per rank), "
                  "so it need not equal the simulated time here.")


def _power_of_two(p: int) -> bool:
    return p & (p - 1) == 0


def formula_blocks(ex: Explanation) -> int | None:
    """How many equal blocks the closed form cuts the buffer into (n/d bytes each); None if it cuts none."""
    c, a, p = ex.collective, ex.algorithm.name, ex.p
    q = pof2_at_most(p)
    if a == "rabenseifner":
        return q
    if c in ("reduce_scatter", "alltoall", "scatter") or (c, a) in (
            ("allreduce", "ring"), ("bcast", "scatter_recursive_doubling_allgather"),
            ("bcast", "scatter_ring_allgather")):
        return p
    return None


def _network_reasons(ex: Explanation) -> list[str]:
    """Where this run's network is not the teaching one the closed forms count on."""
    out = []
    if not ex.full_topology:
        out.append(f"This run is on {ex.topology}, not on explain's full topology (every pair of ranks on its "
                   "own link, all with the same α and β), the network the closed forms count on.")
    if ex.model != DEFAULT_NETWORK_MODEL:
        out.append(f"The {ex.model} model shares a link between the transfers crossing it; the closed forms count "
                   f"on the {DEFAULT_NETWORK_MODEL} model's links, where transfers on different links never slow "
                   "each other.")
    if ex.ports != 1:
        many = "all its messages" if not ex.ports else f"up to {ex.ports} messages"
        out.append(f"With --ports {ex.ports or 0} a rank has {many} in flight at once; the closed forms count the "
                   "rounds of the single-port network (one message sent and one received at a time per rank), "
                   "the teaching network's default.")
    return out


def _uneven_reason(ex: Explanation) -> str | None:
    d = formula_blocks(ex)
    if d is None or ex.count % d == 0:
        return None
    big, small = -(-ex.count // d), ex.count // d
    return (f"The {ex.count} elements do not split into {d} equal blocks (np.array_split gives blocks of {big} and "
            f"{small} elements); the formula charges n/{d} bytes a block, so messages that should take equal "
            f"times do not (a --count that {d} divides avoids this).")


def _why_binomial_barrier(ex: Explanation) -> list[str]:
    p = ex.p
    if _power_of_two(p):
        return []
    depth, rounds = floor_lg(p), ceil_lg(p)
    value = f" = {_t(2 * depth * ex.alpha)}" if ex.teaching else ""
    overlap = ("barrier tokens carry no data, and the port limit holds data messages only (zero-byte messages "
               "are the pipelines' credits, which the formulas do not count as rounds), so the tokens overlap"
               if ex.ports == 1 else "here a rank's tokens overlap")
    return [f"The formula counts ⌈lg p⌉ = {rounds} rounds each way, the textbook's single port, where a root "
            f"with {rounds} children takes their tokens one after the other; but {overlap}, and the binomial "
            f"tree on p = {p} ranks is only ⌊lg p⌋ = {depth} messages deep: the barrier takes "
            f"2⌊lg p⌋α{value}, below the formula (an upper bound)."]


def _why_scatter_recursive_doubling(ex: Explanation) -> list[str]:
    if _power_of_two(ex.p):
        return []
    return [f"p = {ex.p} is not a power of two: in some steps of the recursive-doubling allgather a rank has "
            "no partner, and MPICH's fix-up then passes the blocks it missed down a binomial tree inside its "
            "group; the formula counts the power-of-two steps only, so the fix-up's rounds come on top of it "
            "(a lower bound)."]


def _why_rabenseifner(ex: Explanation) -> list[str]:
    p = ex.p
    q = pof2_at_most(p)
    ahead = q - (p - q)  # participants that did not fold
    if _power_of_two(p) or ex.ports != 1 or ahead < 2:
        return []  # with one rank that did not fold, its partners all folded: nobody runs ahead
    return [f"p = {p} is not a power of two: {p - q} rank{'s fold' if p - q > 1 else ' folds'} into a neighbour "
            f"first, and the formula charges the fold as a step of its own before the p' = {q} participants "
            f"start. On one port it is not one: the {ahead} participants that did not fold start at once and run "
            "ahead together, and their eager messages take the receive ports of ranks still busy with the "
            "fold, which pushes those ranks' later steps back. (With --ports 0 and a count that p' = "
            f"{q} divides, the simulation equals the formula.)"]


def _why_recursive_halving(ex: Explanation) -> list[str]:
    p = ex.p
    if _power_of_two(p):
        return []
    q = pof2_at_most(p)
    on_one_port = (", and on one port their messages take the receive ports of ranks still busy with the fold"
                   if ex.ports == 1 else "")
    return [f"p = {p} is not a power of two, and the formula is then an estimate: it adds up the fold, a "
            f"recursive halving on p' = {q} ranks and the unfold, but the halving's ranges are uneven (the first "
            f"{p - q} of the p' ranks own two ranks' blocks) and the ranks that did not fold start at "
            f"once{on_one_port}."]


def _why_double_binary_tree(ex: Explanation) -> list[str]:
    p, k = ex.p, int(ex.values.get("k", 1))
    out = []
    if ex.count % 2:
        out.append(f"The {ex.count} elements do not halve evenly: the trees carry {-(-ex.count // 2)} and "
                   f"{ex.count // 2}, and the formula gives each n/2 bytes.")
    elif ex.segment is not None and (ex.count // 2 * 8) % ex.segment:
        out.append(f"Each tree's last segment is shorter than s = {ex.segment} B, and the formula charges k full "
                   "segments.")
    if p == 2:
        if k > 1:
            v = ex.values
            value = 2 * (v["α"] + v["s"] * (v["β"] + v["γ"])) + 2 * (k - 1) * (v["α"] + v["s"] * v["β"])
            out.append("On 2 ranks each rank is the root of one tree and the other's only child in the other, "
                       "so after the first segment it sends 2 segments a round (its tree's result down, the other "
                       "tree's segment up), not the 4 the formula charges (those of a rank interior in one tree "
                       "and a leaf in the other): 2⌈lg p⌉(α + sβ + sγ) + 2(k-1)(α + sβ)"
                       + (f" = {_t(value)}." if ex.teaching and not out else "."))
        return out
    if ex.ports != 1:
        out.append("The formula is an estimate of the pipeline on one port (its docstring says so): 4 message "
                   "times a segment after the first, the sends of a rank interior in one tree and a leaf in the "
                   "other, which overlap when a rank has more ports.")
        return out
    parts = []
    if p >= 4:
        parts.append("a rank with two children receives their segments one after the other and sends to them one "
                     "after the other, and as a leaf of the other tree it sends through the same port, so the "
                     "first segment's trip takes longer than 2⌈lg p⌉ message times")
    if k > 1:
        parts.append("how the later segments fill each port depends on how the two trees' streams and their "
                     "credits interleave, which the formula's 4 message times a segment do not count")
    if parts:
        out.append("The formula is an estimate (its docstring says so): it counts the first segment's trip as "
                   f"2⌈lg p⌉ = {2 * ceil_lg(p)} message times α + sβ, one per tree level up and down, and each "
                   "later segment as 4, the sends of a rank interior in one tree and a leaf in the other. But on "
                   "one port " + "; and ".join(parts) + ".")
    return out


#: Reasons of each algorithm's own for a simulated time that differs from its closed form;
#: :func:`differences` adds those of the network and of an uneven count.
ALGORITHM_REASONS = {
    ("barrier", "binomial"): _why_binomial_barrier,
    ("bcast", "scatter_recursive_doubling_allgather"): _why_scatter_recursive_doubling,
    ("reduce", "rabenseifner"): _why_rabenseifner,
    ("allreduce", "rabenseifner"): _why_rabenseifner,
    ("reduce_scatter", "recursive_halving"): _why_recursive_halving,
    ("allreduce", "double_binary_tree"): _why_double_binary_tree,
}


def differences(ex: Explanation) -> list[str]:
    """Say why the simulated time differs from the closed form here: one specific reason an item.

    The network (when it is not the teaching one), an uneven count (blocks the formula takes as
    equal), and the algorithm's own (:data:`ALGORITHM_REASONS`). Empty when the two are equal, or
    when no reason is known -- then :data:`GENERIC_CAVEAT` is printed instead.
    """
    if ex.model_s is None or ex.matches:
        return []
    out = _network_reasons(ex)
    uneven = _uneven_reason(ex)
    if uneven:
        out.append(uneven)
    why = ALGORITHM_REASONS.get((ex.collective, ex.algorithm.name))
    if why is not None:
        out += why(ex)
    return out


# ----------------------------------------------------------------------------- printing


def _t(seconds: float) -> str:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return "0 s"


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
    cells = [[_indices_text(sorted(held[r].get(o, ())), ex.count) or "·" for o in origins] for r in range(ex.p)]
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
        lines += textwrap.wrap("the docstring says: " + paragraph, 96, initial_indent="  ", subsequent_indent="    ")
    q = int(ex.values.get("p'", 1))
    values = {"p": str(ex.p), "n": f"{ex.nbytes}B", "α": _t(ex.alpha).replace(" ", ""),
              "β": f"{ex.beta * 1e9:.4g}ns/B", "γ": f"{ex.gamma * 1e9:.4g}ns/B", "p'": str(q)}
    bandwidth = f" ({1 / ex.beta / 1e9:.4g} GB/s)" if ex.beta > 0 else ""
    lines.append(f"  with p = {ex.p}, n = {ex.nbytes} B, α = {_t(ex.alpha)}, β = {ex.beta * 1e9:.4g} ns/B{bandwidth}, "
                 f"γ = {ex.gamma * 1e9:.4g} ns/B:")
    if ex.segment is not None and "k" in ex.values:
        k, s = int(ex.values["k"]), ex.values["s"]
        values.update({"k": str(k), "s": f"{s:g}B"})
        lines += textwrap.wrap(f"segments: k = {k} of s = {s:g} B (explain cut the {ex.nbytes} B buffer into "
                               f"{ex.segment} B segments so the pipeline shows; the library's segments are much "
                               "larger)", 96, initial_indent="  ", subsequent_indent="    ")
        defined = {name: text for name, text in definitions(ex.algorithm).items() if name in ex.formula_text}
        for name, text in defined.items():
            lines.append(f"    {name} = {text} = {_t(ex.values_with_definitions[name])}")
    if ex.model_s is not None:
        formula = ex.formula
        if formula is not None:
            if formula.scope == "p not a power of two":
                lines += textwrap.wrap(f"p = {ex.p} is not a power of two: p' = {q} ranks run the power-of-two "
                                   "algorithm and the others fold in first, so the formula for that case applies:",
                                   96, initial_indent="  ", subsequent_indent="  ")
            elif formula.scope == "p = 2":
                lines += textwrap.wrap("p = 2 is a case of its own (see the cost function's docstring), so the "
                                       "formula for it applies:", 96, initial_indent="  ", subsequent_indent="  ")
            lines.append(f"    {formula.text}")
            lines.append(f"  = {substitute(formula.text, values)}")
            lines.append(f"  = {_t(ex.model_s)}   closed form" + (f"  ({formula.note})" if formula.note else ""))
        else:
            head = formulas(ex.algorithm)
            other = None
            if head:
                try:
                    other = evaluate(head[0].text, ex.values_with_definitions)
                except (FormulaError, ValueError, ZeroDivisionError):
                    lines.append(f"    {head[0].text}")
            if other is None:
                lines.append(f"  = {_t(ex.model_s)}   closed form (the cost function's value; explain cannot")
                lines.append("    substitute every symbol of this formula)")
            else:
                written = f" (written for {head[0].scope})" if head[0].scope else ""
                lines += textwrap.wrap(f"{head[0].text}{written} gives {_t(other)} here and does not apply at "
                                       f"p = {ex.p}, so no formula is printed for it:", 96,
                                       initial_indent="    ", subsequent_indent="    ")
                lines.append(f"  = {_t(ex.model_s)}   closed form: the cost function's estimate for this p, a bound")
    else:
        lines.append("  (no closed-form cost function is registered for this algorithm)")
    lines.append(f"    {_t(ex.simulated_s)}   simulated (last rank's exit - first rank's entry)"
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
    out.append(f"Network: {ex.network}, on a {ex.topology}; α = {_t(ex.alpha)} per message, "
               f"β = {ex.beta * 1e9:.4g} ns per byte, γ = {ex.gamma * 1e9:.4g} ns per byte reduced.")
    if ex.collective != "barrier":
        out.append(f"Inputs: {ex.count} int64 elements per rank; rank r holds x_r[i] = r*{ex.base} + i.")
        shown = range(ex.p) if ex.collective not in ("bcast", "scatter") else [ex.root]
        for r in shown:
            out.append(f"  x{r} = {_array(ex.inputs[r])}")
        if ex.collective in ("bcast", "scatter"):
            out.append("  (only the root's buffer matters; the others are overwritten)")
    out.append("")
    reducing = ex.collective in REDUCING
    for step in range(1, ex.steps + 1):
        msgs = [m for m in ex.messages if m.step == step]
        t0, t1 = min(m.t_post for m in msgs), max(m.t_done for m in msgs)
        out.append(f"Step {step}  ({_t(t0)} -> {_t(t1)}, {len(msgs)} message{'s' if len(msgs) != 1 else ''})")
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
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from mpisim.report.plots import plot_message_diagram

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    messages = []
    for m in ex.messages:
        label = describe_pieces(m.pieces) if m.pieces else ("token" if m.nbytes == 0 else f"{m.nbytes} B")
        messages.append({"src": m.src, "dst": m.dst, "step": m.step, "label": label})
    steps = []
    for step in range(1, ex.steps + 1):
        mine = [m for m in ex.messages if m.step == step]
        steps.append(f"{_t(min(m.t_post for m in mine))}\n-> {_t(max(m.t_done for m in mine))}")
    title = f"{ex.collective} / {ex.algorithm.name} on {ex.p} ranks: {ex.steps} steps, simulated {_t(ex.simulated_s)}"
    fig = plot_message_diagram(ex.p, messages, title=title, step_labels=steps)
    path = out / f"{ex.collective}-{ex.algorithm.name}-p{ex.p}.png"
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", metadata={"Software": None})
    return path
