"""Allreduce, reduce, bcast and barrier behaviour that the registry-wide loops do not pin down.

* The classic 300M-parameter gradient sync on a star network: a parameter server's time grows
  with the number of workers, a ring allreduce's does not.
* Float32 results carry each algorithm's own summation order, bit for bit.
* Non-commutative ops come out in rank order where an algorithm claims to keep it.
* Hierarchical allreduce: right answer, and its inter-node traffic stays on the "rails"
  (between ranks with the same local rank).
* Barriers release nobody early; the pipelined algorithms really pipeline.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from mpisim.collectives import registry
from mpisim.collectives.allreduce import PS_SEGMENT, ring_cost
from mpisim.collectives.bcast import CHAIN_SEGMENT, pipelined_chain_cost
from mpisim.collectives.costmodel import ceil_lg
from mpisim.collectives.trees import double_binary_tree
from mpisim.engine.sim import Simulation
from mpisim.errors import MPIError
from mpisim.mpi import UNDEFINED, MpiConfig, SizePayload, World
from mpisim.network.models import make_model
from mpisim.network.topology import FabricSpec, TopologySpec, build_topology
from tests.collectives.helpers import AFFINE, as_array, elapsed, reference, run_collective
from tests.conftest import make_world, run_program

US = 1e-6
SHM = FabricSpec("shm", bandwidth=20e9, latency=0.3 * US)


def world_on(spec: TopologySpec, model: str = "fairshare", **mpi) -> World:
    """A world on any topology (make_world builds only full meshes)."""
    topology = build_topology(spec)
    sim = Simulation(seed=0)
    return World(sim, topology, make_model(model, sim, topology), MpiConfig(**mpi))


def star_world(p: int, bandwidth: float = 1e9, **mpi) -> World:
    """p single-rank nodes on one switch, fair-share bandwidth: one NIC link per node and direction."""
    return world_on(TopologySpec("star", nodes=p, inter=FabricSpec("star", bandwidth, 1 * US)), **mpi)


def timed_call(world: World, collective: str, algorithm: str, inputs: list, **kwargs) -> tuple[list, float]:
    """Run one synchronised collective call; return (results, last exit - first entry)."""

    def program(comm):
        yield from comm.world.synchronize(comm.world_rank)
        return (yield from getattr(comm, collective)(inputs[comm.rank], algorithm=algorithm, **kwargs))

    results = run_program(world, program)
    return results, elapsed(world)


# --- the 300M-parameter example ----------------------------------------------------------------

GRADIENTS = 300_000_000  # float32 parameters: 1.2 GB per rank
SECONDS_PER_COPY = 1.2  # 1.2 GB over a 1 GB/s NIC


@pytest.mark.parametrize("eager_limit", [64 * 1024, 2**40], ids=["default-eager", "all-eager"])
@pytest.mark.parametrize("p", [2, 4, 10])
def test_parameter_server_time_grows_linearly_with_workers(p, eager_limit):
    """(p-1) x 1.2 GB through the server's 1 GB/s link each way, the two ways overlapped: 1.2 s per worker."""
    world = star_world(p, eager_limit_inter=eager_limit)
    _, t = timed_call(world, "allreduce", "parameter_server", [SizePayload(GRADIENTS, np.float32)] * p)
    assert t == pytest.approx((p - 1) * SECONDS_PER_COPY, rel=0.02)
    assert t > (p - 1) * SECONDS_PER_COPY  # the last segment's way back cannot overlap anything


@pytest.mark.parametrize("p", [2, 4, 10])
def test_ring_time_stays_near_two_copies(p):
    """Ring allreduce moves 2(p-1)/p x 1.2 GB through every NIC: 2.16 s on 10 ranks."""
    _, t = timed_call(star_world(p), "allreduce", "ring", [SizePayload(GRADIENTS, np.float32)] * p)
    assert t == pytest.approx(2 * (p - 1) / p * SECONDS_PER_COPY, rel=0.02)


def test_parameter_server_segments_pipeline_on_the_contention_free_network_too():
    """On the analytic network a worker still sends one segment at a time (credits), so the time is per segment."""
    p, count = 3, 3 * PS_SEGMENT // 4  # three segments of PS_SEGMENT bytes
    world = make_world(p, alpha=US, bandwidth=1e9, eager_limit_inter=2**40)
    _, t = timed_call(world, "allreduce", "parameter_server", [SizePayload(count, np.float32)] * p)
    seg = US + PS_SEGMENT * 1e-9
    # segment j: out at j(seg + α), in at the server one seg later, its result back one seg after that
    assert t == pytest.approx(2 * (US + seg) + 2 * seg, rel=1e-9)


# --- float summation order ---------------------------------------------------------------------


def ring_order_sum(xs: list[np.ndarray]) -> np.ndarray:
    """Ring allreduce's float sum, MPICH's order: block b is x_(b+1) + x_(b+2) + ... + x_b, left to right.

    Blocks hold ceil(count/p) elements, the last one short (MPICH's ``allreduce_intra_ring.c``).
    In reduce-scatter step k, rank r adds the block arriving from r-1 into its own block
    (r-k-2) mod p, so block b starts at rank b+1, picks up rank b+2 in step 0, and is
    finished at rank b.
    """
    p = len(xs)
    size = -(-len(xs[0]) // p)
    blocks = [[x[i * size:(i + 1) * size] for i in range(p)] for x in xs]
    out = []
    for b in range(p):
        acc = blocks[(b + 1) % p][b]
        for i in range(2, p + 1):
            acc = acc + blocks[(b + i) % p][b]
        out.append(acc)
    return np.concatenate(out)


def pairwise_sum(xs: list[np.ndarray]) -> np.ndarray:
    """Recursive doubling's float32 sum for p a power of two: a balanced pairwise tree over the ranks."""
    if len(xs) == 1:
        return xs[0]
    half = len(xs) // 2
    return pairwise_sum(xs[:half]) + pairwise_sum(xs[half:])


@pytest.mark.parametrize("p", [4, 8])
def test_float32_sums_carry_each_algorithms_own_order(p):
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(1001).astype(np.float32) * 10.0 ** rng.integers(-3, 4) for _ in range(p)]
    ring_out, _ = run_collective("allreduce/ring", xs, p)
    rd_out, _ = run_collective("allreduce/recursive_doubling", xs, p)
    ring_ref, rd_ref = ring_order_sum(xs), pairwise_sum(xs)
    for rank in range(p):
        np.testing.assert_array_equal(as_array(ring_out[rank]), ring_ref, err_msg=f"ring, rank {rank}")
        np.testing.assert_array_equal(as_array(rd_out[rank]), rd_ref, err_msg=f"recursive doubling, rank {rank}")
    # Same numbers, different association: the last bits differ somewhere, but not by much.
    assert not np.array_equal(ring_ref, rd_ref)
    np.testing.assert_allclose(ring_ref, rd_ref, rtol=1e-4, atol=1e-3)


# --- non-commutative ops -----------------------------------------------------------------------


def rank_order(xs: list[np.ndarray]) -> np.ndarray:
    return functools.reduce(AFFINE, xs)


@pytest.mark.parametrize(("target", "p", "root"), [
    ("reduce/linear", 5, 3),
    ("reduce/binomial", 6, 0),
    ("reduce/binomial", 7, 4),  # non-commutative: tree at rank 0, then on to the root
    ("allreduce/recursive_doubling", 8, 0),
    ("allreduce/recursive_doubling", 11, 0),  # with the fold of ranks 0..5
    ("allreduce/reduce_bcast", 6, 0),
    ("allreduce/parameter_server", 5, 0),
])
def test_non_commutative_op_comes_out_in_rank_order(target, p, root):
    """Composition of affine maps: x0 op x1 op ... op x(p-1), and no other order gives the same."""
    rng = np.random.default_rng(p)
    xs = [rng.integers(0, 2**32, 64, dtype=np.int64) for _ in range(p)]
    expected = rank_order(xs)
    assert not np.array_equal(expected, rank_order(xs[::-1]))  # the test can fail
    outputs, _ = run_collective(target, xs, p, op=AFFINE, root=root)
    for rank, out in enumerate(outputs):
        if target.startswith("reduce/") and rank != root:
            assert out is None
        else:
            np.testing.assert_array_equal(as_array(out), expected, err_msg=f"{target}, rank {rank}")


# --- Rabenseifner off powers of two --------------------------------------------------------------


@pytest.mark.parametrize(("target", "p", "root"), [
    ("reduce/rabenseifner", 6, 0),
    ("reduce/rabenseifner", 6, 3),  # ranks 1 and 3 fold into 0 and 2; the root is one of them
    ("reduce/rabenseifner", 12, 1),
    ("allreduce/rabenseifner", 6, 0),
    ("allreduce/rabenseifner", 12, 0),
])
def test_rabenseifner_off_powers_of_two_equals_its_closed_form(target, p, root):
    """The fold costs α + nβ + nγ, the allreduce's unfold α + nβ; a root that folded costs nothing extra."""
    collective, name = target.split("/")
    count, alpha, beta, gamma = 8 * 1024, US, 1e-9, 1e-10
    _, world = run_collective(target, [SizePayload(count, np.float32)] * p, p, root=root, alpha=alpha,
                              bandwidth=1 / beta, reduce_cost=gamma, eager_limit_inter=2**40)
    cost = registry.get(collective, name).cost(p, count * 4, alpha, beta, gamma)
    assert elapsed(world) == pytest.approx(cost, rel=1e-9)


@pytest.mark.parametrize("root", range(9))
def test_rabenseifner_reduce_cost_bounds_every_root(root):
    """Off powers of two the reduce's closed form is an upper bound: some gather trees wait less for the fold."""
    p, count = 9, 8 * 1024
    _, world = run_collective("reduce/rabenseifner", [SizePayload(count, np.float32)] * p, p, root=root,
                              alpha=US, bandwidth=1e9, reduce_cost=1e-10, eager_limit_inter=2**40)
    cost = registry.get("reduce", "rabenseifner").cost(p, count * 4, US, 1e-9, 1e-10)
    assert 0.6 * cost < elapsed(world) <= cost * (1 + 1e-9)


# --- hierarchical allreduce --------------------------------------------------------------------


@pytest.mark.parametrize("placement", ["block", "round_robin"])
@pytest.mark.parametrize(("nodes", "per_node"), [(2, 2), (2, 4), (3, 3), (4, 2), (4, 4)])
def test_hierarchical_matches_numpy_and_talks_between_nodes_only_along_rails(nodes, per_node, placement):
    spec = TopologySpec("cluster", nodes=nodes, ranks_per_node=per_node, intra=SHM,
                        inter=FabricSpec("star", 10e9, 2 * US), placement=placement)
    world = world_on(spec)
    p = nodes * per_node
    rng = np.random.default_rng(p)
    xs = [rng.integers(-(2**31), 2**31, 37, dtype=np.int32) for _ in range(p)]  # 37: uneven blocks
    outputs, _ = timed_call(world, "allreduce", "hierarchical", xs)
    for rank, out in enumerate(outputs):
        np.testing.assert_array_equal(out, reference("allreduce", xs)[rank], err_msg=f"rank {rank}")
    topo = world.topology
    crossing = [m for m in world.tracer.messages if topo.node_of(m.src) != topo.node_of(m.dst)]
    assert crossing, "the nodes must exchange something"
    assert all(topo.local_rank(m.src) == topo.local_rank(m.dst) for m in crossing)
    # Each rank's inter-node share is its block: about n/q, not n (37 int32 over q ranks).
    assert max(m.nbytes for m in crossing) <= -(-37 // per_node) * 4


def test_hierarchical_with_one_rank_per_node_is_the_ring():
    """On a flat network it is a ring allreduce among all ranks: the ring's closed form, exactly."""
    p, count = 6, 6 * 1024
    world = make_world(p, alpha=US, bandwidth=1e9, reduce_cost=1e-10, eager_limit_inter=2**40)
    _, t = timed_call(world, "allreduce", "hierarchical", [SizePayload(count, np.float32)] * p)
    assert t == pytest.approx(ring_cost(p, count * 4, US, 1e-9, 1e-10), rel=1e-9)


def test_hierarchical_refuses_nodes_with_different_rank_counts():
    """A communicator with 2 ranks on node 0 and 1 on node 1 cannot be split into equal rails."""
    world = make_world(4, ranks_per_node=2, intra=SHM)

    def program(comm):
        sub = yield from comm.split(0 if comm.rank < 3 else UNDEFINED)
        if sub is not None:
            yield from sub.allreduce(np.ones(4, np.int32), algorithm="hierarchical")

    with pytest.raises(MPIError, match=r"same number of ranks on every node.*node 0: 2, node 1: 1"):
        run_program(world, program)


# --- barrier -----------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["dissemination", "binomial"])
@pytest.mark.parametrize("p", [2, 3, 6, 8, 9])
def test_barrier_holds_everyone_until_the_last_arrives(algorithm, p):
    """Ranks enter 10 us apart, in scrambled order; each leaves only after the latest entry."""
    delays = np.random.default_rng(p).permutation(p) * 10 * US
    exits = {}

    def program(comm):
        yield from comm.compute(float(delays[comm.rank]))
        yield from comm.barrier(algorithm=algorithm)
        exits[comm.rank] = comm.now

    run_program(make_world(p, alpha=US), program)
    last, last_entry = int(delays.argmax()), delays.max()
    # The last rank to enter may leave at once; everyone else needs a message that it caused.
    assert exits[last] >= last_entry
    assert all(t >= last_entry + US * (1 - 1e-9) for r, t in exits.items() if r != last)
    rounds = ceil_lg(p) if algorithm == "dissemination" else 2 * ceil_lg(p)
    assert max(exits.values()) <= last_entry + rounds * US * (1 + 1e-9)


# --- pipelining --------------------------------------------------------------------------------


@pytest.mark.parametrize("eager_limit", [64 * 1024, 2**40], ids=["rendezvous-segments", "eager-segments"])
def test_pipelined_chain_pipelines_on_a_shared_network(eager_limit):
    """On a fair-share star the chain is within 1% of (p-1+k-1)(α+sβ) + credits, far below (p-1)(α+nβ)."""
    p, count = 6, 2_000_000  # 8 MB in 31 segments
    world = star_world(p, eager_limit_inter=eager_limit)
    _, t = timed_call(world, "bcast", "pipelined_chain", [SizePayload(count, np.float32)] * p, root=2)
    n = count * 4
    assert t == pytest.approx(pipelined_chain_cost(p, n, US, 1e-9, 0.0), rel=0.01)
    assert t < 0.3 * (p - 1) * n * 1e-9
    assert n // CHAIN_SEGMENT > 10


def test_double_binary_tree_trees_complement_each_other():
    """NCCL's two trees: consistent parent/child links, depth ⌈lg p⌉, and no rank a leaf in both (p even)."""
    for p in range(2, 40):
        leaves = []
        for t in (0, 1):
            links = [double_binary_tree(p, r)[t] for r in range(p)]
            assert [r for r, (parent, _) in enumerate(links) if parent is None] == [0 if t == 0 else links_root(p)]
            for r, (parent, children) in enumerate(links):
                assert all(links[c][0] == r for c in children)
                assert parent is None or r in links[parent][1]
            assert max(depth(links, r) for r in range(p)) == ceil_lg(p)
            leaves.append({r for r, (_, children) in enumerate(links) if not children})
        if p % 2 == 0:
            assert not leaves[0] & leaves[1], f"p={p}"


def links_root(p: int) -> int:
    """Tree 1's root: rank 0's place mirrored (p even) or shifted by one (p odd)."""
    return p - 1 if p % 2 == 0 else 1


def depth(links: list, r: int) -> int:
    d = 0
    while links[r][0] is not None:
        r, d = links[r][0], d + 1
    return d


def test_double_binary_tree_pipelines_its_segments():
    """16 MiB on 8 ranks: each half crosses its tree in 512 KiB segments, in about one copy time.

    Unpipelined, each half would climb and descend 3 levels whole: 6 x (n/2)β = 3nβ.
    Each half must cross at least one link, so (n/2)β is a floor. Where a rank's parent in one
    tree is its child in the other, one link carries both halves' segments, so about nβ: the
    pipeline costs little beyond that (within 10 %).
    """
    p, count = 8, 2**22
    _, t = timed_call(make_world(p, alpha=US, bandwidth=1e9, eager_limit_inter=2**40), "allreduce",
                      "double_binary_tree", [SizePayload(count, np.float32)] * p)
    n_beta = count * 4 * 1e-9
    assert n_beta / 2 < t < 1.1 * n_beta


# --- MPICH's ring and auto selection (checked against MPICH 5 with mpi4py) --------------------


def test_ring_allreduce_sums_in_mpichs_order_smallest_case():
    """MPICH's ring gives [1, 0, 0] here: block b's sum starts at rank b+1 (1e16 - 1e16 + 1 = 1)."""
    xs = [np.ones(3), np.full(3, 1e16), np.full(3, -1e16)]
    out, _ = run_collective("allreduce/ring", xs, 3)
    for rank in range(3):
        np.testing.assert_array_equal(as_array(out[rank]), [1.0, 0.0, 0.0])


def test_ring_allreduce_cuts_blocks_of_ceil_count_over_p():
    """7 elements on 3 ranks: MPICH's blocks are 3, 3, 1 (np.array_split would cut 3, 2, 2)."""
    big, small = 1e16, 1.0
    # Element 5 is in block 1 under MPICH's cut and in block 2 under array_split's: the two
    # blocks start their sums at different ranks, which decides whether the 1 survives.
    xs = [np.full(7, small), np.full(7, big), np.full(7, -big)]
    out, _ = run_collective("allreduce/ring", xs, 3)
    expected = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(as_array(out[0]), expected)


@pytest.mark.parametrize(("dtype", "count", "expected"), [
    (np.float64, 4, "recursive_doubling"),   # 4 elements < pof2(8): MPICH refuses Rabenseifner
    (np.float32, 4, "recursive_doubling"),
    (np.float64, 8, "rabenseifner"),
    (np.float32, 8, "rabenseifner"),
])
def test_auto_counts_elements_with_the_dtypes_size(dtype, count, expected):
    _, world = run_collective("allreduce/auto", [np.ones(count, dtype) for _ in range(8)], 8)
    assert {r.algorithm for r in world.tracer.collectives} == {expected}


# --- bfloat16 and fp8 ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_low_precision_sums_round_at_every_step_of_the_algorithms_order(dtype):
    """As NCCL's kernels do: each pairwise add is rounded to the narrow type, not accumulated in fp32."""
    import mpisim.mpi.dtypes  # noqa: F401  (registers the ml_dtypes names with numpy)

    rng = np.random.default_rng(3)
    p = 4
    xs = [rng.standard_normal(203).astype(np.dtype(dtype)) for _ in range(p)]
    out, _ = run_collective("allreduce/ring", xs, p)
    stepwise = ring_order_sum(xs)
    assert stepwise.dtype == np.dtype(dtype)
    for rank in range(p):
        np.testing.assert_array_equal(as_array(out[rank]).view(np.uint8), stepwise.view(np.uint8))
    once = sum(x.astype(np.float32) for x in xs).astype(np.dtype(dtype))  # fp32 accumulation, rounded once
    assert not np.array_equal(stepwise.view(np.uint8), once.view(np.uint8))


@pytest.mark.parametrize(("name", "itemsize"), [("bf16", 2), ("bfloat16", 2), ("float8_e4m3", 1), ("fp8_e5m2", 1)])
def test_scenarios_accept_bf16_and_fp8(name, itemsize):
    from mpisim.workloads.collective import parse

    params = parse({"collective": "allreduce", "sizes": ["1 MiB"], "dtype": name})
    assert np.dtype(params.dtype).itemsize == itemsize
