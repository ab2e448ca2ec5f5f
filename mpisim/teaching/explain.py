"""Run one collective algorithm on small integer arrays and explain it step by step.

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
   binomial barrier on more than one port, the folds at p not a power of two, a formula that is
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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import mpisim.collectives  # noqa: F401  (registers every algorithm)
from mpisim.collectives import registry
from mpisim.collectives.dispatch import size_of_call
from mpisim.collectives.select import network_parameters
from mpisim.engine.sim import Simulation
from mpisim.engine.trace import Tracer
from mpisim.errors import ConfigError
from mpisim.mpi.payload import Payload
from mpisim.network.models import make_model
from mpisim.network.presets import resolve_topology
from mpisim.network.topology import build_topology
from mpisim.scenario.load import load_dict
from mpisim.teaching.decoding import decode, encode, reference
from mpisim.teaching.formulas import Formula, applicable_formula, formulas, pof2_below, with_definitions
from mpisim.teaching.rounds import Round, rounds_of
from mpisim.teaching.segments import SEGMENTED, chosen_segment, segment_size
from mpisim.teaching.steps import Message, ObservedWorld, assign_steps, observed_messages

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


def network_raw(topology: str | dict[str, Any] | None, network: str | None, p: int,
                 ports: int | None = None) -> dict[str, Any]:
    """Return the scenario keys ``topology`` and ``network`` of an explanation on *p* ranks."""
    spec: dict[str, Any] = {"model": network or DEFAULT_NETWORK_MODEL}
    ports = DEFAULT_PORTS if ports is None else ports
    if ports:  # 0: no limit, every message of a rank may be in flight at once
        spec["ports"] = ports
    return {"topology": topology_raw(topology, p), "network": spec}




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
        return with_definitions(self.algorithm, self.values)

    @property
    def rounds(self) -> list[Round]:
        """The rounds (:mod:`.rounds`): the run's critical path, when each message leaves, what each round pays."""
        hop = (self.alpha, self.beta) if self.model == "analytic" else None  # α + nβ exactly per message
        return rounds_of(self.messages, single_port=self.ports == 1, hop=hop)

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


def topology_raw(topology: str | dict[str, Any] | None, p: int) -> Any:
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


def _run(world: ObservedWorld, collective: str, algorithm: str, inputs: list[np.ndarray], root: int) -> list[Any]:
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
        **network_raw(topology, network, ranks, ports),
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

    def new_world() -> ObservedWorld:
        sim = Simulation(scenario, seed=scenario.seed, tracer=Tracer(messages=True, spans=True))
        topo = build_topology(scenario.topology)
        return ObservedWorld(sim, topo, make_model(scenario.network.model, sim, topo, scenario.network.ports), scenario.mpi)

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
    messages = observed_messages(world)
    decoded = ranks <= MAX_DECODED_RANKS
    notes = []
    if decoded:
        coded = new_world()
        _run(coded, collective, algorithm, encode(ranks, count), root)
        coded_messages = observed_messages(coded)
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
