"""The scheduler cache against a plain-Python model: any sequence of node and pod changes (adds,
updates, moves, relabels, finishes, deletions, assumed bindings confirmed or forgotten) leaves every
column equal to what a from-scratch count of the pods gives — requested, free, non-zero requests,
host ports, pods per selector, existing pods' affinity terms — with the columns growing from two rows."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.api.selectors import LabelSelector, Requirement
from corral.scheduler.cache.cache import Cache, PodGroups
from corral.scheduler.framework.podinfo import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, PodInfo
from corral.testing.builders import make_pod

Mi = 1024 * 1024
NODES = [f"n{i}" for i in range(6)]
PODS = [f"p{i}" for i in range(8)]
HOST = "kubernetes.io/hostname"


def node_obj(name: str, cpu: int, gpu: int, zone: str, taint: bool) -> dict:
    """A node; a tainted one is also cordoned and reports an image and its throughput."""
    alloc = {"cpu": f"{cpu}m", "memory": "8Gi", "pods": "20", **({"example.com/gpu": str(gpu)} if gpu else {})}
    status = {"allocatable": alloc, "conditions": [{"type": "Ready", "status": "True",
                                                    "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}
    if taint:
        status |= {"images": [{"names": ["app:1"], "sizeBytes": 10 * Mi}],
                   "network": {"throughput": {"download": "900Mbps"}}}
    return {"metadata": {"name": name, "labels": {"zone": zone}},
            "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}] if taint else [],
                     "unschedulable": taint},
            "status": status}


def term(app: str) -> dict:
    return {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": app}}}


def pod_obj(name: str, ns: str, app: str, cpu: int, mem_mi: int, port: bool, gpu: int, anti: bool,
            prefer: int, prefer_anti: bool, needs: bool, node: str = "", phase: str = "Running") -> dict:
    requests = {**({"cpu": f"{cpu}m"} if cpu else {}), **({"memory": f"{mem_mi}Mi"} if mem_mi else {}),
                **({"example.com/gpu": str(gpu)} if gpu else {})}
    c = {"name": "c", "image": "app:1", "resources": {"requests": requests}}
    if port:
        c["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    affinity: dict = {}
    if anti:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term("web")]}
    if prefer_anti:
        affinity.setdefault("podAntiAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": 5, "podAffinityTerm": term("db")}]
    if prefer:
        affinity["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": prefer, "podAffinityTerm": term("db")}]}
    if needs:
        affinity.setdefault("podAffinity", {})["requiredDuringSchedulingIgnoredDuringExecution"] = [term("db")]
    return {"metadata": {"name": name, "namespace": ns, "labels": {"app": app}, "uid": f"u-{name}"},
            "spec": {"containers": [c], "affinity": affinity, **({"nodeName": node} if node else {})},
            "status": {"phase": phase}}


pods_st = st.builds(pod_obj, st.sampled_from(PODS), st.sampled_from(["default", "team"]),
                    st.sampled_from(["web", "db"]), st.sampled_from([0, 100, 250]), st.sampled_from([0, 64]),
                    st.booleans(), st.sampled_from([0, 0, 1, 2]), st.booleans(), st.sampled_from([0, 10, 20]),
                    st.booleans(), st.booleans())
ops_st = st.lists(st.one_of(
    st.tuples(st.just("node"), st.builds(node_obj, st.sampled_from(NODES), st.sampled_from([1, 500, 2000]),
                                         st.sampled_from([0, 1, 2]), st.sampled_from(["a", "b"]), st.booleans())),
    st.tuples(st.just("remove node"), st.sampled_from(NODES)),
    st.tuples(st.just("bind"), pods_st, st.sampled_from(NODES)),
    st.tuples(st.just("finish"), st.sampled_from(PODS), st.sampled_from(["Succeeded", "Failed"])),
    st.tuples(st.just("unbind"), st.sampled_from(PODS)),
    st.tuples(st.just("relabel"), st.sampled_from(PODS), st.sampled_from(["web", "db", "cache"])),
    st.tuples(st.just("delete"), st.sampled_from(PODS)),
    st.tuples(st.just("assume"), pods_st, st.sampled_from(NODES)),
    st.tuples(st.just("forget"), st.sampled_from(PODS)),
    st.tuples(st.just("confirm"), st.sampled_from(PODS)),
), max_size=40)


class Model:
    """What the cache should hold, kept the plain way: node objects, and pods with their node."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict] = {}
        self.pods: dict[str, tuple[dict, str, bool]] = {}  # key → (object, node, assumed)

    def rows(self, cache: Cache) -> set[str]:
        """Node names that must have a row: every node, and every node a pod is counted on."""
        return set(self.nodes) | {node for _, node, _ in self.pods.values()}


def apply(cache: Cache, model: Model, op: tuple) -> None:
    kind = op[0]
    if kind == "node":
        obj = op[1]
        cache.set_node(obj)
        model.nodes[obj["metadata"]["name"]] = obj
    elif kind == "remove node":
        cache.remove_node(op[1])
        model.nodes.pop(op[1], None)
    elif kind == "bind":
        obj, node = op[1], op[2]
        obj["spec"]["nodeName"] = node
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        held = model.pods.get(key)
        if held is not None and held[2]:
            return  # an assumed pod is confirmed by "confirm", not replaced
        if held is not None and (held[0]["spec"]["containers"], held[0]["spec"]["affinity"]) != (
                obj["spec"]["containers"], obj["spec"]["affinity"]):
            # A pod's spec cannot change (the API refuses it): another spec under this name is a
            # pod deleted and created again, which a relist can show as one update.
            obj["metadata"]["uid"] = held[0]["metadata"]["uid"] + "+"
        elif held is not None:
            obj["metadata"]["uid"] = held[0]["metadata"]["uid"]
        cache.set_pod(obj)
        model.pods[key] = (obj, node, False)
    elif kind in ("finish", "unbind", "delete", "forget", "confirm", "relabel"):
        matches = [k for k in model.pods if k.endswith("/" + op[1])]
        if not matches:
            return
        key = matches[0]
        obj, node, assumed = model.pods[key]
        if kind == "delete":
            cache.remove_pod(key)
            del model.pods[key]
        elif kind == "forget":
            cache.forget(key)
            if assumed:
                del model.pods[key]
        elif kind == "confirm":
            if assumed:
                cache.set_pod(obj)
                model.pods[key] = (obj, node, False)
        elif assumed:
            return  # informer news about a pod whose binding is on its way does not come before it
        elif kind == "relabel":  # labels may change on a running pod; the uid and spec stay
            obj = {**obj, "metadata": {**obj["metadata"], "labels": {"app": op[2]}}}
            cache.set_pod(obj)
            model.pods[key] = (obj, node, False)
        elif kind == "finish":
            cache.set_pod({**obj, "status": {"phase": op[2]}})
            del model.pods[key]
        else:
            cache.set_pod({**obj, "spec": {k: v for k, v in obj["spec"].items() if k != "nodeName"}})
            del model.pods[key]
    elif kind == "assume":
        obj, node = op[1], op[2]
        key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
        if key in model.pods:
            return
        obj["spec"]["nodeName"] = node
        cache.assume(PodInfo.from_object(obj), node)
        model.pods[key] = (obj, node, True)


def check(cache: Cache, model: Model) -> None:
    table = cache.table
    assert set(table.row_of) == model.rows(cache)
    assert {table.names[r] for r in table.valid_rows()} == set(model.nodes)
    assert table.node_count == len(model.nodes)
    # names and objects mirror row_of and the valid rows; nothing is left behind in freed rows
    assert {r: n for r, n in enumerate(table.names) if n is not None} == {r: n for n, r in table.row_of.items()}
    assert [r for r, o in enumerate(table.objects) if o is not None] == table.valid_rows().tolist()
    assert len(table.names) == len(table.objects) == table.capacity
    assert set(cache.pods) == set(model.pods)
    assert {k for k, c in cache.pods.items() if c.assumed} == {k for k, (_, _, a) in model.pods.items() if a}

    on: dict[str, list[dict]] = {n: [] for n in model.rows(cache)}
    for obj, node, _ in model.pods.values():
        on[node].append(obj)

    def want(node: str, f) -> int:
        return sum(f(p) for p in on[node])

    def req(p: dict, name: str) -> int:
        return PodInfo.from_object(p).requests.__getattribute__(name)

    for name, row in table.row_of.items():
        node = model.nodes.get(name)
        alloc_cpu = int(node["status"]["allocatable"]["cpu"][:-1]) if node else None
        cpu = want(name, lambda p: req(p, "cpu"))
        mem = want(name, lambda p: req(p, "memory"))
        gpu = want(name, lambda p: dict(PodInfo.from_object(p).requests.extended).get("example.com/gpu", 0))
        assert table.requested["cpu"][row] == cpu and table.requested["memory"][row] == mem
        assert table.requested["pods"][row] == len(on[name])
        assert table.requested_f["cpu"][row] == float(cpu) and table.requested_f["memory"][row] == float(mem)
        nz_cpu = want(name, lambda p: req(p, "cpu") or DEFAULT_MILLI_CPU_REQUEST)
        nz_mem = want(name, lambda p: req(p, "memory") or DEFAULT_MEMORY_REQUEST)
        assert (table.nonzero_cpu[row], table.nonzero_memory[row]) == (nz_cpu, nz_mem)
        assert (table.nonzero_f["cpu"][row], table.nonzero_f["memory"][row]) == (float(nz_cpu), float(nz_mem))
        ports = table.ports.get(("TCP", 8080))
        assert (0 if ports is None else ports[row]) == want(
            name, lambda p: int(any("ports" in c for c in p["spec"]["containers"])))
        gpu_requested = table.requested.get("example.com/gpu")
        assert (0 if gpu_requested is None else gpu_requested[row]) == gpu
        if node is not None:
            gpu_alloc = int(node["status"]["allocatable"].get("example.com/gpu", 0))
            assert table.allocatable["cpu"][row] == alloc_cpu and table.free["cpu"][row] == alloc_cpu - cpu
            assert table.alloc_f["cpu"][row] == float(alloc_cpu)
            assert table.alloc_safe_f["cpu"][row] == float(max(alloc_cpu, 1))
            assert table.free["memory"][row] == 8 * 1024 * Mi - mem
            assert table.free["pods"][row] == 20 - len(on[name])
            assert (table.free["example.com/gpu"][row] if "example.com/gpu" in table.free else 0) == gpu_alloc - gpu
            assert table.node_labels(row) == {"zone": node["metadata"]["labels"]["zone"], HOST: name}
            for key, value in table.node_labels(row).items():  # the columns say the same as the dict
                assert table.labels.value(key, int(table.labels.column(key)[row])) == value
            assert bool(table.taints[row].any()) == bool(node["spec"]["taints"])
            assert table.ready[row] and table.unschedulable[row] == node["spec"]["unschedulable"]
            image = table.images.get("app:1")
            assert (image is not None and bool(image[row])) == node["spec"]["unschedulable"]
    if model.nodes:
        assert table.offered_everywhere("example.com/gpu") == all(
            "example.com/gpu" in n["status"]["allocatable"] for n in model.nodes.values())
    for row in range(table.size):  # rows no node and no pod holds are blank, ready for reuse
        if table.names[row] is None:
            assert not table.valid[row] and not table.ready[row] and not table.unschedulable[row]
            assert table.heartbeat[row] == 0.0 and np.isnan(table.download_bps[row])
            for columns in (table.allocatable, table.requested, table.free, table.ports):
                assert not any(col[row] for col in columns.values())
            assert not any(col[row] for col in table.images.values())
            assert (table.nonzero_cpu[row], table.nonzero_memory[row]) == (0, 0)
            for res in ("cpu", "memory"):
                assert table.alloc_f[res][row] == table.nonzero_f[res][row] == table.requested_f[res][row] == 0.0
                assert table.alloc_safe_f[res][row] == 1.0

    for ns in ("default", "team"):
        for app in ("web", "db"):
            selector = LabelSelector((Requirement("app", "=", frozenset({app})),))
            counts = cache.count_selected(ns, selector)
            for name, row in table.row_of.items():
                assert counts[row] == sum(1 for p in on[name] if p["metadata"]["namespace"] == ns
                                          and p["metadata"]["labels"]["app"] == app)
    anti_want, pref_want = Counter(), Counter()
    for obj, node, _ in model.pods.values():
        info = PodInfo.from_object(obj)
        for t in info.anti_affinity:
            anti_want[(t, node)] += 1
        for w in info.preferred_affinity:
            pref_want[((w.term, w.weight, False), node)] += 1
        for w in info.preferred_anti_affinity:
            pref_want[((w.term, w.weight, True), node)] += 1
    for groups, wanted in ((cache.anti_affinity, anti_want), (cache.preferred_terms, pref_want)):
        assert set(groups.terms) == {k for k, _ in wanted}  # a term no pod carries any more is dropped
        for key, col in groups.active():
            for name, row in table.row_of.items():
                assert col[row] == wanted[(key, name)]
    assert cache.pods_with_affinity == sum(1 for obj, _, _ in model.pods.values()
                                           if PodInfo.from_object(obj).affinity)

    # preemption's pod columns: one valid slot per counted pod, holding its node row, priority,
    # requests and host ports; freed slots hold nothing
    columns = cache.columns
    slots = {key: cached.slot for key, cached in cache.pods.items()}
    assert sorted(slots.values()) == np.flatnonzero(columns.valid[:columns.size]).tolist()
    for key, slot in slots.items():
        obj, node, _ = model.pods[key]
        info = PodInfo.from_object(obj)
        assert columns.keys[slot] == key and columns.row[slot] == table.row_of[node]
        assert columns.priority[slot] == info.priority and columns.has_ports[slot] == bool(info.host_ports)
        assert (columns.requests["cpu"][slot], columns.requests["memory"][slot]) == (
            info.requests.cpu, info.requests.memory)
        gpu = columns.requests.get("example.com/gpu")
        assert (0 if gpu is None else gpu[slot]) == dict(info.requests.extended).get("example.com/gpu", 0)
        assert columns.label_sets[columns.label_set[slot]] == (info.namespace, info.labels)
    for slot in range(columns.size):
        if not columns.valid[slot]:
            assert columns.keys[slot] is None and columns.row[slot] == -1
            assert not any(col[slot] for col in columns.requests.values())
    assert sum(columns.priorities.values()) == len(slots)
    # the pods of each node, as preemption lists them (pods_on): every counted pod under its row, no
    # row left without pods
    by_row: dict[int, set[str]] = {}
    for key, cached in cache.pods.items():
        by_row.setdefault(cached.row, set()).add(key)
    assert cache.on_row == by_row


@settings(max_examples=150, deadline=None)
@given(ops_st)
def test_any_sequence_of_changes_leaves_the_cache_equal_to_a_recount(ops):
    cache, model = Cache(capacity=2), Model()
    assert cache.table.capacity == cache.columns.capacity == 2  # so that the columns grow within a few nodes and pods
    for op in ops:
        apply(cache, model, op)
        check(cache, model)


def test_assuming_a_pod_twice_is_refused():
    cache = Cache()
    info = PodInfo.from_object(pod_obj("p", "default", "web", 100, 0, False, 0, False, 0, False, False))
    cache.assume(info, "n1")
    try:
        cache.assume(info, "n2")
    except ValueError as exc:
        assert str(exc) == "pod default/p is already in the cache"
    else:
        raise AssertionError("assumed twice")


def test_a_pod_on_an_unknown_node_holds_a_row_until_it_leaves():
    cache = Cache()
    cache.set_pod(pod_obj("p", "default", "web", 100, 0, False, 0, False, 0, False, False, node="ghost"))
    row = cache.table.row_of["ghost"]
    assert not cache.table.valid[row] and cache.table.requested["cpu"][row] == 100
    cache.set_node(node_obj("ghost", 500, 0, "a", False))  # the node arrives: the same row
    assert cache.table.row_of["ghost"] == row and cache.table.free["cpu"][row] == 400
    cache.remove_node("ghost")
    assert cache.table.row_of["ghost"] == row  # still holds a pod
    cache.remove_pod("default/p")
    assert "ghost" not in cache.table.row_of
    cache.set_node(node_obj("other", 500, 0, "a", False))
    assert cache.table.row_of["other"] == row  # the freed row is reused


def test_a_pod_recreated_under_its_name_is_counted_anew_even_without_a_delete_in_between():
    cache = Cache()
    cache.set_node(node_obj("n", 2000, 0, "a", False))
    first = pod_obj("p", "default", "web", 250, 64, False, 0, False, 0, False, False, node="n")
    cache.set_pod(first)
    again = pod_obj("p", "default", "web", 500, 0, False, 0, False, 0, False, False, node="n")
    again["metadata"]["uid"] = "u-p-2"  # deleted and created again; a relist shows only the new one
    cache.set_pod(again)
    row = cache.table.row_of["n"]
    assert (cache.table.requested["cpu"][row], cache.table.requested["memory"][row]) == (500, 0)


def test_bound_pods_given_with_their_json_are_held_as_it_and_read_back_whole():
    """The scheduler process hands the cache each pod with the JSON it came as: a bound pod is held as
    those bytes, not as the dicts and lists of a decoded pod (which the garbage collector would walk
    at every pass: 0.4 s of a pass at 50,000 pods), and preemption and extenders still read the whole
    object. Both ways in: a pod first seen bound (a relist), and a binding of ours confirmed."""
    import gc

    import msgspec

    cache = Cache()
    cache.set_node(node_obj("n", 64000, 0, "a", False))
    pods = [pod_obj(f"p{i}", "default", "web", 10, 0, False, 0, False, 0, False, False, node="n", phase="Running")
            for i in range(300)]
    for p in pods[150:]:  # assumed first, as the scheduler does before its binding is written
        pending = {**p, "spec": {k: v for k, v in p["spec"].items() if k != "nodeName"}, "status": {"phase": "Pending"}}
        cache.assume(PodInfo.from_object(pending), "n")
    raws = [msgspec.json.encode(p) for p in pods]
    gc.collect()
    before = len(gc.get_objects())
    for raw in raws:
        cache.set_pod(msgspec.json.decode(raw), raw)
    gc.collect()
    assert (len(gc.get_objects()) - before) / len(raws) < 3  # held as decoded objects: 6 more a pod
    for i in (7, 200):
        info = cache.pods[f"default/p{i}"].info
        assert info.held is raws[i] and info.obj == pods[i]
        assert not cache.pods[f"default/p{i}"].assumed
    assert cache.table.requested["cpu"][cache.table.row_of["n"]] == 300 * 10


def test_the_first_request_of_an_extended_resource_is_counted_once_in_free():
    cache = Cache()
    cache.set_node(node_obj("n", 2000, 0, "a", False))  # offers no GPU
    cache.set_pod(pod_obj("p", "default", "web", 0, 0, False, 1, False, 0, False, False, node="n"))
    row = cache.table.row_of["n"]
    assert cache.table.free["example.com/gpu"][row] == -1


def test_a_reused_row_keeps_nothing_of_the_node_that_had_it():
    cache = Cache()
    old = node_obj("old", 4000, 2, "a", True)
    old["spec"]["unschedulable"] = True
    old["status"]["images"] = [{"names": ["app:1"], "sizeBytes": 10 * Mi}]
    old["status"]["network"] = {"throughput": {"download": "900Mbps"}}
    cache.set_node(old)
    row = cache.table.row_of["old"]
    cache.remove_node("old")
    new = node_obj("new", 1000, 0, "b", False)
    new["metadata"]["labels"] = {"disk": "ssd"}
    cache.set_node(new)
    table = cache.table
    assert table.row_of == {"new": row} and table.size == 1
    assert table.allocatable["example.com/gpu"][row] == 0 and table.free["example.com/gpu"][row] == 0
    assert table.free["cpu"][row] == 1000 and table.alloc_f["cpu"][row] == 1000.0
    assert not table.taints[row].any() and not table.unschedulable[row] and table.ready[row]
    assert not table.images["app:1"][row] and np.isnan(table.download_bps[row])
    assert table.labels.column("zone")[row] == 0
    assert table.labels.value("disk", int(table.labels.column("disk")[row])) == "ssd"


def test_counts_add_up_every_label_group_a_selector_matches():
    cache = Cache()
    for name in ("n0", "n1"):
        cache.set_node(node_obj(name, 2000, 0, "a", False))
    for i, (version, node) in enumerate([("1", "n0"), ("2", "n0"), ("3", "n1"), ("3", "n0")]):
        pod = pod_obj(f"p{i}", "default", "web", 100, 0, False, 0, False, 0, False, False, node=node)
        pod["metadata"]["labels"]["version"] = version  # three label groups, all app=web
        cache.set_pod(pod)
    counts = cache.count_selected("default", LabelSelector((Requirement("app", "=", frozenset({"web"})),)))
    rows = cache.table.row_of
    assert (counts[rows["n0"]], counts[rows["n1"]]) == (3, 1)


def test_a_term_selecting_namespaces_by_label_sees_a_namespace_labelled_later():
    cache = Cache()
    cache.set_node(node_obj("n0", 2000, 0, "a", False))
    cache.set_namespace({"metadata": {"name": "team"}})
    cache.set_pod(pod_obj("db", "team", "db", 100, 0, False, 0, False, 0, False, False, node="n0"))
    incoming = pod_obj("p", "default", "web", 100, 0, False, 0, False, 0, False, False)
    term = {"topologyKey": HOST, "labelSelector": {"matchLabels": {"app": "db"}},
            "namespaceSelector": {"matchLabels": {"env": "prod"}}}
    incoming["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    (affinity,) = PodInfo.from_object(incoming).affinity
    row = cache.table.row_of["n0"]
    assert cache.count_matching(affinity)[row] == 0
    cache.set_namespace({"metadata": {"name": "team", "labels": {"env": "prod"}}})
    assert cache.count_matching(affinity)[row] == 1
    epoch = cache.table.epoch
    cache.remove_namespace("team")
    assert cache.count_matching(affinity)[row] == 0
    assert cache.table.epoch == epoch + 1  # answers remembered per row start over: a namespace's labels went
    cache.remove_namespace("never-seen")  # nothing to forget: nothing starts over
    assert cache.table.epoch == epoch + 1


def test_a_pod_relabelled_thousands_of_times_leaves_no_empty_label_groups_behind():
    """A soak relabelled each pod as it ran: every label set made a group with a node-wide count
    column, kept after its pods moved on, and the server grew by ~5 MiB a minute."""
    cache = Cache()
    for name in ("n0", "n1"):
        cache.set_node(node_obj(name, 2000, 0, "a", False))
    selector = LabelSelector((Requirement("app", "=", frozenset({"web"})),))
    keep = pod_obj("keep", "default", "web", 100, 0, False, 0, False, 0, False, False, node="n1")
    cache.set_pod(keep)
    pod = pod_obj("p", "default", "web", 100, 0, False, 0, False, 0, False, False, node="n0")
    for n in range(3000):
        pod["metadata"]["labels"]["n"] = str(n)
        cache.set_pod(pod)
        if n % 500 == 0:  # counted right across the clean-ups, the memoised matches included
            counts = cache.count_selected("default", selector)
            assert (counts[cache.table.row_of["n0"]], counts[cache.table.row_of["n1"]]) == (1, 1)
    assert len(cache.pod_groups.groups) <= 2 * 64 + 2
    counts = cache.count_selected("default", selector)
    assert (counts[cache.table.row_of["n0"]], counts[cache.table.row_of["n1"]]) == (1, 1)


# --- the order of importance preemption reprieves victims in --------------------------------------

BASE = 1_700_000_000.0
ABOVE = 10_000  # where the priorities of pods elsewhere in the cache start


@st.composite
def importance_cases(draw):
    """Pods (row, priority, start) across the packed key's limits: rows near 2**22, more than 2**10
    distinct priorities in the cache, start times spread over more than 2**31 seconds, fractions of
    a second, pods not started."""
    count = draw(st.integers(0, 24))
    row_pool = draw(st.sampled_from([[0, 1, 2], [0, 2**22 - 1], [2**22 - 1, 2**22, 2**23 - 1]]))
    priorities = draw(st.sampled_from([[0, 5, 1000], [-10, 0, 2**31 - 1], list(range(0, 2100, 700))]))
    starts = draw(st.sampled_from([
        [BASE, BASE + 1, BASE + 60],
        [BASE, BASE + 0.5, BASE + 2.25],  # fractions: the packed key holds whole seconds only
        [BASE, BASE + 2**31 - 2, BASE + 2**31 - 1, BASE + 2**31, BASE + 2**32],
        [float("inf"), BASE],
    ]))
    pods = [(draw(st.sampled_from(row_pool)), draw(st.sampled_from(priorities)), draw(st.sampled_from(starts)))
            for _ in range(count)]
    others = draw(st.sampled_from([0, 600, 1000, 1030, 2100]))  # distinct priorities of pods elsewhere
    return pods, others


@pytest.mark.parametrize("pods, others", [
    pytest.param([(0, 0, BASE + 0.5), (0, 0, BASE)], 0, id="half a second earlier is more important"),
    pytest.param([(0, 0, BASE), (1, 2**30, BASE)], 1000, id="a priority ranked 1000th still sorts within its node"),
    pytest.param([(0, 0, BASE), (1, 2**30, BASE)], 1030, id="past 1024 distinct priorities too"),
    pytest.param([(0, 0, float("inf")), (0, 0, BASE), (0, 0, BASE + 2**31 - 2)], 0,
                 id="a pod not started after one started 68 years after the first"),
])
def test_victims_are_ordered_by_node_then_priority_then_start_at_the_packed_keys_limits(pods, others):
    ordered_as_a_plain_sort(pods, others)


@settings(max_examples=300, deadline=None)
@given(importance_cases())
def test_victims_are_ordered_by_node_then_priority_then_start_as_a_plain_sort_orders_them(case):
    ordered_as_a_plain_sort(*case)


def ordered_as_a_plain_sort(pods: list[tuple[int, int, float]], others: int) -> None:
    """PodColumns.importance_order of ``pods`` (row, priority, start), with ``others`` distinct
    priorities of pods elsewhere in the cache (from ABOVE up), is the order of a plain sort by row, priority
    (highest first), start (earliest first), slot."""
    from corral.scheduler.cache.pod_columns import PodColumns

    cols = PodColumns(capacity=max(len(pods), 1))
    for i, (_, priority, start) in enumerate(pods):
        cols.priority[i], cols.start[i] = priority, start
    cols.priorities = Counter(p for _, p, _ in pods) + Counter(range(ABOVE, ABOVE + others))
    slots = np.arange(len(pods), dtype=np.int64)
    rows = np.array([r for r, _, _ in pods], dtype=np.int64)
    expected = sorted(range(len(pods)), key=lambda i: (pods[i][0], -pods[i][1], pods[i][2], i))
    assert cols.importance_order(slots, rows).tolist() == expected


def test_lower_priority_takes_the_valid_pods_below_the_priority_on_the_rows_asked_for_and_none_beyond():
    from corral.scheduler.cache.pod_columns import PodColumns

    cols = PodColumns(capacity=2)  # grows on the third pod
    for name, row, priority in [("a", 0, 1), ("b", 1, 1), ("c", 2, 1), ("d", 0, 5), ("gone", 1, 0)]:
        info = PodInfo.from_object({"metadata": {"name": name, "namespace": "default"},
                                    "spec": {"priority": priority, "containers": [{"name": "c"}]}})
        slot = cols.add(f"default/{name}", info, row, start=0.0, terminating=False)
    cols.remove(slot)
    keys = lambda slots: [cols.keys[s] for s in slots]  # noqa: E731
    # Rows 0 and 1 asked for; a pod on row 2, past the mask (a node that joined since), is left out.
    assert keys(cols.lower_priority(5, np.array([True, True]))) == ["default/a", "default/b"]
    assert keys(cols.lower_priority(5, np.array([False, True, True]))) == ["default/b", "default/c"]
    assert keys(cols.lower_priority(1, np.array([True, True, True]))) == []


@pytest.mark.parametrize("live, kept_until, dropped_at", [
    pytest.param(1, 64, 65, id="64 empty groups are kept beside one live one, the 65th starts a clean-up"),
    pytest.param(200, 200, 201, id="beside 200 live groups, empty ones are kept until they outnumber the rest"),
])
def test_empty_label_groups_are_dropped_once_they_outnumber_the_rest_and_64(live, kept_until, dropped_at):
    """One pod relabelled again and again beside ``live`` groups that keep their pods: each label it
    leaves is an empty group, kept until the empty ones number more than 64 and more than half of
    all groups; then every empty one goes at once and the live ones stay."""
    groups = PodGroups(capacity=4)
    for i in range(live):
        groups.add(PodInfo.from_object(make_pod(f"keep{i}").labels(app="keep", i=str(i)).obj), 0, +1)
    label = lambda n: PodInfo.from_object(make_pod("p").labels(app="p", n=str(n)).obj)  # noqa: E731
    groups.add(label(0), 1, +1)
    sizes = {}
    for n in range(dropped_at):
        groups.add(label(n), 1, -1)
        groups.add(label(n + 1), 1, +1)
        sizes[n + 1] = len(groups.groups)
    assert sizes[kept_until] == live + kept_until + 1  # the live ones, the empty ones, the pod's own
    assert sizes[dropped_at] == live + 1
    assert sorted(labels.get("i", "p") for _, labels in groups.groups) == sorted([str(i) for i in range(live)] + ["p"])


def test_pods_of_one_template_coming_and_going_share_one_label_set():
    """Budgets are matched once per distinct (namespace, labels), not once per pod: a thousand pods
    of one Deployment's template, replaced again and again, leave one label set, not one each."""
    cache = Cache()
    cache.set_node(node_obj("n0", 2000, 0, "a", False))
    for i in range(1000):
        cache.set_pod(pod_obj(f"web-{i}", "default", "web", 1, 0, False, 0, False, 0, False, False, node="n0"))
        if i >= 10:
            cache.remove_pod(f"default/web-{i - 10}")
    assert cache.columns.label_sets == [("default", {"app": "web"})]
