"""The node table's parsing and bookkeeping, where a slip would not show in a placement until much later:
timestamps and bandwidths as agents write them, nodes that never reported, label values read as numbers,
image sizes, taints written with a null value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from corral.scheduler.cache.node_table import LabelColumns, NodeTable, parse_bandwidth, parse_timestamp
from corral.scheduler.framework.podinfo import PodInfo
from corral.testing.builders import make_node, make_pod


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
    assert (labels.code("no-such-key", "3"), labels.code("generation", "9")) == (-1, -1)  # matches no node
    assert labels.codes("no-such-key", ["3"]).tolist() == [] and labels.codes("generation", ["v2"]).tolist() == [2]
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


def test_a_taint_with_a_null_or_missing_field_is_the_taint_with_that_field_empty():
    table = NodeTable()
    node = make_node("a").obj
    node["spec"]["taints"] = [{"key": "dedicated", "value": None, "effect": "NoSchedule"},
                              {"key": "gpu", "effect": "NoExecute"}, {"effect": "NoSchedule"}, {"key": "bare"}]
    table.set_node(node)
    assert table.taint_list == [("", "", ""), ("dedicated", "", "NoSchedule"), ("gpu", "", "NoExecute"),
                                ("", "", "NoSchedule"), ("bare", "", "")]
    assert table.taints[table.row_of["a"]].tolist() == [1, 2, 3, 4]


def test_a_taint_is_one_code_however_many_nodes_carry_it_and_however_often_they_report():
    """TaintToleration checks a pod against each distinct taint once: heartbeats must not add codes."""
    table = NodeTable()
    for beat in range(5):
        for name in ("a", "b"):
            table.set_node(make_node(name).taint("dedicated", "db").heartbeat_at(f"2026-12-03T10:00:0{beat}Z").obj)
    assert table.taint_list == [("", "", ""), ("dedicated", "db", "NoSchedule")]
    assert [table.taints[table.row_of[n]].tolist() for n in ("a", "b")] == [[1], [1]]


def test_quantities_are_counted_exactly_to_the_byte_even_at_exabytes():
    """kube-scheduler counts in int64: a float column would round 4Ei − 1 up to 4Ei."""
    table = NodeTable()
    row = table.set_node(make_node("big").capacity(cpu="4", memory="4Ei", pods="110",
                                                   ephemeral_storage="4Ei").obj)
    pod = make_pod("p").requests(memory="1", ephemeral_storage="1").obj
    requests = PodInfo.from_object(pod).requests
    table.add_requests(row, requests, (), +1)
    assert int(table.free["memory"][row]) == 2**62 - 1 == int(table.free["ephemeral-storage"][row])
    assert int(table.requested["memory"][row]) == 1
    huge = make_pod("q").requests(memory=str(2**62 - 3)).obj  # 2 bytes short of what is left...
    table.add_requests(row, PodInfo.from_object(huge).requests, (), +1)
    assert int(table.free["memory"][row]) == 2 and int(table.nonzero_memory[row]) == 2**62 - 2
    table.add_requests(row, requests, (), -1)  # ...and the first pod's byte comes back exactly
    assert int(table.free["memory"][row]) == 3 and int(table.requested["memory"][row]) == 2**62 - 3
    odd = table.set_node(make_node("odd").capacity(cpu=f"{2**53 + 1}m", memory=str(2**62 + 1), pods="110").obj)
    assert int(table.allocatable["memory"][odd]) == 2**62 + 1 == int(table.free["memory"][odd])
    table.add_requests(odd, PodInfo.from_object(make_pod("o").requests(cpu=f"{2**53 + 1}m").obj).requests, (), +1)
    assert int(table.nonzero_cpu[odd]) == 2**53 + 1 and int(table.free["cpu"][odd]) == 0
    gpu = make_node("big").capacity(cpu="4", memory="4Ei", pods="110", **{"example.com/units": "4Ei"}).obj
    row = table.set_node(gpu)  # an extended resource's column is int64 too
    table.add_requests(row, PodInfo.from_object(make_pod("u").requests(**{"example.com/units": "1"}).obj).requests,
                       (), +1)
    assert int(table.free["example.com/units"][row]) == 2**62 - 1


def test_a_node_reporting_only_capacity_offers_its_capacity():
    table = NodeTable()
    node = make_node("a").obj
    del node["status"]["allocatable"]
    row = table.set_node(node)
    assert (int(table.allocatable["cpu"][row]), int(table.free["pods"][row])) == (4000, 110)


def test_a_malformed_quantity_is_skipped_and_the_rest_still_read():
    table = NodeTable()
    node = make_node("a").obj
    node["status"]["allocatable"] = {"cpu": "lots", "memory": "1Gi", "pods": "10"}
    row = table.set_node(node)
    assert [int(table.allocatable[r][row]) for r in ("cpu", "memory", "pods")] == [0, 2**30, 10]


def test_a_tiny_node_divides_by_its_own_allocatable():
    table = NodeTable()
    row = table.set_node(make_node("tiny").capacity(cpu="1m", memory="0", pods="1").obj)
    assert (table.alloc_safe_f["cpu"][row], table.alloc_safe_f["memory"][row]) == (1.0, 1.0)


def test_columns_grow_past_their_first_capacity_keeping_every_row():
    table = NodeTable(capacity=2)
    assert np.isnan(table.labels.numeric("no-such-key")).all()
    for i in range(5):
        table.set_node(make_node(f"n{i}").label("rank", str(i)).taint("t", str(i)).image(f"img:{i}", 10).obj)
    assert table.capacity == 8 and len(table.names) == len(table.objects) == 8
    for i in range(5):
        row = table.row_of[f"n{i}"]
        assert table.labels.value("rank", int(table.labels.column("rank")[row])) == str(i)
        assert table.taint_list[int(table.taints[row, 0])] == ("t", str(i), "NoSchedule")
        assert bool(table.images[f"img:{i}"][row])
    assert table.labels.numeric("rank")[:5].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    absent = table.labels.numeric("no-such-key")  # a key no node has: NaN on every row, after growth too
    assert len(absent) == 8 and np.isnan(absent).all()
    assert table.labels.codes("rank", ["3", "9", "1"]).tolist() == [4, 2]


def test_the_change_log_names_each_changed_row_and_a_new_epoch_what_no_row_describes():
    """What remembered decisions rely on: a heartbeat, a label, a cordon or a pod counted changes one
    row; a node joining, leaving or resized, or a new resource column, starts a new epoch."""
    table = NodeTable()
    for name in ("a", "b", "c"):
        table.set_node(make_node(name).capacity(cpu=4, memory="8Gi", pods=10).obj)
    epoch, tick = table.epoch, table.tick
    table.set_node(make_node("b").capacity(cpu=4, memory="8Gi", pods=10).zone("z9").unschedulable().obj)
    pod = PodInfo.from_object(make_pod("p").requests(cpu="1").obj)
    table.add_requests(table.row_of["c"], pod.requests, pod.host_ports, +1)
    table.add_requests(table.row_of["c"], pod.requests, pod.host_ports, -1)
    assert table.epoch == epoch
    assert table.changed_since(tick) == [table.row_of["b"], table.row_of["c"], table.row_of["c"]]
    for change in (
        lambda: table.set_node(make_node("d").capacity(cpu=4, memory="8Gi", pods=10).obj),  # joins
        lambda: table.set_node(make_node("a").capacity(cpu=8, memory="8Gi", pods=10).obj),  # resized
        lambda: table.set_node(make_node("c").capacity(cpu=4, memory="8Gi").obj),  # stops reporting pods
        lambda: table.remove_node("a"),
        lambda: table.add_requests(table.row_of["b"], PodInfo.from_object(
            make_pod("g").requests(**{"example.com/gpu": "1"}).obj).requests, (), +1),  # a new column
    ):
        epoch = table.epoch
        change()
        assert table.epoch > epoch and table.changed_since(table.tick) == []


def test_the_change_log_holds_4096_changes_and_four_a_row_then_starts_a_new_epoch():
    """Bounded: past 4096 changes and four per row, answers start over (cheaper than reading back a
    long log); until then every change is there to read."""
    table = NodeTable()
    for name in ("a", "b"):
        table.set_node(make_node(name).capacity(cpu=4, memory="8Gi", pods=10).obj)
    pod = PodInfo.from_object(make_pod("p").requests(cpu="1").obj)
    epoch, tick = table.epoch, table.tick
    for i in range(4096 + 4 * 2):
        table.add_requests(0, pod.requests, (), -1 if i % 2 else +1)
    assert table.epoch == epoch and len(table.changed_since(tick)) == 4104
    table.add_requests(1, pod.requests, (), +1)
    assert table.epoch == epoch + 1 and table.changed_since(table.tick) == []
    for _ in range(5000):  # and so on, however long it runs
        table.add_requests(0, pod.requests, (), +1)
        table.add_requests(0, pod.requests, (), -1)
    assert table.epoch > epoch + 1 and len(table.changed_since(table.tick - 10)) == 10


def test_whether_every_node_offers_a_resource_follows_each_change_of_a_node():
    """Remembered per table version: node a's GPUs taken away and given back, step after step (the
    version passes every small number, the row count among them), is seen at each step."""
    table = NodeTable()
    gpus = lambda name, n: make_node(name).capacity(cpu=4, memory="8Gi", pods=10).allocatable(  # noqa: E731
        **{"example.com/gpu": n}).obj
    table.set_node(gpus("a", 1))
    table.set_node(gpus("b", 1))
    table.set_node(gpus("c", 1))
    answers = []
    for step in range(8):
        table.set_node(gpus("a", step % 2))
        answers.append(table.offered_everywhere("example.com/gpu"))
    assert answers == [False, True] * 4


def test_an_extended_resource_is_counted_in_the_units_a_pod_asks_for():
    """Three of a node's four GPUs taken leave one free, and giving them back leaves four."""
    table = NodeTable()
    row = table.set_node(make_node("a").capacity(cpu=4, memory="8Gi", pods=10, **{"example.com/gpu": 4}).obj)
    pod = PodInfo.from_object(make_pod("p").requests(**{"example.com/gpu": "3"}).obj)
    free = lambda: (int(table.free["example.com/gpu"][row]), int(table.requested["example.com/gpu"][row]))  # noqa: E731
    table.add_requests(row, pod.requests, (), +1)
    assert free() == (1, 3)
    table.add_requests(row, pod.requests, (), -1)
    assert free() == (4, 0)


def test_a_label_value_is_shared_exactly_while_two_or_more_nodes_hold_it():
    """What anti-affinity's row-local shortcut relies on: one_per_node(key) is false while any value of
    the key is held by two rows, and set_row says True exactly when that answer flips."""
    labels = LabelColumns(8)
    zone = lambda value: {"zone": value}  # noqa: E731
    assert labels.one_per_node("zone") and labels.set_row(0, {}, zone("a")) is False
    assert labels.set_row(1, {}, zone("b")) is False and labels.one_per_node("zone")
    assert labels.set_row(2, {}, zone("a")) is True and not labels.one_per_node("zone")  # a: 1 → 2
    assert labels.set_row(3, {}, zone("a")) is False  # a: 2 → 3, shared already
    assert labels.set_row(4, {}, zone("b")) is False  # b shared too
    assert labels.set_row(3, zone("a"), {}) is False  # a: 3 → 2, still shared
    assert labels.set_row(2, zone("a"), zone("c")) is False  # a: 2 → 1, but b is still shared
    assert not labels.one_per_node("zone")
    assert labels.set_row(4, zone("b"), {}) is True and labels.one_per_node("zone")  # b: 2 → 1
    assert labels.set_row(2, zone("c"), zone("a")) is True and not labels.one_per_node("zone")
    assert labels.set_row(0, zone("a"), zone("d")) is True and labels.one_per_node("zone")  # left a
    assert [int(c) for c in labels.column("zone")[:5]] == [labels.code("zone", v) for v in "dba"] + [0, 0]
    assert labels.one_per_node("rack")  # a key no node has


def test_a_flip_of_one_key_is_reported_whatever_the_other_keys_of_the_same_change_do():
    """One set_row changing several keys reports a flip made by any of them, first or last: removed keys,
    a value left, a value taken."""
    labels = LabelColumns(4)
    labels.set_row(0, {}, {"zone": "a", "rack": "r1", "disk": "ssd"})
    labels.set_row(1, {}, {"zone": "a", "rack": "r2", "disk": "ssd"})
    # zone and disk stop being shared by leaving the key; rack stays one per node
    assert labels.set_row(1, {"zone": "a", "rack": "r2", "disk": "ssd"}, {"rack": "r3"}) is True
    assert labels.one_per_node("zone") and labels.one_per_node("disk")
    # the first key flips (zone taken again), the later ones do not
    assert labels.set_row(1, {"rack": "r3"}, {"zone": "a", "rack": "r4"}) is True
    # a row leaves a shared value for a new one: the flip is in the leaving, not the taking
    assert labels.set_row(1, {"zone": "a", "rack": "r4"}, {"zone": "b", "rack": "r4"}) is True
    assert labels.one_per_node("zone")
    # two keys removed: the first flips, the second does not
    assert labels.set_row(2, {}, {"disk": "ssd", "rack": "r5"}) is True  # ssd: row 0's and row 2's
    assert labels.set_row(2, {"disk": "ssd", "rack": "r5"}, {}) is True and labels.one_per_node("disk")


def test_a_label_change_that_shares_a_value_with_another_node_starts_a_new_epoch():
    """Sharing changes other rows' domains, so no single row's change describes it."""
    table = NodeTable()
    table.set_node(make_node("a").capacity(cpu=4, memory="8Gi", pods=10).zone("z1").obj)
    table.set_node(make_node("b").capacity(cpu=4, memory="8Gi", pods=10).zone("z2").obj)
    epoch = table.epoch
    table.set_node(make_node("b").capacity(cpu=4, memory="8Gi", pods=10).zone("z3").obj)
    assert table.epoch == epoch  # still one node per zone: b's row alone changed
    table.set_node(make_node("b").capacity(cpu=4, memory="8Gi", pods=10).zone("z1").obj)
    assert table.epoch == epoch + 1 and table.changed_since(table.tick) == []
