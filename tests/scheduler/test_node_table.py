"""The node table's parsing and bookkeeping, where a slip would not show in a placement until much later:
timestamps and bandwidths as agents write them, nodes that never reported, label values read as numbers,
image sizes, taints written with a null value."""

from __future__ import annotations

import math

import pytest

from corral.scheduler.cache.node_table import NodeTable, parse_bandwidth, parse_timestamp
from corral.testing.builders import make_node


@pytest.mark.parametrize("value, seconds", [
    pytest.param("2026-11-23T10:00:00Z", 1795428000.0, id="RFC 3339 in UTC"),
    pytest.param("2026-11-23T11:00:00+01:00", 1795428000.0, id="with an offset"),
    pytest.param("2026-11-23T10:00:00.250000Z", 1795428000.25, id="with microseconds"),
    pytest.param("yesterday", 0.0, id="malformed: 0, as if never"),
    pytest.param("", 0.0, id="empty"),
    pytest.param(None, 0.0, id="missing"),
])
def test_timestamps_as_agents_and_kubernetes_write_them(value, seconds):
    assert parse_timestamp(value) == seconds


@pytest.mark.parametrize("value, bps", [
    pytest.param("940Mbps", 9.4e8, id="Mbps"),
    pytest.param(" 1.5 Gbit/s ", 1.5e9, id="Gbit/s with spaces"),
    pytest.param("800", 800.0, id="a bare number is bits per second"),
    pytest.param("fast", math.nan, id="malformed: unknown"),
    pytest.param("", math.nan, id="empty: unknown"),
    pytest.param(None, math.nan, id="missing: unknown"),
])
def test_bandwidths_as_agents_measure_them(value, bps):
    got = parse_bandwidth(value)
    assert (math.isnan(got) and math.isnan(bps)) or got == pytest.approx(bps)


def test_a_node_that_never_reported_its_condition_is_not_ready():
    table = NodeTable()
    node = make_node("silent").obj
    node["status"]["conditions"] = []
    row = table.set_node(node)
    assert (bool(table.ready[row]), float(table.heartbeat[row])) == (False, 0.0)


def test_label_values_are_read_back_by_code_and_as_numbers_after_new_values_arrive():
    table = NodeTable()
    table.set_node(make_node("a").label("generation", "3").obj)
    table.set_node(make_node("b").label("generation", "v2").obj)
    labels = table.labels
    assert [labels.value("generation", c) for c in range(4)] == [None, "3", "v2", None]
    assert labels.value("no-such-key", 1) is None
    assert labels.numeric("generation")[:2].tolist() == [3.0, pytest.approx(math.nan, nan_ok=True)]
    table.set_node(make_node("c").label("generation", "-7").obj)  # a new value: the numbers are read again
    assert labels.numeric("generation")[2] == -7.0


def test_image_sizes_keep_the_largest_report_and_ignore_images_without_a_size():
    table = NodeTable()
    table.set_node(make_node("a").image("app:1", 500).obj)
    table.set_node(make_node("b").image("app:1", 300).obj)
    unsized = make_node("c").obj
    unsized["status"]["images"] = [{"names": ["mystery:1"]}]
    table.set_node(unsized)
    assert table.image_sizes == {"app:1": 500}
    assert bool(table.images["mystery:1"][table.row_of["c"]])


def test_a_taint_with_a_null_value_is_the_taint_without_one():
    table = NodeTable()
    node = make_node("a").obj
    node["spec"]["taints"] = [{"key": "dedicated", "value": None, "effect": "NoSchedule"}]
    table.set_node(node)
    assert table.taint_list == [("", "", ""), ("dedicated", "", "NoSchedule")]
