"""What ``mpisim list`` shows: every catalogue's rows, each column readable from every row."""

import pytest

from mpisim.collectives import registry
from mpisim.network.presets import list_presets
from mpisim.scenario.catalog import CATALOGUES, catalogue


@pytest.mark.parametrize("what", CATALOGUES)
def test_every_column_reads_every_row(what):
    items, columns = catalogue(what)
    assert items
    for item in items:
        assert all(isinstance(header, str) for header, _ in columns)
        assert [getter(item) for _, getter in columns]  # no KeyError: the table and the JSON hold the same facts


def test_catalogues_list_what_the_registries_hold():
    names = {item["name"] for item in catalogue("topologies")[0]}
    assert names == {name for name, _ in list_presets()}
    algorithms = {(item["collective"], item["algorithm"]): item for item in catalogue("algorithms")[0]}
    assert set(algorithms) == {(a.collective, a.name) for a in registry.available()}
    needs_switch = {key for key, item in algorithms.items() if item["gpu"] == "only"}
    assert needs_switch == {(a.collective, a.name) for a in registry.available() if "in_switch_reduction" in a.requires}
    assert needs_switch  # NVLS: a switch that reduces
