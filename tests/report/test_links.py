"""Link reporting names the bottleneck by utilisation and link class, never by bytes alone."""

from __future__ import annotations

from types import SimpleNamespace

from matplotlib.container import BarContainer

from mpisim.network.analytic import LinkStats
from mpisim.report import plots
from mpisim.report.findings import link_findings
from mpisim.report.records import RunResult, WorldRecords
from mpisim.report.render import csv_tables, link_worlds
from mpisim.report.tables import link_class, link_table
from mpisim.scenario import load_dict, run_scenario
from mpisim.scenario.observe import link_totals

NVLINK, NIC = 369e9, 47e9


def gpu_world() -> WorldRecords:
    """A GPU node's shape: 32 NVLink ports carrying 2 GB each, 4 NICs carrying 0.45 GB each, 10 ms run.

    The NVLink ports carry four times the bytes of a NIC but are busy 54 % of the run at full
    rate; the NICs, at an eighth of the rate, 96 %: they bound the run.
    """
    totals = [{"link": f"node0.nvswitch->rank{r}", "kind": "nvlink", "nbytes": 2 * 10**9, "busy_s": 5.4e-3,
               "capacity_Bps": NVLINK} for r in range(32)]
    totals += [{"link": f"node{n}.nic0->rail0.leaf0", "kind": "net", "nbytes": 451 * 10**6, "busy_s": 9.6e-3,
                "capacity_Bps": NIC} for n in range(4)]
    totals.append({"link": "rail0.leaf0->spine0", "kind": "net", "nbytes": 10**8, "busy_s": 3e-3, "capacity_Bps": NIC})
    return WorldRecords(label="rabenseifner 1 GiB", t_end=10e-3, link_totals=totals)


def test_link_classes_from_kind_and_name():
    assert link_class("node0.nvswitch->rank3", "nvlink") == "NVLink"
    assert link_class("node0.nic0->rail0.leaf0", "net") == "NIC"
    assert link_class("rail0.leaf0->spine1", "net") == "spine"
    assert link_class("node1.pcie->rank0") == "PCIe"  # older results: by name


def test_links_are_ranked_by_utilisation_and_every_class_is_kept():
    uses = link_table(gpu_world(), 16)
    assert [u.kind for u in uses[:4]] == ["NIC"] * 4, "the NICs are the most utilised, although they carry fewer bytes"
    assert uses[0].utilisation > 0.95
    assert {u.kind for u in uses} == {"NIC", "NVLink", "spine"}, "the spine cable must not be cut by 32 NVLink ports"
    assert len(uses) == 16


def test_findings_name_the_class_that_bounds_the_run():
    text = link_findings(gpu_world())[0]
    assert text.startswith("**NIC links bound rabenseifner 1 GiB:** `node0.nic0->rail0.leaf0` (NIC)"), text
    assert "saturated" in text and "NVLink `node0.nvswitch->rank0` 54.2 %" in text, text


def test_link_figure_draws_one_bar_per_link_coloured_by_class():
    fig = plots.plot_links(gpu_world(), top=16)
    bars = [c for ax in fig.axes for c in ax.containers if isinstance(c, BarContainer)]
    assert len(bars) == 1 and len(bars[0]) == 16, "one bar per link, not two identical ones"
    colours = {tuple(round(v, 3) for v in patch.get_facecolor()) for patch in bars[0]}
    assert len(colours) == 3, "NIC, NVLink and spine bars differ in colour"
    legend_texts = {t.get_text() for legend in fig.legends for t in legend.get_texts()}
    assert {"NIC", "NVLink", "spine"} <= legend_texts


def test_links_csv_holds_class_and_utilisation():
    result = RunResult(scenario={"name": "x"}, records=[gpu_world()])
    lines = csv_tables(result)["links.csv"].splitlines()
    assert lines[0] == "world,link,class,nbytes,busy_s,capacity_Bps,utilisation"
    assert lines[1].startswith("rabenseifner 1 GiB,node0.nic0->rail0.leaf0,NIC,451000000,")


def test_link_totals_keep_every_class_under_the_cut():
    """The per-world cut keeps the NICs even when NVLink ports outnumber and out-carry them."""
    links = [SimpleNamespace(name=f"node0.nvswitch->rank{r}", kind="nvlink") for r in range(64)]
    links += [SimpleNamespace(name="node0.nic0->rail0.leaf0", kind="net")]
    stats = {link.name: LinkStats(link.name, 10**9, 1e-3, NVLINK) for link in links[:-1]}
    stats[links[-1].name] = LinkStats(links[-1].name, 10**6, 1e-4, NIC)
    world = SimpleNamespace(network=SimpleNamespace(link_stats=lambda: stats), topology=SimpleNamespace(links=links))
    kept = link_totals(world, limit=16)
    assert len(kept) == 16
    assert any(t["link"] == "node0.nic0->rail0.leaf0" and t["kind"] == "net" for t in kept)


def test_every_algorithm_of_a_list_gets_a_link_figure():
    raw = {"name": "five", "topology": {"nodes": 4, "inter": {"kind": "star", "bandwidth": "10 GB/s", "latency": "2 us"}},
           "payload": "size",
           "workload": {"kind": "collective", "collective": "allreduce",
                        "algorithm": ["ring", "recursive_doubling", "rabenseifner", "reduce_bcast", "parameter_server"],
                        "sizes": ["64 KiB"]}}
    result = run_scenario(load_dict(raw))
    labels = {result.records[i].label.split(" ")[0] for i in link_worlds(result)}
    assert labels == {"ring", "recursive_doubling", "rabenseifner", "reduce_bcast", "parameter_server"}
