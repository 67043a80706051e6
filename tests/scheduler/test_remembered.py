"""Remembered decisions choose exactly what the full evaluation chooses.

Two copies of one cluster, each with a profile of the same configuration and tie-break seed; one
remembers signatures (rows re-evaluated only where the node table changed), the other evaluates
every node for every pod. Random clusters, pod templates and interleaved changes (pods deleted,
nodes relabelled, tainted, cordoned, resized, added and removed, one or many at once, heartbeats
ageing) must give the same node, the same feasible count and the same scores, bit for bit, on both.
"""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.scheduler.cache.cache import Cache
from corral.scheduler.framework import remembered
from corral.scheduler.framework.interface import Plugin, count_rows
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.framework.status import SKIP, SUCCESS
from corral.scheduler.plugins import REGISTRY
from corral.scheduler.profiles import build_frameworks, parse_config
from corral.scheduler.schedule_one import FitError, schedule_pod
from corral.testing.builders import make_node, make_pod

ZONES = ["z1", "z2", "z3"]
START = time.time()

def node_specs(taints: list) -> st.SearchStrategy:
    return st.fixed_dictionaries({
        "cpu": st.integers(1, 6),
        "memory_gi": st.integers(0, 8),  # a node offering no memory changes every node's score
        "pods": st.integers(1, 6),
        "zone": st.sampled_from(ZONES),
        "taint": st.sampled_from(taints),
        "cordoned": st.integers(0, 7).map(lambda n: n == 0),
        "hostname": st.sampled_from([None] * 7 + ["shared"]),  # two nodes of one hostname: not one per node
    })


# A PreferNoSchedule taint anywhere brings in TaintToleration's score (normalised: not row-local):
# only node n0 of one cluster in five has one (``prefer``).
node_spec = node_specs([None] * 3 + ["NoSchedule"])
pod_spec = st.fixed_dictionaries({
    "cpu_m": st.sampled_from([0, 100, 500, 1000, 2500]),
    "memory_mi": st.sampled_from([0, 256, 2048]),
    "zone": st.one_of(st.none(), st.sampled_from(ZONES)),
    "tolerates": st.booleans(),
    "port": st.sampled_from([None, None, 8080]),
    "app": st.sampled_from(["a", "b"]),
    # anti-host and spread-hard: remembered (a node per hostname; one hard constraint), the rest not
    "extra": st.sampled_from([None] * 6 + ["anti-host"] * 3 + ["spread-hard"] * 3 + ["spread-min", "spread-host"]
                             + ["anti-zone", "affinity", "prefer", "spread", "spread-two", "spread-mixed", "node"]),
})
op = st.one_of(
    st.tuples(st.just("pod"), st.integers(0, 5)),
    st.tuples(st.just("pod"), st.integers(0, 5)),
    st.tuples(st.just("pod"), st.integers(0, 5)),
    st.tuples(st.just("delete"), st.integers(0, 50)),
    st.tuples(st.just("node"), st.integers(0, 14), node_spec),
    st.tuples(st.just("beat"), st.integers(0, 14)),
    st.tuples(st.just("zone"), st.integers(0, 14), st.sampled_from(ZONES)),
    st.tuples(st.just("cordon"), st.integers(0, 14)),
    st.tuples(st.just("hostname"), st.integers(0, 14)),
    st.tuples(st.just("remove"), st.integers(0, 14)),
    st.tuples(st.just("age"), st.sampled_from([1.0, 30.0, 61.0])),
    # several nodes at once, more than are evaluated one by one (and then than every row afresh costs)
    st.tuples(st.just("many"), st.integers(0, 14), st.integers(5, 15), st.sampled_from(ZONES)),
)


def node_obj(name: str, spec: dict, beat: float) -> dict:
    b = make_node(name).capacity(cpu=spec["cpu"], memory=f"{spec['memory_gi']}Gi", pods=spec["pods"]).zone(spec["zone"])
    if spec["taint"]:
        b.taint("dedicated", "x", spec["taint"])
    if spec["cordoned"]:
        b.unschedulable()
    if spec["hostname"]:
        b.label("kubernetes.io/hostname", spec["hostname"])
    obj = b.obj
    for cond in obj["status"]["conditions"]:
        if cond["type"] == "Ready":
            cond["lastHeartbeatTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(beat))
    return obj


def pod_obj(name: str, spec: dict) -> dict:
    b = make_pod(name).labels(app=spec["app"])
    amounts = {k: v for k, v in (("cpu", f"{spec['cpu_m']}m"), ("memory", f"{spec['memory_mi']}Mi"))
               if v not in ("0m", "0Mi")}
    if amounts:
        b.requests(**amounts)
    if spec["zone"]:
        b.node_selector(**{"topology.kubernetes.io/zone": spec["zone"]})
    if spec["tolerates"]:
        b.toleration("dedicated", "x")
    if spec["port"]:
        b.host_port(spec["port"])
    if spec["extra"] == "prefer":
        b.prefer_node(10, "topology.kubernetes.io/zone", "In", "z1")
    elif spec["extra"] == "spread":
        b.spread(1, "topology.kubernetes.io/zone", hard=False, app="a")
    elif spec["extra"] == "spread-hard":
        b.spread(1, "topology.kubernetes.io/zone", hard=True, app=spec["app"])
    elif spec["extra"] == "spread-min":  # more domains wanted than there are zones: the minimum counts as 0
        b.spread(2, "topology.kubernetes.io/zone", hard=True, min_domains=4, app=spec["app"])
    elif spec["extra"] == "spread-host":  # a domain per node (two share "shared"): up to 12 domains
        b.spread(2, "kubernetes.io/hostname", hard=True, app=spec["app"])
    elif spec["extra"] == "spread-two":
        b.spread(1, "topology.kubernetes.io/zone", hard=True, app="a").spread(2, "kubernetes.io/hostname", hard=True, app="a")
    elif spec["extra"] == "spread-mixed":  # judged by zone from the sums, scored afresh (the soft one)
        b.spread(1, "topology.kubernetes.io/zone", hard=True, app=spec["app"]).spread(
            1, "kubernetes.io/hostname", hard=False, app=spec["app"])
    elif spec["extra"] == "node":
        b.node("n0")
    elif spec["extra"] == "anti-host":
        b.anti_affinity("kubernetes.io/hostname", app=spec["app"])
    elif spec["extra"] == "affinity":  # the first pod of a group may go anywhere: not row-local
        b.affinity("kubernetes.io/hostname", app=spec["app"])
    elif spec["extra"] == "anti-zone":
        b.anti_affinity("topology.kubernetes.io/zone", app=spec["app"])
    return b.obj


class Twin:
    """One cluster held twice: ``fast`` remembers signatures, ``full`` evaluates every node."""

    def __init__(self, config: dict, clock) -> None:
        self.caches = [Cache(), Cache()]
        self.fwks = [build_frameworks(parse_config(config), cache=c, clock=clock)["default-scheduler"]
                     for c in self.caches]
        self.fwks[1].remembered.enabled = False

    def each(self, fn) -> None:
        for cache in self.caches:
            fn(cache)

    def schedule(self, obj: dict, explain: bool = True) -> str | None:
        """Both decisions for ``obj`` (with their scores when ``explain``; the full evaluation has
        them either way), which must be equal; the pod is assumed where they put it."""
        answers = []
        for cache, fwk in zip(self.caches, self.fwks):
            info = PodInfo.from_object(obj)
            try:
                result = schedule_pod(fwk, cache, info, scores=explain)
            except FitError as fit:
                answers.append(("pending", fit.diagnosis.message()))
                continue
            scores = result.scores
            detail = None if scores is None or not explain else (
                scores.rows.tolist(), scores.total.tolist(),
                {k: np.asarray(v).tolist() for k, v in sorted(scores.by_plugin.items())})
            answers.append((result.node, result.feasible, result.evaluated, detail))
            cache.assume(info, result.node)
        assert answers[0] == answers[1]
        return None if answers[0][0] == "pending" else answers[0][0]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(node_spec, min_size=1, max_size=12), templates=st.lists(pod_spec, min_size=1, max_size=6),
       ops=st.lists(op, min_size=10, max_size=120), tie_break=st.sampled_from(["random", "name"]),
       scoring=st.sampled_from(["LeastAllocated", "MostAllocated"]), prefer=st.integers(0, 4).map(lambda n: n == 0),
       narrow=st.sampled_from([0, 4, remembered.NARROW_DOMAINS]), scored=st.sampled_from([1, 2, 3]))
def test_remembered_decisions_equal_the_full_evaluation(nodes, templates, ops, tie_break, scoring, prefer, narrow,
                                                        scored):
    """``narrow``: the most domains a domain filter's rows are ranked per domain for (fewer zones and
    hostnames than that; more: every row's feasibility worked out again when a verdict changes);
    ``scored``: every so many decisions are asked for their scores (explain), the others not."""
    default = remembered.NARROW_DOMAINS
    remembered.NARROW_DOMAINS = narrow
    try:
        run_twin(nodes, templates, ops, tie_break, scoring, prefer, scored)
    finally:
        remembered.NARROW_DOMAINS = default


def run_twin(nodes, templates, ops, tie_break, scoring, prefer, scored) -> None:
    now = [START]
    twin = Twin({"tieBreak": tie_break, "seed": 7, "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": scoring}}}]}]}, lambda: now[0])
    specs = {f"n{i}": dict(spec) for i, spec in enumerate(nodes)}
    if prefer:
        specs["n0"]["taint"] = "PreferNoSchedule"
    for name, spec in specs.items():
        twin.each(lambda c, name=name, spec=spec: c.set_node(node_obj(name, spec, now[0])))
    placed: list[str] = []
    for n, step in enumerate(ops):
        kind = step[0]
        if kind == "pod":
            obj = pod_obj(f"p{n}", templates[step[1] % len(templates)])
            if twin.schedule(obj, explain=n % scored == 0) is not None:
                placed.append(f"default/p{n}")
        elif kind == "delete" and placed:
            key = placed.pop(step[1] % len(placed))
            twin.each(lambda c: c.remove_pod(key))
        elif kind == "node":  # a node joining, or changing in every way (resized too)
            specs[f"n{step[1]}"] = dict(step[2])
            twin.each(lambda c: c.set_node(node_obj(f"n{step[1]}", step[2], now[0])))
        elif kind in ("beat", "zone", "cordon", "hostname") and f"n{step[1]}" in specs:  # one row changes
            spec = specs[f"n{step[1]}"]
            if kind == "zone":
                spec["zone"] = step[2]
            elif kind == "hostname":
                spec["hostname"] = None if spec["hostname"] else "shared"
            elif kind == "cordon":
                spec["cordoned"] = not spec["cordoned"]
            twin.each(lambda c: c.set_node(node_obj(f"n{step[1]}", spec, now[0])))
        elif kind == "many":  # every third cordoned or uncordoned, the others moved to one zone
            for i in range(step[2]):
                name = f"n{(step[1] + i) % 15}"
                if name in specs:
                    spec = specs[name]
                    if i % 3:
                        spec["zone"] = step[3]
                    else:
                        spec["cordoned"] = not spec["cordoned"]
                    twin.each(lambda c, name=name, spec=spec: c.set_node(node_obj(name, spec, now[0])))
        elif kind == "remove":
            specs.pop(f"n{step[1]}", None)
            twin.each(lambda c: c.remove_node(f"n{step[1]}"))
        elif kind == "age":
            now[0] += step[1]


def basic_twin(nodes: int = 20) -> Twin:
    twin = Twin({}, time.time)
    for i in range(nodes):
        twin.each(lambda c, i=i: c.set_node(make_node(f"n{i:02d}").capacity(cpu=4, memory="8Gi", pods=10).obj))
    return twin


def test_pods_of_one_signature_are_answered_from_memory_and_spread_as_before():
    twin = basic_twin()
    nodes = [twin.schedule(make_pod(f"p{i}").requests(cpu="500m", memory="1Gi").obj) for i in range(40)]
    assert twin.fwks[0].remembered.hits == 40  # the first of them evaluates every row there
    assert sorted(nodes.count(n) for n in set(nodes)) == [2] * 20  # LeastAllocated: two on each node


def test_a_pod_with_a_plugin_that_is_not_row_local_takes_the_full_evaluation():
    twin = basic_twin()
    for i in range(5):
        twin.schedule(make_pod(f"p{i}").labels(app="a").requests(cpu="500m")
                      .spread(1, "kubernetes.io/hostname", hard=False, app="a").obj)
    twin.schedule(make_pod("q").requests(cpu="500m").prefer_node(5, "kubernetes.io/hostname", "In", "n03").obj)
    assert twin.fwks[0].remembered.hits == 0


def test_a_pod_no_node_fits_is_explained_as_before():
    twin = basic_twin(3)
    twin.schedule(make_pod("small").requests(cpu="1").obj)  # remembered from here on
    assert twin.schedule(make_pod("huge").requests(cpu="1").node_selector(disk="ssd").obj) is None
    with pytest.raises(FitError, match="3 node\\(s\\) didn't match Pod's node affinity/selector"):
        schedule_pod(twin.fwks[0], twin.caches[0], PodInfo.from_object(make_pod("h").node_selector(disk="ssd").obj))


def test_only_the_changed_rows_are_evaluated_again():
    twin = basic_twin()
    node0 = twin.schedule(make_pod("p0").requests(cpu="500m").obj)
    seen: list = []
    fit = next(p for p in twin.fwks[0].filters if p.NAME == "NodeResourcesFit")
    original_one, original_rows = fit.filter_one, fit.filter_rows
    fit.filter_one = lambda state, pod, row: seen.append(row) or original_one(state, pod, row)
    fit.filter_rows = lambda state, pod, rows: seen.extend(rows.tolist()) or original_rows(state, pod, rows)
    table = twin.caches[0].table
    node1 = twin.schedule(make_pod("p1").requests(cpu="500m").obj)
    assert seen == [table.row_of[node0]]  # the node p0 was assumed on, not every node
    seen.clear()
    twin.schedule(make_pod("p2").requests(cpu="500m").obj)
    assert seen == [table.row_of[node1]]


def test_a_removed_node_is_never_chosen_though_its_pods_are_still_counted():
    twin = Twin({}, time.time)
    twin.each(lambda c: c.set_node(make_node("big").capacity(cpu=8, memory="8Gi", pods=10).obj))
    twin.each(lambda c: c.set_node(make_node("small").capacity(cpu=4, memory="8Gi", pods=10).obj))
    assert twin.schedule(make_pod("p0").requests(cpu="1").obj) == "big"
    twin.each(lambda c: c.remove_node("big"))  # p0 still counts there until it is gone
    assert [twin.schedule(make_pod(f"p{i}").requests(cpu="1").obj) for i in (1, 2)] == ["small", "small"]


def test_a_node_cordoned_or_relabelled_counts_at_the_next_pod():
    twin = Twin({}, time.time)
    nodes = {"a": make_node("a").capacity(cpu=8, memory="8Gi", pods=10).zone("z1"),
             "b": make_node("b").capacity(cpu=4, memory="8Gi", pods=10).zone("z1")}
    for b in nodes.values():
        twin.each(lambda c, obj=b.obj: c.set_node(obj))
    pod = lambda name: make_pod(name).requests(cpu="1").node_selector(**{"topology.kubernetes.io/zone": "z1"}).obj  # noqa: E731
    assert twin.schedule(pod("p0")) == "a"
    twin.each(lambda c: c.set_node(nodes["a"].unschedulable().obj))
    assert twin.schedule(pod("p1")) == "b"
    twin.each(lambda c: c.set_node(make_node("b").capacity(cpu=4, memory="8Gi", pods=10).zone("z2").obj))
    assert twin.schedule(pod("p2")) is None


def test_a_decision_not_carried_out_leaves_no_stale_score():
    """A pod decided but never assumed (a Reserve plugin refused it): the rows its decision read
    again must still be scored again later."""
    twin = Twin({}, time.time)
    for name, cpu in (("a", 8), ("b", 4)):
        twin.each(lambda c, name=name, cpu=cpu: c.set_node(make_node(name).capacity(cpu=cpu, memory="8Gi", pods=10).obj))
    twin.schedule(make_pod("p0").requests(cpu="1").obj)  # on a; every row remembered
    twin.each(lambda c: c.set_node(make_node("b").capacity(cpu=4, memory="8Gi", pods=10).unschedulable().obj))
    for cache, fwk in zip(twin.caches, twin.fwks):  # a is the only node left: decided, not assumed
        assert schedule_pod(fwk, cache, PodInfo.from_object(make_pod("p1").requests(cpu="1").obj)).node == "a"
    twin.each(lambda c: c.set_node(make_node("b").capacity(cpu=4, memory="8Gi", pods=10).obj))
    for i in range(2, 8):
        twin.schedule(make_pod(f"p{i}").requests(cpu="1").obj)


def test_tied_nodes_tie_again_when_a_pod_leaves():
    twin = basic_twin(6)
    placed = [f"default/p{i}" for i in range(5) if twin.schedule(make_pod(f"p{i}").requests(cpu="1").obj)]
    for i in range(5, 25):  # each pod that leaves makes its node tie with the emptiest again
        key = placed.pop(0)
        twin.each(lambda c: c.remove_pod(key))
        assert twin.schedule(make_pod(f"p{i}").requests(cpu="1").obj) is not None
        placed.append(f"default/p{i}")


def test_tied_nodes_tie_again_within_their_zone_when_a_pod_leaves():
    """As above, for pods a spread constraint judges by zone: their best nodes are kept zone by zone,
    and a node a pod leaves joins its zone's best again (the seeded draw is over all of them)."""
    twin = Twin({}, time.time)
    for i, zone in enumerate(["z1", "z1", "z1", "z2", "z2", "z3"]):
        twin.each(lambda c, i=i, zone=zone: c.set_node(
            make_node(f"n{i}").capacity(cpu=4, memory="8Gi", pods=10).zone(zone).obj))
    pod = lambda name: make_pod(name).labels(app="a").requests(cpu="1").spread(  # noqa: E731
        5, "topology.kubernetes.io/zone", app="a").obj
    placed = [f"default/p{i}" for i in range(5) if twin.schedule(pod(f"p{i}"), explain=False)]
    for i in range(5, 35):
        key = placed.pop(0)
        twin.each(lambda c: c.remove_pod(key))
        assert twin.schedule(pod(f"p{i}"), explain=False) is not None
        placed.append(f"default/p{i}")
    assert twin.fwks[0].remembered.hits == 35


class LastWhenSomeAreOut(Plugin):
    """A scorer that takes part only when some node is infeasible, and then prefers the last node."""

    NAME = "LastWhenSomeAreOutForTest"

    def pre_score_reads_rows(self, pod) -> bool:
        return True

    def pre_score(self, state, pod, rows):
        return SKIP if count_rows(rows) == self.handle.cache.table.size else SUCCESS

    def score(self, state, pod, rows):
        return np.arange(self.handle.cache.table.size, dtype=np.float64)[rows] * 10


def test_a_pre_score_that_reads_its_rows_is_given_the_feasible_ones(monkeypatch):
    """A PreScore plugin that says it reads its rows gets the feasible rows from the remembered path
    too, not every row."""
    monkeypatch.setitem(REGISTRY, LastWhenSomeAreOut.NAME, LastWhenSomeAreOut)
    twin = zoned_twin("z1", "z1", "z2", "z3", scorer=LastWhenSomeAreOut.NAME)
    assert twin.schedule(spread("s0", 1), explain=False) == "n0"  # every node feasible: skipped
    assert twin.schedule(spread("s1", 1), explain=False) == "n3"  # z1 barred: n2 and n3, the last


def test_a_pre_score_that_reads_its_rows_is_given_the_feasible_ones_with_no_domain_filter(monkeypatch):
    """The same for pods decided row by row (no spread): every row while every node is feasible, only
    the feasible rows once one is cordoned."""
    monkeypatch.setitem(REGISTRY, LastWhenSomeAreOut.NAME, LastWhenSomeAreOut)
    twin = zoned_twin("z1", "z1", "z1", "z1", scorer=LastWhenSomeAreOut.NAME)
    pod = lambda name: make_pod(name).requests(cpu="100m").obj  # noqa: E731
    assert twin.schedule(pod("p0"), explain=False) == "n0"  # every node feasible: skipped
    assert twin.schedule(pod("p1"), explain=False) == "n1"  # remembered; n0 has a pod more
    twin.each(lambda c: c.set_node(make_node("n1").capacity(cpu=8, memory="8Gi", pods=20).zone("z1")
                                   .unschedulable().obj))
    # n1 out: n0, n2 and n3 scored; n2 and n3 tie on resources, the scorer prefers the last
    assert twin.schedule(pod("p2"), explain=False) == "n3"


def test_a_row_local_scorer_whose_pre_score_reads_its_rows_is_given_the_feasible_ones_by_zone(monkeypatch):
    """The same with a row-local scorer and a hard zone spread, decided from the zones' sums: its
    PreScore is given the rows of the allowed zones, the rows the full evaluation gives it."""
    given: dict[int, list[list[int]]] = {}  # per cache: the rows of each PreScore call

    class RowLocalLastWhenSomeAreOut(Plugin):
        NAME = "LastWhenSomeAreOutRowLocalForTest"
        ROW_LOCAL_SCORE = True

        def signature(self, pod) -> object:
            return None

        def pre_score_reads_rows(self, pod) -> bool:
            return pod.labels.get("reads") == "rows"

        def pre_score(self, state, pod, rows):
            size = self.handle.cache.table.size
            listed = list(range(size))[rows] if isinstance(rows, slice) else rows.tolist()
            given.setdefault(id(self.handle.cache), []).append(listed)
            return SKIP if len(listed) == size else SUCCESS

        def score(self, state, pod, rows):
            return np.arange(self.handle.cache.table.size, dtype=np.float64)[rows] * 10

    monkeypatch.setitem(REGISTRY, RowLocalLastWhenSomeAreOut.NAME, RowLocalLastWhenSomeAreOut)
    twin = zoned_twin("z1", "z1", "z2", "z3", scorer=RowLocalLastWhenSomeAreOut.NAME)
    pod = lambda name: make_pod(name).labels(app="a", reads="rows").requests(cpu="100m").spread(  # noqa: E731
        1, "topology.kubernetes.io/zone", app="a").obj
    assert twin.schedule(pod("s0"), explain=False) == "n0"  # every node feasible: skipped
    assert twin.schedule(pod("s1"), explain=False) == "n3"  # z1 barred: n2 and n3, the last
    assert twin.schedule(pod("s2"), explain=False) == "n2"  # z2 alone holds fewer
    assert twin.schedule(pod("s3"), explain=False) == "n1"  # z1's other node is emptier than n0
    fast, full = (given[id(c)] for c in twin.caches)
    assert fast == full == [[0, 1, 2, 3], [2, 3], [0, 1, 2, 3]]  # one node left: no PreScore
    assert twin.fwks[0].remembered.hits == 4


def test_a_scorer_whose_pre_score_skips_some_pods_scores_only_the_others(monkeypatch):
    """A PreScore that skips the pods labelled ``plain``: their scores leave its plugin out, the
    other pods' include it, in whatever order they come (the scorers are worked out per pod, not
    kept from the last pod's). Its plugin scores in columns only (no ``score_one``), so the rows a
    placement changed are scored again in columns."""

    class LastUnlessPlain(Plugin):
        NAME = "LastUnlessPlainForTest"
        ROW_LOCAL_SCORE = True

        def pre_score(self, state, pod, rows):
            return SKIP if pod.labels.get("plain") == "yes" else SUCCESS

        def score(self, state, pod, rows):
            return np.arange(self.handle.cache.table.size, dtype=np.float64)[rows] * 10

    monkeypatch.setitem(REGISTRY, LastUnlessPlain.NAME, LastUnlessPlain)
    twin = zoned_twin("z1", "z1", "z1", "z1", scorer=LastUnlessPlain.NAME)
    pod = lambda name, **labels: make_pod(name).labels(**labels).requests(cpu="100m").obj  # noqa: E731
    plain = lambda name: twin.schedule(pod(name, plain="yes"), explain=False)  # noqa: E731
    scored = lambda name: twin.schedule(pod(name), explain=False)  # noqa: E731
    # The plain pods go to the emptiest node, by name; the others to the last node. Each signature's
    # second pod has a row scored again (the node the pod before it took).
    placed = [plain("p0"), plain("p1"), scored("a0"), scored("a1"), plain("p2"), scored("a2"), plain("p3")]
    assert placed == ["n0", "n1", "n3", "n3", "n2", "n3", "n0"]
    assert twin.fwks[0].remembered.hits == 7


def test_anti_affinity_on_hostname_is_remembered_and_holds_both_ways():
    """Pods of three signatures in turn, so each finds a few rows changed since its last decision
    (judged one row at a time), then a node joins (every row again). A rule the remembered path
    forgot shows as another node or another feasible count than the full evaluation's."""
    twin = basic_twin(8)
    anti = lambda name: make_pod(name).labels(app="a").requests(cpu="1").anti_affinity(  # noqa: E731
        "kubernetes.io/hostname", app="a").obj
    plain = lambda name, **labels: make_pod(name).labels(app="a", **labels).requests(cpu="1").obj  # noqa: E731
    a0 = twin.schedule(anti("a0"))
    p0 = twin.schedule(plain("p0"))  # a0's term keeps it off a0's node
    a1 = twin.schedule(anti("a1"))
    p1 = twin.schedule(plain("p1"))  # a1's node changed since p0: judged again, and out
    w = twin.schedule(plain("w", tier="web"))  # another group of pods the anti pods' term selects
    a2 = twin.schedule(anti("a2"))  # w's node changed since a1: judged again, and out
    twin.each(lambda c: c.set_node(make_node("n8").capacity(cpu=4, memory="8Gi", pods=10).obj))  # a new epoch
    a3 = twin.schedule(anti("a3"))
    assert len({a0, p0, a1, p1, w, a2, a3}) == 7
    assert twin.fwks[0].remembered.hits == 7


def test_pods_of_one_spec_whose_labels_an_existing_term_selects_or_not_are_remembered_apart():
    """Pods of one spec share their signatures when their labels are the same too: an existing
    pod's anti-affinity term selects app=a, so the app=a pod keeps off its node and the app=b pod,
    of the same spec, takes that node, the emptiest."""
    twin = basic_twin(2)
    twin.each(lambda c: c.set_node(make_node("n00").capacity(cpu=8, memory="16Gi", pods=10).obj))
    guard = PodInfo.from_object(make_pod("guard").labels(app="g").requests(cpu="100m").anti_affinity(
        "kubernetes.io/hostname", app="a").obj)
    twin.each(lambda c: c.assume(guard, "n00"))
    same = lambda name, app: make_pod(name).labels(app=app).requests(cpu="1").obj  # noqa: E731
    assert twin.schedule(same("a0", "a")) == "n01"
    assert twin.schedule(same("b0", "b")) == "n00"
    assert twin.schedule(same("a1", "a")) == "n01"
    assert twin.fwks[0].remembered.hits == 3


@pytest.mark.parametrize("narrow", [remembered.NARROW_DOMAINS, 0], ids=["ranked per zone", "every row"])
def test_a_hard_spread_constraint_is_remembered_by_domain(narrow, monkeypatch):
    """Zones of unequal size and pods one zone may not take more of: a node's verdict follows its
    zone's count and the lowest count, both kept from the rows that changed; with more zones than
    are ranked per zone (``narrow`` 0), every row's verdict again when a zone's changes, not only
    the rows that changed."""
    monkeypatch.setattr(remembered, "NARROW_DOMAINS", narrow)
    twin = Twin({}, time.time)
    for i, zone in enumerate(["z1", "z1", "z1", "z2", "z2", "z3"]):
        twin.each(lambda c, i=i, zone=zone: c.set_node(
            make_node(f"n{i}").capacity(cpu=8, memory="8Gi", pods=20).zone(zone).obj))
    zones = []
    for i in range(12):
        node = twin.schedule(make_pod(f"s{i}").labels(app="a").requests(cpu="500m")
                             .spread(1, "topology.kubernetes.io/zone", app="a").obj)
        zones.append(twin.caches[0].table.node_labels(twin.caches[0].table.row_of[node])["topology.kubernetes.io/zone"])
        if i == 5:  # a pod the constraint selects leaves z3: z3 is the lowest again
            twin.each(lambda c: c.remove_pod("default/s2" if zones[2] == "z3" else f"default/s{zones.index('z3')}"))
    assert twin.fwks[0].remembered.hits == 12


def test_a_spread_pod_before_any_node_joined_is_unschedulable_and_placed_once_one_has():
    """The scheduler starts before the agents: a pod with a hard spread constraint meets an empty node
    table, and waits for a node instead of failing the scheduler."""
    twin = Twin({}, time.time)
    obj = make_pod("s0").labels(app="a").spread(1, "topology.kubernetes.io/zone", app="a").obj
    assert twin.schedule(obj) is None
    twin.each(lambda c: c.set_node(make_node("n0").capacity(cpu=4, memory="8Gi", pods=10).zone("z1").obj))
    assert twin.schedule(obj) == "n0"


@pytest.mark.parametrize("changed", [1, 3, 6, 20])  # one by one; as an array; more: every row afresh
@pytest.mark.parametrize("key", ["topology.kubernetes.io/zone", "kubernetes.io/hostname"])  # few domains; many
def test_rows_changing_at_once_between_two_decisions_of_a_spread_signature(changed, key):
    """Forty nodes, and between two pods of one hard spread constraint so many rows change at once:
    cordoned or uncordoned, tainted or not, moved to another zone (a new one too), a pod removed.
    Over zones the rows are ranked per domain; over forty hostnames every row's feasibility is
    worked out again; either way the decisions are the full evaluation's."""
    rng = random.Random(changed)
    twin = Twin({"tieBreak": "random", "seed": 3}, time.time)
    specs = {f"n{i:02d}": {"cpu": 4, "memory_gi": 8, "pods": 10, "zone": ZONES[i % 3], "taint": None,
                           "cordoned": False, "hostname": None} for i in range(40)}
    for name, spec in specs.items():
        twin.each(lambda c, name=name, spec=spec: c.set_node(node_obj(name, spec, time.time())))
    placed: dict[str, str] = {}  # pod key → node
    decided = 0
    for round_ in range(10):
        for i in range(3):
            name = f"s{round_}-{i}"
            node = twin.schedule(make_pod(name).labels(app="a").requests(cpu="500m").spread(1, key, app="a").obj,
                                 explain=i == 0)
            if node is not None:
                placed[f"default/{name}"], decided = node, decided + 1
        for node in rng.sample(sorted(specs), changed):
            spec, action = specs[node], rng.randrange(4)
            if action == 0:
                spec["cordoned"] = not spec["cordoned"]
            elif action == 1:
                spec["taint"] = None if spec["taint"] else "NoSchedule"
            elif action == 2:
                spec["zone"] = rng.choice([*ZONES, "z4"])
            on = [pod for pod, where in placed.items() if where == node]
            if action == 3 and on:
                placed.pop(on[0])
                twin.each(lambda c: c.remove_pod(on[0]))
            else:
                twin.each(lambda c, node=node, spec=spec: c.set_node(node_obj(node, spec, time.time())))
    assert decided >= 20 and twin.fwks[0].remembered.hits == decided


def test_a_spread_signature_whose_domains_cross_the_threshold_scores_the_rows_that_changed(monkeypatch):
    """Between two decisions the only node of z3 moves to z4, a zone no node had, so the domain
    codes cross the threshold of ranking rows per domain, while a pod of another workload lands on
    another node: that node's score is worked out again on the way taken from then on (the sums
    keep z4's code when the node moves back, until the next epoch)."""
    monkeypatch.setattr(remembered, "NARROW_DOMAINS", 4)  # the codes of no zone and z1…z3; z4's makes five
    twin = zoned_twin("z1", "z1", "z2", "z3")
    obj = lambda name: make_pod(name).labels(app="a").requests(cpu="1").spread(  # noqa: E731
        2, "topology.kubernetes.io/zone", app="a").obj
    ranked, epochs = [], set()
    for i, (zone, busy) in enumerate([("z4", "n1"), ("z3", "n0"), ("z4", "n2")]):
        twin.schedule(obj(f"s{i}"))
        ranked.append(next(iter(twin.fwks[0].remembered.entries.values())).bests is not None)
        epochs.add(twin.caches[0].table.epoch)
        twin.each(lambda c, zone=zone: c.set_node(make_node("n3").capacity(cpu=8, memory="8Gi", pods=20).zone(zone).obj))
        twin.each(lambda c, i=i, busy=busy: c.assume(
            PodInfo.from_object(make_pod(f"other{i}").requests(cpu="4").obj), busy))
    twin.schedule(obj("s3"))
    ranked.append(next(iter(twin.fwks[0].remembered.entries.values())).bests is not None)
    assert ranked == [True, False, False, False]  # per domain while z1…z3 are the codes, not with z4
    assert len(epochs) == 1  # one remembered entry throughout, brought up to date row by row
    assert twin.fwks[0].remembered.hits == 4


def zoned_twin(*zones: str, scorer: str | None = None) -> Twin:
    """Nodes n0, n1, … in ``zones``, ties broken by name; ``scorer``: a plugin that also scores."""
    config: dict = {"tieBreak": "name"}
    if scorer is not None:
        config["profiles"] = [{"schedulerName": "default-scheduler", "plugins": {
            "preScore": {"enabled": [{"name": scorer}]}, "score": {"enabled": [{"name": scorer, "weight": 1}]}}}]
    twin = Twin(config, time.time)
    for i, zone in enumerate(zones):
        twin.each(lambda c, i=i, zone=zone: c.set_node(
            make_node(f"n{i}").capacity(cpu=8, memory="8Gi", pods=20).zone(zone).obj))
    return twin


def place(twin: Twin, name: str, node: str, app: str) -> None:
    info = PodInfo.from_object(make_pod(name).labels(app=app).requests(cpu="100m").obj)
    twin.each(lambda c: c.assume(info, node))


def probe(twin: Twin, obj: dict) -> tuple:
    """Both paths decide ``obj`` without carrying it out (the remembered one keeps what it saw)."""
    answers = [(r.node, r.feasible) for r in (schedule_pod(f, c, PodInfo.from_object(obj))
                                              for c, f in zip(twin.caches, twin.fwks))]
    assert answers[0] == answers[1]
    return answers[0]


def spread(name: str, skew: int) -> dict:
    return make_pod(name).labels(app="a").requests(cpu="100m").spread(skew, "topology.kubernetes.io/zone", app="a").obj


def test_a_pod_with_two_hard_spread_constraints_is_judged_by_both():
    """Zones may differ by two, hostnames by one: n0 already holds a selected pod, so its zone is
    allowed and its hostname is not. Both constraints judge, so the pod is not remembered by one domain."""
    twin = zoned_twin("z1", "z1", "z2", "z2")
    place(twin, "a0", "n0", "a")
    obj = make_pod("s0").labels(app="a").requests(cpu="100m").spread(2, "topology.kubernetes.io/zone", app="a").spread(
        1, "kubernetes.io/hostname", app="a").obj
    assert probe(twin, obj) == ("n1", 3)
    assert twin.fwks[0].remembered.hits == 0


def test_a_hard_zone_spread_with_a_soft_hostname_spread_is_judged_by_zone_and_scored_afresh():
    """The soft constraint's PreScore keeps its per-cycle state: the remembered path judges by zone,
    then gives the cycle's state to the scorers, and the soft spread (not row-local) is scored by the
    full evaluation. n3 is the lowest zone alone (one node left: remembered); once every zone holds
    one, the hostname spread prefers z1's empty n1 over n0."""
    twin = zoned_twin("z1", "z1", "z2", "z3")
    nodes = [twin.schedule(make_pod(f"s{i}").labels(app="a").requests(cpu="100m")
                           .spread(1, "topology.kubernetes.io/zone", app="a")
                           .spread(1, "kubernetes.io/hostname", hard=False, app="a").obj) for i in range(6)]
    assert nodes == ["n0", "n2", "n3", "n1", "n2", "n3"]
    assert twin.fwks[0].remembered.hits == 2  # the two decisions a single allowed node settles


def test_a_barred_hostname_among_rows_changing_at_once_stays_barred():
    """Over forty hostnames (more domains than are ranked one by one) a node already holding a pod of
    a maxSkew 1 spread is barred; relabelled with five others between two decisions (their rows
    judged again together, the domains' counts as they were), it stays barred."""
    twin = Twin({"tieBreak": "name"}, time.time)
    node = lambda i, **labels: make_node(f"n{i:02d}").capacity(cpu=4, memory="8Gi", pods=10).labels(  # noqa: E731
        **labels).obj
    for i in range(40):  # rack r1 known from the start: a relabel to it changes rows, not the label columns
        twin.each(lambda c, i=i: c.set_node(node(i, rack="r1" if i == 39 else "r0")))
    place(twin, "a0", "n00", "a")
    pod = lambda name: make_pod(name).labels(app="a").requests(cpu="100m").spread(  # noqa: E731
        1, "kubernetes.io/hostname", app="a").obj
    assert probe(twin, pod("s0")) == ("n01", 39)
    for i in range(6):
        twin.each(lambda c, i=i: c.set_node(node(i, rack="r1")))
    assert probe(twin, pod("s1")) == ("n01", 39)
    assert twin.fwks[0].remembered.hits == 2


def test_a_row_that_changes_in_a_barred_zone_stays_barred():
    twin = zoned_twin("z1", "z1", "z2", "z3")
    place(twin, "a0", "n0", "a")
    assert probe(twin, spread("s0", 1)) == ("n2", 2)  # z1 holds one more than z2 and z3: barred
    place(twin, "b0", "n1", "b")  # n1 changes, z1's count does not
    assert probe(twin, spread("s1", 1)) == ("n2", 2)
    assert twin.fwks[0].remembered.hits == 2


def test_a_zone_left_without_nodes_no_longer_holds_the_lowest_count():
    twin = zoned_twin("z1", "z1", "z2", "z3")
    for name, node in (("a0", "n0"), ("a1", "n0"), ("a2", "n2")):
        place(twin, name, node, "a")
    assert probe(twin, spread("s0", 2))[1] == 2  # z3's 0 is the lowest: z1 (2 pods, n0 and n1) is barred
    twin.each(lambda c: c.set_node(make_node("n3").capacity(cpu=8, memory="8Gi", pods=20).zone("z2").obj))
    assert probe(twin, spread("s1", 2))[1] == 4  # z3 has no node now: the lowest is z2's 1
    assert twin.fwks[0].remembered.hits == 2


@pytest.mark.parametrize("joining", [0, 1, 6])  # n3 moves; n3 joins; n3 to n8 join (more rows than one by one)
def test_a_zone_first_seen_after_decisions_were_remembered_counts_from_zero(joining):
    twin = zoned_twin("z1", "z1", "z2", *(() if joining else ("z2",)))
    for name, node in (("a0", "n0"), ("a1", "n2")):
        place(twin, name, node, "a")
    assert probe(twin, spread("s0", 1))[1] == 3 + (not joining)  # z1 and z2 level: every node
    # nodes join, or move, into a zone no node had before: its 0 bars the others
    for i in range(3, 3 + max(joining, 1)):
        twin.each(lambda c, i=i: c.set_node(make_node(f"n{i}").capacity(cpu=8, memory="8Gi", pods=20).zone("z9").obj))
    assert probe(twin, spread("s1", 1)) == ("n3", max(joining, 1))
    assert twin.fwks[0].remembered.hits == 2


def test_a_node_moved_into_a_new_zone_among_many_changed_rows_counts_from_zero():
    twin = zoned_twin(*["z1"] * 6, *["z2"] * 5, *["z3"] * 5)  # 16 nodes: up to 6 changed rows are re-evaluated
    place(twin, "a0", "n0", "a")
    assert probe(twin, spread("s0", 1))[1] == 10  # z1 holds one more than the others: its six nodes barred
    for i in range(1, 6):  # more rows change than are evaluated one by one ...
        place(twin, f"b{i}", f"n{i}", "b")
    # ... and one of them moves to a zone no node had (z1 keeps five nodes: no other row's domain changes)
    twin.each(lambda c: c.set_node(make_node("n2").capacity(cpu=8, memory="8Gi", pods=20).zone("z9").obj))
    assert probe(twin, spread("s1", 1))[1] == 11  # n2 in z9 with z2 and z3; z1's five nodes still barred
    assert twin.fwks[0].remembered.hits == 2


def test_pods_on_a_node_the_pod_may_not_use_stay_uncounted_among_many_changed_rows():
    twin = Twin({"tieBreak": "name"}, time.time)
    for i, zone in enumerate(["z1"] * 6 + ["z2"] * 5 + ["z3"] * 5):  # 16 nodes; n6 (z2) in another pool
        twin.each(lambda c, i=i, zone=zone: c.set_node(make_node(f"n{i}").capacity(cpu=8, memory="8Gi", pods=20)
                                                     .zone(zone).labels(pool="b" if i == 6 else "a").obj))
    place(twin, "a0", "n0", "a")
    obj = spread("s0", 1)
    obj["spec"]["nodeSelector"] = {"pool": "a"}
    assert probe(twin, obj)[1] == 9  # z1 barred; z2 without n6 (4) and z3 (5)
    place(twin, "a1", "n6", "a")  # a selected pod where this pod may not go: not counted in z2 ...
    for i in range(7, 11):  # ... among more changed rows than are evaluated one by one
        place(twin, f"b{i}", f"n{i}", "b")
    obj = spread("s1", 1)
    obj["spec"]["nodeSelector"] = {"pool": "a"}
    assert probe(twin, obj)[1] == 9  # were n6 counted, z2 would be barred too
    assert twin.fwks[0].remembered.hits == 2


@pytest.mark.parametrize("count", [1, 5])  # one by one, or more rows than that at once
def test_nodes_taking_freed_rows_in_a_zone_no_node_had_count_from_zero(count):
    twin = zoned_twin(*(["z1"] * count), "z2", *(["z3"] * count))
    place(twin, "a0", "n0", "a")
    place(twin, "a1", f"n{count}", "a")
    for i in range(count + 1, 2 * count + 1):  # z3 goes: its rows are freed
        twin.each(lambda c, i=i: c.remove_node(f"n{i}"))
    assert probe(twin, spread("s0", 1))[1] == count + 1  # z1 and z2 level: every node
    for i in range(count):  # new nodes, in those rows, in a zone no node had: its 0 bars the others
        twin.each(lambda c, i=i: c.set_node(make_node(f"m{i}").capacity(cpu=8, memory="8Gi", pods=20).zone("z9").obj))
    assert probe(twin, spread("s1", 1)) == ("m0", count)
    assert twin.fwks[0].remembered.hits == 2


def test_only_nodes_the_pod_may_use_count_toward_its_spread():
    twin = zoned_twin("z1", "z1", "z2", "z3")
    for name, node in (("a0", "n0"), ("a1", "n0"), ("a2", "n2")):
        place(twin, name, node, "a")
    obj = spread("s0", 2)
    obj["spec"]["nodeSelector"] = {}
    obj["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1", "z2"]}]}]}}}
    # z3 is not the pod's to use, so its 0 is not the lowest: z1 (2) and z2 (1) are both allowed
    assert probe(twin, obj)[1] == 3
    assert twin.fwks[0].remembered.hits == 1


def test_an_empty_zone_whose_only_node_the_pod_may_no_longer_use_stops_holding_the_lowest_count():
    """z3's one node holds none of the pods and loses the label the pod selects: z3 no longer
    counts, so z1 and z2 (one pod each) are allowed again, not barred by z3's 0."""
    twin = Twin({"tieBreak": "name"}, time.time)
    for i, zone in enumerate(["z1", "z2", "z3"]):
        twin.each(lambda c, i=i, zone=zone: c.set_node(
            make_node(f"n{i}").capacity(cpu=8, memory="8Gi", pods=20).zone(zone).label("disk", "ssd").obj))
    place(twin, "a0", "n0", "a")
    place(twin, "a1", "n1", "a")
    obj = spread("s0", 1)
    obj["spec"]["nodeSelector"] = {"disk": "ssd"}
    assert probe(twin, obj) == ("n2", 1)
    twin.each(lambda c: c.set_node(make_node("n2").capacity(cpu=8, memory="8Gi", pods=20).zone("z3").obj))
    assert probe(twin, obj) == ("n0", 2)
    assert twin.fwks[0].remembered.hits == 2


def test_a_zone_barred_by_one_of_two_rows_that_changed_is_barred():
    """Two rows changed between two decisions, the first moving its zone's count (a selected pod on
    n0) and the second not (another app's pod on n2): the verdict follows the first."""
    twin = zoned_twin("z1", "z1", "z2", "z3")
    assert probe(twin, spread("s0", 1)) == ("n0", 4)
    place(twin, "a0", "n0", "a")
    place(twin, "b0", "n2", "b")
    assert probe(twin, spread("s1", 1)) == ("n3", 2)  # z1 holds one more than z2 and z3: barred
    assert twin.fwks[0].remembered.hits == 2


@pytest.mark.parametrize("rule", ["affinity", "taint", "NoExecute", "removed"])
def test_pods_on_a_node_the_spread_does_not_count_stay_uncounted_as_it_changes(rule):
    """z1 of n0 and n1, z2 of n2, z3 of n3; n1 is a node the spread pod may not count: its node
    affinity leaves n1 out, n1 has a taint it does not tolerate (NoSchedule or NoExecute, with
    nodeTaintsPolicy Honor), or n1 is removed. A selected pod on n1 (placed before n1 goes, when
    removed) must not bar z1."""
    twin = Twin({"tieBreak": "name"}, time.time)
    for i, zone in enumerate(["z1", "z1", "z2", "z3"]):
        b = make_node(f"n{i}").capacity(cpu=8, memory="8Gi", pods=20).zone(zone)
        if i != 1:
            b.label("disk", "ssd")
        elif rule in ("taint", "NoExecute"):
            b.taint("dedicated", "x", "NoSchedule" if rule == "taint" else rule)
        twin.each(lambda c, obj=b.obj: c.set_node(obj))
    pod = lambda name: spread(name, 1)  # noqa: E731
    if rule == "affinity":
        pod = lambda name: {**spread(name, 1), "spec": {**spread(name, 1)["spec"], "nodeSelector": {"disk": "ssd"}}}  # noqa: E731
    elif rule in ("taint", "NoExecute"):
        def pod(name):
            obj = spread(name, 1)
            obj["spec"]["topologySpreadConstraints"][0]["nodeTaintsPolicy"] = "Honor"
            return obj
    assert probe(twin, pod("s0"))[0] == "n0"
    place(twin, "a0", "n1", "a")  # n1 changes; z1's count must not
    if rule == "removed":
        assert probe(twin, pod("s1")) == ("n2", 2)  # counted while n1 is there: z1 barred
        twin.each(lambda c: c.remove_node("n1"))
    assert probe(twin, pod("s2")) == ("n0", 3)
    assert twin.fwks[0].remembered.hits == (3 if rule == "removed" else 2)


@pytest.mark.parametrize("policy, expected", [("Ignore", ("n2", 2)), ("Honor", ("n0", 3))])
def test_a_node_outside_the_pods_node_selector_counts_as_the_affinity_policy_says(policy, expected):
    """n1 lacks the label the pod's node selector asks for, and a selected pod lands there: with
    nodeAffinityPolicy Ignore n1 counts and bars z1, with Honor (and its taints honoured too, n4's
    taint making the check run) it does not."""
    twin = Twin({"tieBreak": "name"}, time.time)
    for i, zone in enumerate(["z1", "z1", "z2", "z3", "z3"]):
        b = make_node(f"n{i}").capacity(cpu=8, memory="8Gi", pods=20).zone(zone)
        if i != 1:
            b.label("disk", "ssd")
        if i == 4:
            b.taint("dedicated", "x")
        twin.each(lambda c, obj=b.obj: c.set_node(obj))

    def pod(name: str) -> dict:
        obj = spread(name, 1)
        obj["spec"]["nodeSelector"] = {"disk": "ssd"}
        obj["spec"]["topologySpreadConstraints"][0].update(nodeAffinityPolicy=policy, nodeTaintsPolicy="Honor")
        return obj

    assert probe(twin, pod("s0")) == ("n0", 3)
    place(twin, "a0", "n1", "a")  # one row changes: judged on its own
    assert probe(twin, pod("s1")) == expected
    assert twin.fwks[0].remembered.hits == 2


@pytest.mark.parametrize("zones, placed, skew, min_domains, expected", [
    (("z1", "z2", "z3"), ("n0", "n0", "n1", "n2"), 2, 4, ("n1", 2)),  # fewer zones than minDomains: lowest 0
    (("z1", "z2", "z3"), ("n0", "n0", "n1", "n2"), 2, 3, ("n1", 3)),  # as many: the lowest count, 1
    (("z1", "z1"), ("n0", "n1"), 1, None, ("n0", 2)),  # one zone: always its own lowest
])
def test_the_lowest_count_of_a_spread_judged_by_domain(zones, placed, skew, min_domains, expected):
    twin = zoned_twin(*zones)
    for i, node in enumerate(placed):
        place(twin, f"a{i}", node, "a")
    obj = make_pod("s0").labels(app="a").requests(cpu="100m").spread(
        skew, "topology.kubernetes.io/zone", min_domains=min_domains, app="a").obj
    assert probe(twin, obj) == expected
    assert twin.fwks[0].remembered.hits == 1


def test_a_node_without_the_topology_label_is_never_chosen_by_domain():
    twin = zoned_twin("z1", "z2")
    twin.each(lambda c: c.set_node(make_node("a-nozone").capacity(cpu=8, memory="8Gi", pods=20).obj))
    assert probe(twin, spread("s0", 1)) == ("n0", 2)  # a-nozone sorts first by name, but has no zone
    assert twin.fwks[0].remembered.hits == 1


def test_a_zone_whose_only_node_becomes_countable_holds_the_lowest_count():
    """z3's one node lacks the label the pod's node selector asks for, so z3 does not count and z1
    and z2 (one pod each) are level; once n3 has the label, z3's 0 is the lowest and bars them."""
    twin = Twin({"tieBreak": "name"}, time.time)
    nodes = {f"n{i}": make_node(f"n{i}").capacity(cpu=8, memory="8Gi", pods=20).zone(zone)
             for i, zone in enumerate(["z1", "z1", "z2", "z3"])}
    for name, b in nodes.items():
        if name != "n3":
            b.label("disk", "ssd")
        twin.each(lambda c, obj=b.obj: c.set_node(obj))
    pod = lambda name: {**spread(name, 1), "spec": {**spread(name, 1)["spec"], "nodeSelector": {"disk": "ssd"}}}  # noqa: E731
    place(twin, "a0", "n0", "a")
    place(twin, "a1", "n2", "a")
    assert probe(twin, pod("s0")) == ("n1", 3)
    nodes["n3"].label("disk", "ssd")
    twin.each(lambda c: c.set_node(nodes["n3"].obj))
    assert probe(twin, pod("s1")) == ("n3", 1)
    assert twin.fwks[0].remembered.hits == 2


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"])
def test_weighted_scores_several_changed_rows_and_nodes_filling_up(strategy):
    """Between two pods of one signature several nodes change (more than are judged one at a
    time), scores are weighted, and nodes fill up until pods wait: the same answers as the full
    evaluation at every step. RequestedToCapacityRatio answers only in columns."""
    args: dict = {"type": strategy}
    if strategy == "RequestedToCapacityRatio":
        args["requestedToCapacityRatio"] = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
    twin = Twin({"seed": 3, "profiles": [{"schedulerName": "default-scheduler", "plugins": {"score": {"enabled": [
        {"name": "NodeResourcesFit", "weight": 3}, {"name": "NodeResourcesBalancedAllocation", "weight": 2}]}},
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": args}}]}]}, time.time)
    for i in range(32):
        twin.each(lambda c, i=i: c.set_node(make_node(f"n{i:02d}").capacity(cpu=4, memory="8Gi", pods=3)
                                            .zone(ZONES[i % 3]).obj))
    placed = 0
    for r in range(16):
        placed += twin.schedule(make_pod(f"a{r}").labels(app="a").requests(cpu="1", memory="1Gi").obj) is not None
        placed += twin.schedule(make_pod(f"s{r}").labels(app="s").requests(cpu="500m").spread(
            2, "topology.kubernetes.io/zone", app="s").obj) is not None
        for j in range(6):  # six nodes change before the next pod of each signature
            placed += twin.schedule(make_pod(f"b{r}-{j}").labels(app="b").requests(cpu="500m", memory="2Gi").obj) is not None
    assert placed == 96  # every node full: the last pods wait
    assert twin.fwks[0].remembered.hits > 90


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize("resources", [None, [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
                                       [{"name": "memory", "weight": 3}]])
@pytest.mark.parametrize("cpu_everywhere", [False, True])
def test_one_changed_row_is_scored_as_the_columns_score_it(strategy, resources, cpu_everywhere):
    """Three signatures in turn, so each decision finds two rows changed (scored in plain Python):
    resource weights, nodes offering no memory, no cpu or a sliver of it, nodes filling past what the
    pods' default requests leave. Scores and choices equal the full evaluation's at every step."""
    args: dict = {"type": strategy}
    if resources is not None:
        args["resources"] = resources
    twin = Twin({"seed": 5, "profiles": [{"schedulerName": "default-scheduler", "plugins": {"score": {"enabled": [
        {"name": "NodeResourcesFit", "weight": 1}, {"name": "NodeResourcesBalancedAllocation", "weight": 1}]}},
        "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": args}}]}]}, time.time)
    for i, (cpu, memory) in enumerate([("4", "8Gi"), ("2", "0"), ("50m", "8Gi"), ("4", "1Gi"), ("50m", "0"),
                                       ("1", "8Gi"), ("500m" if cpu_everywhere else "0", "8Gi")]):
        twin.each(lambda c, i=i, cpu=cpu, memory=memory: c.set_node(
            make_node(f"n{i}").capacity(cpu=cpu, memory=memory, pods=12).obj))
    placed = 0
    for r in range(30):
        for app, amounts in (("a", {"cpu": "10m"}), ("b", {"cpu": "20m"}), ("c", {"memory": "64Mi"})):
            placed += twin.schedule(make_pod(f"{app}{r}").labels(app=app).requests(**amounts).obj) is not None
    assert placed >= 70 and twin.fwks[0].remembered.hits == placed  # the last may find every node full


def test_pods_naming_their_node_are_remembered_and_one_naming_no_node_waits():
    twin = basic_twin(6)
    for i in range(4):
        assert twin.schedule(make_pod(f"pinned{i}").requests(cpu="100m").node("n03").obj) == "n03"
        assert twin.schedule(make_pod(f"other{i}").requests(cpu="100m").obj) is not None  # one row changes
    assert twin.fwks[0].remembered.hits == 8
    assert twin.schedule(make_pod("lost").node("ghost").obj) is None  # a node that does not exist
    assert twin.schedule(make_pod("x").node("n01").obj) == "n01"  # row 1 changes
    assert twin.schedule(make_pod("lost-too").node("ghost").obj) is None  # row 1 judged again: not ghost
    twin.each(lambda c: c.set_node(make_node("ghost").capacity(cpu=4, memory="8Gi", pods=10).obj))
    assert twin.schedule(make_pod("found").node("ghost").obj) == "ghost"


def test_a_node_not_ready_is_left_out_row_by_row_too():
    twin = basic_twin(4)
    twin.each(lambda c: c.set_node(make_node("a-down").capacity(cpu=8, memory="16Gi", pods=20).not_ready().obj))
    for i in range(4):  # a-down is the emptiest and first by name, yet never chosen
        assert twin.schedule(make_pod(f"a{i}").requests(cpu="100m").obj) != "a-down"
        assert twin.schedule(make_pod(f"b{i}").requests(cpu="200m").obj) != "a-down"  # one row changes
    assert twin.fwks[0].remembered.hits == 8


def test_sampling_takes_the_full_evaluation():
    twin = Twin({"percentageOfNodesToScore": 50, "seed": 5}, time.time)
    for i in range(150):
        twin.each(lambda c, i=i: c.set_node(make_node(f"n{i:03d}").capacity(cpu=4, memory="8Gi", pods=10).obj))
    for i in range(20):  # every pod ties on every node: the sample (100 of 150) decides among fewer
        twin.schedule(make_pod(f"p{i}").requests(cpu="100m").obj)
    assert twin.fwks[0].remembered.hits == 0


def test_a_filter_that_is_not_row_local_is_never_remembered(monkeypatch):
    from corral.scheduler.framework.interface import ALL_PASS

    class Everywhere(Plugin):  # a custom filter that promises nothing about rows
        NAME = "EverywhereForTest"

        def filter(self, state, pod, candidates):
            return ALL_PASS

    monkeypatch.setitem(REGISTRY, Everywhere.NAME, Everywhere)
    twin = Twin({"profiles": [{"schedulerName": "default-scheduler",
                               "plugins": {"filter": {"enabled": [{"name": Everywhere.NAME}]}}}]}, time.time)
    twin.each(lambda c: c.set_node(make_node("n0").capacity(cpu=4, memory="8Gi", pods=10).obj))
    twin.schedule(make_pod("p").requests(cpu="1").obj)
    assert twin.fwks[0].remembered.hits == 0


def test_pods_of_one_spec_each_with_labels_of_its_own_keep_a_bounded_number_of_shared_signatures():
    twin = basic_twin(3)
    infos = []
    for i in range(remembered.SHARED_SIGNATURES + 10):  # a StatefulSet's pods: a label of their own each
        obj = make_pod(f"s{i}").labels(name=f"s{i}").requests(cpu="10m").obj
        twin.schedule(obj)
        infos.append(PodInfo.from_object(obj))
    assert infos[0].shared is infos[-1].shared
    assert 0 < len(infos[-1].shared) <= remembered.SHARED_SIGNATURES


def test_a_custom_row_local_filter_reading_more_than_the_template_gets_each_pods_own_signature(monkeypatch):
    """A plugin that does not declare TEMPLATE_SIGNATURE may read anything of the pod (here its
    name): pods of one spec and labels are then signed one by one, not shared."""
    class NodeOfSameDigit(Plugin):
        NAME = "NodeOfSameDigitForTest"
        ROW_LOCAL_FILTER = True

        def signature(self, pod):
            return pod.name[-1]

        def filter_rows(self, state, pod, rows):
            names = self.cache.table.names
            return np.array([names[int(r)][-1] == pod.name[-1] for r in rows], dtype=bool)

        def filter(self, state, pod, candidates):
            from corral.scheduler.framework.interface import FilterResult
            size = self.cache.table.size
            return FilterResult.reject_where(~self.filter_rows(state, pod, np.arange(size)), "other digit")

    monkeypatch.setitem(REGISTRY, NodeOfSameDigit.NAME, NodeOfSameDigit)
    twin = Twin({"profiles": [{"schedulerName": "default-scheduler",
                               "plugins": {"filter": {"enabled": [{"name": NodeOfSameDigit.NAME}]}}}]}, time.time)
    for i in range(3):
        twin.each(lambda c, i=i: c.set_node(make_node(f"n{i}").capacity(cpu=4, memory="8Gi", pods=10).obj))
    pods = ["p0", "p1", "p2", "q1"]
    assert [twin.schedule(make_pod(name).requests(cpu="1").obj) for name in pods] == ["n0", "n1", "n2", "n1"]
    assert twin.fwks[0].remembered.hits == 4


def test_a_row_local_plugin_s_cycle_state_reaches_each_of_its_row_by_row_answers(monkeypatch):
    """A custom row-local filter and scorer that keep what PreFilter and PreScore found in the
    cycle's state: every path of a remembered decision (one row, a few rows, many rows changed since)
    hands them the cycle's state, as the full evaluation does; and only the rows that changed are
    evaluated again, one by one in plain Python when they are few (up to SCALAR_ROWS), else together
    in columns: what keeps a decision's cost from growing with the cluster."""
    from corral.scheduler.framework.interface import FilterResult

    calls: dict[int, list[tuple[str, int]]] = {}  # per cache: (method, rows it was asked about)

    class RackOfPod(Plugin):  # nodes of the pod's rack; scored by the pod's weight and the node's slot
        NAME = "RackOfPodForTest"
        ROW_LOCAL_FILTER = ROW_LOCAL_SCORE = True

        def _called(self, method: str, rows: int) -> None:
            calls.setdefault(id(self.cache), []).append((method, rows))

        def signature(self, pod):
            return pod.labels.get("rack"), pod.labels.get("weight")

        def pre_filter(self, state, pod):
            state[self.NAME] = pod.labels["rack"]
            return SUCCESS

        def _fits(self, state, row: int) -> bool:
            return self.cache.table.node_labels(row).get("rack") == state[self.NAME]

        def _slot(self, state, row: int) -> float:
            return state[self.NAME + "/weight"] * float(self.cache.table.node_labels(row).get("slot", "0"))

        def filter(self, state, pod, candidates):
            self._called("filter", self.cache.table.size)
            return FilterResult.reject_where(
                np.array([not self._fits(state, r) for r in range(self.cache.table.size)], dtype=bool), "other rack")

        def filter_rows(self, state, pod, rows):
            self._called("filter_rows", len(rows))
            return np.array([self._fits(state, int(r)) for r in rows], dtype=bool)

        def filter_one(self, state, pod, row):
            self._called("filter_one", 1)
            return self._fits(state, row)

        def pre_score(self, state, pod, rows):
            state[self.NAME + "/weight"] = float(pod.labels["weight"])
            return SUCCESS

        def score_one(self, state, pod, row):
            self._called("score_one", 1)
            return self._slot(state, row)

        def score(self, state, pod, rows):
            every = np.array([self._slot(state, r) for r in range(self.cache.table.size)])[rows]
            self._called("score", len(every))
            return every

    monkeypatch.setitem(REGISTRY, RackOfPod.NAME, RackOfPod)
    twin = Twin({"tieBreak": "name", "profiles": [{"schedulerName": "default-scheduler", "plugins": {
        "preFilter": {"enabled": [{"name": RackOfPod.NAME}]}, "filter": {"enabled": [{"name": RackOfPod.NAME}]},
        "preScore": {"enabled": [{"name": RackOfPod.NAME}]},
        "score": {"enabled": [{"name": RackOfPod.NAME, "weight": 1}]}}}]}, time.time)
    node = lambda i, slot: make_node(f"n{i:02d}").capacity(cpu=8, memory="8Gi", pods=50).labels(  # noqa: E731
        rack="r1" if i % 2 else "r0", slot=str(slot)).obj
    for i in range(40):
        twin.each(lambda c, i=i: c.set_node(node(i, i % 5)))
    pod = lambda name: make_pod(name).labels(rack="r1", weight="3").requests(cpu="100m").obj  # noqa: E731
    fast = calls.setdefault(id(twin.caches[0]), [])
    chosen, asked = [twin.schedule(pod("p0"), explain=False)], [list(fast)]
    # Changed since the last decision: the node it chose and these relabelled, 2, 4, then 6 rows (n07 twice).
    for changed in ([1], [3, 5, 7], [1, 3, 5, 7, 9, 11]):
        for i in changed:
            twin.each(lambda c, i=i: c.set_node(node(i, (i * 7) % 5)))
        fast.clear()
        chosen.append(twin.schedule(pod(f"p{len(chosen)}"), explain=False))
        asked.append(list(fast))
    assert twin.fwks[0].remembered.hits == 4
    assert chosen == ["n09", "n19", "n07", "n29"]  # slot 4 of rack r1, the emptiest first, by name
    assert asked == [
        [("filter_rows", 40), ("score", 40)],
        [("filter_one", 1)] * 2 + [("score_one", 1)] * 2,
        [("filter_one", 1)] * 4 + [("score_one", 1)] * 4,
        [("filter_rows", 6), ("score", 6)],
    ]


@pytest.mark.parametrize("requests, taken, ignored, fits", [
    pytest.param({"ephemeral_storage": "1Gi"}, {}, (), True, id="ephemeral storage is checked under its own name"),
    pytest.param({"memory": "1Gi"}, {"cpu": "6"}, (), True,
                 id="a node overcommitted on cpu takes a pod that asks for no cpu"),
    pytest.param({"cpu": "1m"}, {"cpu": "4"}, (), False, id="a millicpu more than is free does not fit"),
    pytest.param({"example.com/gpu": "1"}, {}, ("example.com/gpu",), True,
                 id="a resource an extender manages is not the scheduler's to check"),
])
def test_a_node_that_changed_is_judged_row_by_row_as_the_columns_judge_it(requests, taken, ignored, fits):
    """Both nodes change between two decisions of one signature (n0 cordoned, n1 written again): their
    fit is judged again in plain Python (NodeResourcesFit.filter_one), which must answer as the
    column filter does."""
    twin = Twin({"tieBreak": "name"}, time.time)
    if ignored:
        for fwk in twin.fwks:
            next(p for p in fwk.filters if p.NAME == "NodeResourcesFit").ignored_resources = frozenset(ignored)
    node = lambda name: make_node(name).capacity(  # noqa: E731
        cpu=4, memory="8Gi", pods=10, ephemeral_storage="10Gi", **{"example.com/gpu": 0})
    for name in ("n0", "n1"):
        twin.each(lambda c, name=name: c.set_node(node(name).obj))
    pod = lambda name: make_pod(name).requests(**requests).obj  # noqa: E731
    assert twin.schedule(pod("p0")) == "n0"  # remembered from here on
    if taken:
        hog = PodInfo.from_object(make_pod("hog").requests(**taken).obj)
        twin.each(lambda c: c.assume(hog, "n1"))
    twin.each(lambda c: c.set_node(node("n0").unschedulable().obj))
    twin.each(lambda c: c.set_node(node("n1").obj))
    assert twin.schedule(pod("p1")) == ("n1" if fits else None)
    assert twin.fwks[0].remembered.hits == 2 if fits else 1


def test_spread_constraints_that_differ_are_remembered_apart():
    twin = zoned_twin("z1", "z1", "z2", "z3")
    for name, node in (("a0", "n0"), ("a1", "n0")):
        place(twin, name, node, "a")
    other = lambda name: make_pod(name).labels(app="a").requests(cpu="100m").spread(  # noqa: E731
        1, "topology.kubernetes.io/zone", app="b").obj
    for i in range(4):  # z1 holds two pods app=a selects, none app=b selects: two signatures, alternately
        assert probe(twin, spread(f"t{i}", 1))[1] == 2
        assert probe(twin, other(f"u{i}"))[1] == 4
    assert twin.fwks[0].remembered.hits == 8


def test_tolerations_that_differ_in_any_part_the_filter_reads_are_remembered_apart():
    twin = Twin({}, time.time)
    for name in ("tainted-a", "tainted-b"):  # a pod lands on one: the other's row is remembered
        twin.each(lambda c, name=name: c.set_node(make_node(name).capacity(cpu=8, memory="8Gi", pods=10)
                                                  .taint("dedicated", "x", "NoSchedule").obj))
    twin.each(lambda c: c.set_node(make_node("plain").capacity(cpu=1, memory="1Gi", pods=10).obj))
    tolerating = dict(key="dedicated", value="x", effect="NoSchedule")
    for i, (change, node) in enumerate([({}, "tainted"), ({"effect": "NoExecute"}, "plain"),
                                        ({}, "tainted"), ({"value": "y"}, "plain"),
                                        ({"key": "other"}, "plain"), ({}, "tainted"),
                                        ({"value": "", "operator": "Exists"}, "tainted"),
                                        ({"value": "", "operator": "Equal"}, "plain")]):
        pod = make_pod(f"t{i}").requests(cpu="100m").toleration(**{**tolerating, **change}).obj
        assert twin.schedule(pod).startswith(node), change  # an emptier node, unless the taint bars it


def test_a_toleration_validation_would_refuse_still_makes_a_signature():
    twin = basic_twin(3)  # the scheduler also meets objects no API validated (a plan's, a test's)
    pod = make_pod("odd").requests(cpu="100m").obj
    pod["spec"]["tolerations"] = [{"key": ["not", "a", "string"], "operator": "Exists", "extra": {"a": 1}}]
    assert twin.schedule(pod) is not None


def test_without_score_plugins_every_node_ties_at_every_decision():
    twin = Twin({"profiles": [{"schedulerName": "default-scheduler",
                               "plugins": {"score": {"disabled": [{"name": "*"}]}}}]}, time.time)
    node = lambda i, rack: make_node(f"n{i}").capacity(cpu=4, memory="8Gi", pods=10).labels(rack=rack).obj  # noqa: E731
    for i in range(40):
        twin.each(lambda c, i=i: c.set_node(node(i, "r1" if i == 39 else "r0")))
    for i in range(12):
        twin.schedule(make_pod(f"p{i}").requests(cpu="100m").obj)
    assert twin.fwks[0].remembered.hits == 12
    for i in range(6):  # more rows changed at once than are scored one by one: no column to sum either
        twin.each(lambda c, i=i: c.set_node(node(i, "r1")))
    twin.schedule(make_pod("q").requests(cpu="100m").obj)
    assert twin.fwks[0].remembered.hits == 13


def test_at_most_so_many_signatures_are_remembered():
    from corral.scheduler.framework.remembered import MAX_SIGNATURES

    twin = basic_twin(4)
    for i in range(MAX_SIGNATURES + 6):  # each cpu request its own signature
        twin.schedule(make_pod(f"p{i}").requests(cpu=f"{10 + i}m").obj)
    assert len(twin.fwks[0].remembered.entries) == MAX_SIGNATURES


def test_a_resource_no_node_declares_is_short_everywhere_when_many_rows_are_judged_again():
    """Past SCALAR_ROWS changed rows NodeResourcesFit answers for them in columns; a resource no node
    declares has no column at all: every one of those rows is short of it (and nothing raises)."""
    twin = Twin({"tieBreak": "name"}, time.time)
    node = lambda name: make_node(name).capacity(cpu=4, memory="8Gi", pods=10)  # noqa: E731
    names = [f"n{i}" for i in range(remembered.SCALAR_ROWS + 4)]
    for name in names:
        twin.each(lambda c, name=name: c.set_node(node(name).obj))
    pod = lambda name: make_pod(name).requests(cpu="1", **{"example.com/fpga": "1"}).obj  # noqa: E731
    assert twin.schedule(pod("p0")) is None
    for name in names:  # every row written again: judged again, in columns
        twin.each(lambda c, name=name: c.set_node(node(name).labels(again="yes").obj))
    assert twin.schedule(pod("p1")) is None


def beating_node(name: str, cpu: int, beat: float) -> dict:
    """A node whose Ready heartbeat was at ``beat`` (seconds since the epoch)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(beat))
    return make_node(name).capacity(cpu=cpu, memory="64Gi", pods=110).heartbeat_at(stamp).obj


def test_a_heartbeat_growing_stale_with_no_node_changing_is_seen_by_the_remembered_decision():
    """Time alone makes a node NotReady for scheduling (its heartbeat past 90 s): no row changes, so
    what the remembered decision kept must be judged again for it (NodeReady's memo key)."""
    now = [1_000_000.0]
    twin = Twin({"tieBreak": "name"}, lambda: now[0])

    twin.each(lambda c: c.set_node(beating_node("big", 64, now[0])))  # the emptiest: chosen while fresh
    twin.each(lambda c: c.set_node(beating_node("small", 4, now[0])))
    pod = lambda name: make_pod(name).requests(cpu="100m").obj  # noqa: E731
    assert twin.schedule(pod("p0")) == "big"  # remembered from here on
    now[0] += 60
    twin.each(lambda c: c.set_node(beating_node("small", 4, now[0])))  # small beats again; big says nothing
    assert probe(twin, pod("p1")) == ("big", 2)  # decided, not carried out: no row changes after it
    now[0] += 40  # big last beat 100 s ago: stale; small 40 s ago
    assert twin.schedule(pod("p2")) == "small"


def test_heartbeats_growing_stale_one_after_another_with_no_node_changing_are_each_seen():
    """The same twice over: each time a heartbeat ages past the limit, with no row changed between,
    the remembered decision judges the nodes again (not only the first time)."""
    now = [1_000_000.0]
    twin = Twin({"tieBreak": "name"}, lambda: now[0])

    for name, cpu in (("big", 64), ("mid", 16), ("small", 4)):  # the emptiest is chosen while fresh
        twin.each(lambda c, name=name, cpu=cpu: c.set_node(beating_node(name, cpu, now[0])))
    pod = lambda name: make_pod(name).requests(cpu="100m").obj  # noqa: E731
    assert twin.schedule(pod("p0")) == "big"
    now[0] += 50
    twin.each(lambda c: c.set_node(beating_node("mid", 16, now[0])))
    now[0] += 20
    twin.each(lambda c: c.set_node(beating_node("small", 4, now[0])))
    assert probe(twin, pod("p1")) == ("big", 3)  # big last beat 70 s ago
    now[0] += 25
    assert probe(twin, pod("p2")) == ("mid", 2)  # big 95 s ago: stale
    now[0] += 50
    assert probe(twin, pod("p3")) == ("small", 1)  # mid 95 s ago: stale too


@pytest.mark.parametrize("measured", ["every", "first"])
def test_download_time_takes_part_with_every_node_feasible_where_image_locality_is_off(measured):
    """NetworkThroughput (not row-local: the full evaluation decides) takes part when some feasible
    node has a measured link; with ImageLocality off, nothing else sends the pod to the full
    evaluation. With every node feasible its PreScore is asked about every row, the first among them:
    asked about none, or all but the first (the only one measured), it would skip."""
    twin = Twin({"tieBreak": "name", "profiles": [{"schedulerName": "default-scheduler", "plugins": {
        "score": {"disabled": [{"name": "ImageLocality"}]}}}]}, time.time)
    for i in range(4):
        b = make_node(f"n{i}").capacity(cpu=4, memory="8Gi", pods=10)
        if i == 3:
            b.image("registry.local/app:1", 500 * 1024 * 1024)
        if measured == "every" or i == 0:
            b.download(f"{(i + 1) * 100}Mbps")
        twin.each(lambda c, b=b: c.set_node(b.obj))
    pod = lambda name: make_pod(name).requests(cpu="100m").image("registry.local/app:1").obj  # noqa: E731
    for n in range(3):
        assert twin.schedule(pod(f"p{n}")) is not None  # the twins agree on the node and every plugin's score
    result = schedule_pod(twin.fwks[0], twin.caches[0], PodInfo.from_object(pod("q")), scores=True)
    assert "NetworkThroughput" in result.scores.by_plugin and "ImageLocality" not in result.scores.by_plugin


def test_two_domain_filters_take_the_full_evaluation(monkeypatch):
    """A custom domain filter beside PodTopologySpread (here one that allows only the zones with the
    fewest matching pods, whatever the skew): the remembered path judges one domain filter's sums, so
    with two the pod is decided by the full evaluation, and both are obeyed."""
    from corral.scheduler.plugins.pod_topology_spread import PodTopologySpread

    class FewestOnly(PodTopologySpread):
        NAME = "FewestOnlyForTest"

        def domain_allowed(self, pod, c, totals, present):
            present = present.copy()
            present[0] = False
            allowed = totals == (totals[present].min() if present.any() else 0)
            allowed[0] = False
            return allowed

    monkeypatch.setitem(REGISTRY, FewestOnly.NAME, FewestOnly)
    twin = Twin({"tieBreak": "name", "profiles": [{"schedulerName": "default-scheduler", "plugins": {
        "preFilter": {"enabled": [{"name": FewestOnly.NAME}]},
        "filter": {"enabled": [{"name": FewestOnly.NAME}]}}}]}, time.time)
    for name, zone, cpu in [("n0", "z1", 64), ("n1", "z2", 4)]:  # LeastAllocated prefers n0
        twin.each(lambda c, name=name, zone=zone, cpu=cpu: c.set_node(
            make_node(name).capacity(cpu=cpu, memory="64Gi", pods=20).zone(zone).obj))
    pod = lambda name: (make_pod(name).labels(app="a").requests(cpu="100m")  # noqa: E731
                        .spread(2, "topology.kubernetes.io/zone", app="a").obj)
    assert [twin.schedule(pod(f"p{i}")) for i in range(4)] == ["n0", "n1", "n0", "n1"]
    assert twin.fwks[0].remembered.hits == 0
