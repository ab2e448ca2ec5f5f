"""Why a simulated time differs from its closed form: one specific reason an item.

The closed forms count rounds on the teaching network (the analytic model on a full topology,
one port per rank) and take blocks as equal. Where the run differs, :func:`differences` names the
network, an uneven count, or the algorithm's own reason (a binomial barrier on more than one
port, the folds at p not a power of two, a formula that is an estimate).
"""

from __future__ import annotations

from mpisim.collectives.costmodel import ceil_lg, floor_lg, pof2_at_most
from mpisim.report.tables import fmt_time
from mpisim.teaching.explain import DEFAULT_NETWORK_MODEL, Explanation

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
    if _power_of_two(p) or ex.ports == 1:
        return []
    depth, rounds = floor_lg(p), ceil_lg(p)
    return [f"The formula counts ⌈lg p⌉ = {rounds} rounds each way on one port, where the root takes its "
            f"{rounds} children's tokens one after the other; here a rank takes several at once, and the "
            f"binomial tree on p = {p} ranks is only ⌊lg p⌋ = {depth} messages deep: the barrier takes "
            f"2⌊lg p⌋α, below the formula."]


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
                       + (f" = {fmt_time(value)}." if ex.teaching and not out else "."))
        return out
    if ex.ports != 1:
        out.append("The formula is an estimate of the pipeline on one port (the algorithm's cost says so): 4 message "
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
        out.append("The formula is an estimate (the algorithm's cost says so): it counts the first segment's trip as "
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
