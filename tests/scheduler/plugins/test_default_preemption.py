"""DefaultPreemption: which node and which victims, Kubernetes' order case by case, the columns
against the node-by-node dry run, nominations, and what the pod, the victims and explain say."""

from __future__ import annotations

import copy
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.scheduler.framework.interface import CycleState
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.plugins.default_preemption.dry_run import select_victims_on_row
from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import Harness

HOST = "kubernetes.io/hostname"


def started(builder, seconds: int) -> dict[str, Any]:
    """A running pod that started at minute ``seconds`` of 10:00 (a later start is less important)."""
    obj = builder.obj
    obj["status"]["startTime"] = f"2026-11-25T10:{seconds // 60:02d}:{seconds % 60:02d}Z"
    return obj


def low(name: str, node: str, cpu: str, priority: int = 0, start: int = 0, **labels: str) -> dict[str, Any]:
    return started(make_pod(name).requests(cpu=cpu).priority(priority).labels(**labels).node(node), start)


def node(name: str, cpu: int = 4) -> Any:
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=20)


async def preempt(nodes: list, pods: list, preemptor: Any) -> Harness:
    h = Harness()
    for n in nodes:  # built when the cases were collected: their heartbeat is made fresh now
        h.add_node(n.heartbeat_age(0))
    for p in pods:
        h.add_pod(p)
    h.add_pod(preemptor)
    await h.run()
    return h


# --- which victims, which node: Kubernetes' order ---------------------------------------------------

CASES = [
    pytest.param(
        [node("n0")], [low("a", "n0", "1", start=1), low("b", "n0", "1", start=2), low("c", "n0", "2", start=3)],
        "2", {"n0": ["default/c"]},
        id="the victims reprieved first are the most important, and only what the pod needs is taken"),
    pytest.param(
        [node("n0")], [low("a", "n0", "2", priority=5), low("b", "n0", "2", priority=1)],
        "2", {"n0": ["default/b"]},
        id="a higher-priority pod is kept before a lower one"),
    pytest.param(
        [node("n0")], [low("old", "n0", "2", start=1), low("new", "n0", "2", start=50)],
        "2", {"n0": ["default/new"]},
        id="of equal priority the pod that started last goes"),
    pytest.param(
        [node("n0"), node("n1")], [low("a", "n0", "4", priority=5), low("b", "n1", "2", priority=1),
                                   low("c", "n1", "2", priority=1)],
        "4", {"n1": ["default/b", "default/c"]},
        id="the node whose most important victim has the lowest priority wins, even with more victims"),
    pytest.param(
        [node("n0"), node("n1")], [low("a", "n0", "2", priority=3), low("b", "n0", "2", priority=3),
                                   low("c", "n1", "2", priority=3), low("d", "n1", "2", priority=1)],
        "4", {"n1": ["default/c", "default/d"]},
        id="with the same highest priority the smaller sum of priorities wins"),
    pytest.param(
        [node("n0"), node("n1")], [low("a", "n0", "2", priority=1), low("b", "n0", "1"), low("c", "n0", "1"),
                                   low("d", "n1", "2", priority=1), low("e", "n1", "2", priority=1)],
        "4", {"n1": ["default/d", "default/e"]},
        id="each victim weighs 2^31 more in the sum, so fewer victims beat lower priorities"),
    pytest.param(
        [node("n0"), node("n1")], [low("a", "n0", "4", start=10), low("b", "n1", "4", start=40)],
        "4", {"n1": ["default/b"]},
        id="with all else equal the node whose victim started last is chosen"),
    pytest.param(
        [node("n0")], [low("a", "n0", "2", priority=10), low("b", "n0", "2", priority=20)],
        "2", {},
        id="pods of the same or higher priority are never victims"),
    pytest.param(
        [node("n0"), node("n1")], [low("a", "n0", "3"), low("b", "n0", "1", priority=50),
                                   low("c", "n1", "2"), low("d", "n1", "1", priority=50)],
        "4", {},
        id="a node where removing every lower-priority pod is not enough is no candidate"),
    pytest.param(
        [node("n0"), node("n1").taint("dedicated", "gpu")], [low("a", "n0", "4", priority=1),
                                                             low("b", "n1", "4")],
        "4", {"n0": ["default/a"]},
        id="a node the pod does not tolerate is not helped by removing pods"),
]


@pytest.mark.parametrize("nodes, pods, cpu, expected", CASES)
async def test_victim_selection(nodes, pods, cpu, expected):
    h = await preempt(nodes, pods, make_pod("hi").requests(cpu=cpu).priority(10))
    deleted = sorted(h.writer.deleted)
    if expected:
        (where, victims), = expected.items()
        assert deleted == victims
        assert h.placements()["default/hi"] == where
    else:
        assert deleted == [] and "default/hi" not in h.placements()


async def test_a_resource_the_pod_does_not_request_is_no_need_even_where_the_node_is_overcommitted_on_it():
    """n0 holds more memory than it has (a pod bound by name); the preemptor asks for none, so
    removing the pod that holds the cpu it needs is enough, as NodeResourcesFit would judge."""
    overcommit = started(make_pod("big").requests(cpu="1", memory="3Gi").priority(20).node("n0"), 1)
    h = await preempt([make_node("n0").capacity(cpu=4, memory="2Gi", pods=20)], [overcommit, low("b", "n0", "3")],
                      make_pod("hi").requests(cpu="2").priority(10))
    assert sorted(h.writer.deleted) == ["default/b"] and h.placements()["default/hi"] == "n0"


def column_candidates(nodes: list, pods: list, preemptor: Any) -> tuple[list[bool], list[int]]:
    """(the rows preemption could help on, the candidate rows the columns offer the exact dry run)."""
    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.plugins.default_preemption.candidates import find_candidates
    from corral.scheduler.profiles import build_frameworks, parse_config

    cache = Cache()
    for n in nodes:
        cache.set_node(n.obj)
    for p in pods:
        cache.set_pod(p)
    fwk = build_frameworks(parse_config({}), cache=cache, clock=lambda: 0.0)["default-scheduler"]
    pod = PodInfo.from_object(preemptor.obj)
    _, diagnosis = fwk.find_feasible(CycleState(), pod, cache.table)
    potential = diagnosis.preemptable_rows()
    return potential[:len(nodes)].tolist(), find_candidates(cache, pod, potential).ranked.tolist()


def test_a_single_unit_of_an_extended_resource_is_a_need_removing_pods_must_meet():
    """The one GPU is held by a more important pod: freeing the cpu would not let the pod in, so
    the columns offer no candidate for the exact dry run to turn down."""
    gpu = "example.com/gpu"
    holder = started(make_pod("holder").requests(cpu="500m", **{gpu: 1}).priority(20).node("n0"), 1)
    assert column_candidates([make_node("n0").capacity(cpu=4, memory="16Gi", pods=20, **{gpu: 1})],
                             [holder, low("b", "n0", "3500m")],
                             make_pod("hi").requests(cpu="1", **{gpu: 1}).priority(10)) == ([True], [])


def test_a_host_port_held_by_a_more_important_pod_rules_its_node_out_whatever_other_ports_are_free():
    """Of the nine ports the pod wants only 9000 is in use, by a pod it may not remove: removing the
    one it may frees the cpu, not the port (every wanted port is checked, not up to the first free one)."""
    keeper = started(make_pod("keeper").requests(cpu="100m").host_port(9000).priority(50).node("n0"), 1)
    wants = make_pod("hi").requests(cpu="500m").priority(10)
    for port in (*range(8000, 8008), 9000):
        wants.host_port(port)
    assert column_candidates([node("n0", cpu=1)], [keeper, low("filler", "n0", "900m")], wants) == ([True], [])
    h = Harness()
    h.add_node(node("n0", cpu=1).heartbeat_age(0))
    for p in (keeper, low("filler", "n0", "900m")):
        h.add_pod(p)
    assert [n.get("preemption") for n in h.scheduler.explain(wants.obj)["nodes"]] == [
        {"reasons": ["node(s) didn't have free ports for the requested pod ports"]}]


async def test_pods_this_scheduler_placed_rank_by_the_start_time_they_report_later():
    """Victims the scheduler placed itself (assumed, then bound) get their start time from the
    status their agents write afterwards: as for the running pods it found, the node whose victim
    started last is chosen, and its pod is the one to go."""
    h = Harness()
    for name in ("n0", "n1"):
        h.add_node(node(name).heartbeat_age(0))
    for name, where in (("a", "n0"), ("b", "n1")):
        h.add_pod(make_pod(name).requests(cpu="4").node_selector(**{HOST: where}))
    await h.run()
    assert h.placements() == {"default/a": "n0", "default/b": "n1"}
    for key, minute in (("default/a", 10), ("default/b", 40)):  # b started last
        running = {**h.pods[key], "status": {**h.pods[key]["status"], "phase": "Running",
                                             "startTime": f"2026-11-25T10:{minute}:00Z"}}
        h.add_pod(running)
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await h.run()
    assert h.writer.deleted == ["default/b"] and h.placements()["default/hi"] == "n1"


async def test_a_victim_with_no_start_time_yet_counts_as_started_last():
    """As Kubernetes counts a pod that has not reported its start as started now: its node is the
    one whose victim started last."""
    h = Harness()
    for name in ("n0", "n1"):
        h.add_node(node(name).heartbeat_age(0))
    h.add_pod(low("a", "n0", "4", start=10))
    h.add_pod(make_pod("b").requests(cpu="4").node("n1"))  # bound, not started yet
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await h.run()
    assert h.writer.deleted == ["default/b"] and h.placements()["default/hi"] == "n1"


# --- PodDisruptionBudgets ----------------------------------------------------------------------------

@pytest.mark.parametrize("allowed, victim", [
    pytest.param(0, "default/other", id="a pod whose budget allows no disruption is kept before a more important one"),
    pytest.param(1, "default/db", id="a budget that allows the disruption changes nothing"),
])
async def test_budgets_decide_which_victims_are_kept_first(allowed, victim):
    h = Harness()
    h.add_node(node("n0"))
    h.add_pod(low("other", "n0", "2", start=1))  # started first: without a budget, the one to keep
    h.add_pod(low("db", "n0", "2", start=30, app="db"))
    h.add_budget("db", allowed=allowed, app="db")
    h.add_pod(make_pod("hi").requests(cpu="2").priority(10))
    await h.run()
    assert h.writer.deleted == [victim]


async def test_the_node_whose_victims_break_no_budget_is_chosen_over_lower_victims_that_would():
    h = Harness()
    h.add_node(node("n0"))
    h.add_node(node("n1"))
    h.add_pod(low("db", "n0", "4", app="db"))
    h.add_pod(low("web", "n1", "4", priority=5, app="web"))
    h.add_budget("db", allowed=0, app="db")
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await h.run()
    assert h.writer.deleted == ["default/web"] and h.placements()["default/hi"] == "n1"
    h.scheduler.budget_changed("default/never-seen", None)  # a deletion it never saw added: harmless
    h.scheduler.budget_changed("default/db", None)  # the budget gone: the lower victim wins again
    h.add_pod(low("web2", "n1", "4", priority=5, app="web"))
    h.add_pod(make_pod("hi2").requests(cpu="4").priority(10))
    await h.run()
    assert h.writer.deleted[-1] == "default/db"


async def test_a_pod_with_preemption_policy_never_waits_and_says_why():
    never = make_pod("hi").requests(cpu="4").priority(10)
    never.spec["preemptionPolicy"] = "Never"
    h = await preempt([node("n0")], [low("a", "n0", "4")], never)
    assert h.writer.deleted == [] and h.placements() == {}
    assert h.writer.conditions["default/hi"]["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.")


async def test_the_messages_keep_the_filters_story_and_the_preemptions():
    h = await preempt([node("n0"), node("n1").taint("dedicated", "gpu"), node("n2"), node("n3")],
                      [low("a", "n0", "4", priority=20), low("b", "n2", "3"), low("c", "n2", "1", priority=20),
                       low("d", "n3", "4", priority=10)],
                      make_pod("hi").requests(cpu="4").priority(10))
    assert h.writer.conditions["default/hi"]["message"] == (
        "0/4 nodes are available: 1 node(s) had untolerated taint(s), 3 Insufficient cpu. preemption: 0/4 nodes "
        "are available: 1 Insufficient cpu, 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod.")


async def test_preempted_pods_get_disruption_target_and_an_event_naming_the_preemptor():
    h = await preempt([node("n0")], [low("a", "n0", "4")], make_pod("hi").requests(cpu="4").priority(10))
    patches = dict((key, patch) for key, patch in h.writer.status_patches if key != "default/hi")
    (condition,) = patches["default/a"]["status"]["conditions"]
    assert {k: v for k, v in condition.items() if k != "lastTransitionTime"} == {
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": "default-scheduler: preempting to accommodate a higher priority pod"}
    assert ("default/a", "Preempted", "Preempted by default/hi on node n0") in h.writer.events
    assert ("default/hi", {"status": {"nominatedNodeName": "n0"}}) in h.writer.status_patches
    failed = [m for k, r, m in h.writer.events if k == "default/hi" and r == "FailedScheduling"]
    assert failed == ["0/1 nodes are available: 1 Insufficient cpu. preemption: node n0 nominated, "
                      "preempting 1 pod(s) of lower priority: default/a."]


async def test_host_ports_held_by_lower_priority_pods_are_freed_by_preempting_them():
    holder = make_pod("web").requests(cpu="100m").host_port(8080)
    other = make_pod("other").requests(cpu="100m")
    h = await preempt([node("n0")], [started(holder.node("n0"), 1), started(other.node("n0"), 2)],
                      make_pod("hi").requests(cpu="100m").host_port(8080).priority(10))
    assert h.writer.deleted == ["default/web"]
    assert h.placements()["default/hi"] == "n0"


async def test_anti_affinity_to_a_lower_priority_pod_is_resolved_by_the_dry_run_on_each_node():
    # Resources are plentiful: only InterPodAffinity refuses, which the columns cannot judge; the
    # node-by-node dry run finds the one pod to remove on each node.
    pods = [low("x0", "n0", "100m", priority=5, app="x"), low("y1", "n1", "100m", app="y"),
            low("x1", "n1", "100m", app="x")]
    hi = make_pod("hi").requests(cpu="100m").priority(10).anti_affinity(HOST, app="x")
    h = await preempt([node("n0"), node("n1")], pods, hi)
    assert h.writer.deleted == ["default/x1"]  # n1's victim has the lower priority, though n0 came first
    assert h.placements()["default/hi"] == "n1"


# --- nominations ------------------------------------------------------------------------------------

async def test_the_preemptor_waits_for_its_victims_then_binds_to_its_nominated_node():
    h = Harness()
    h.slow_termination = True
    h.add_node(node("n0"))
    h.add_pod(low("a", "n0", "4"))
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await h.run()
    assert h.terminating == ["default/a"] and h.placements() == {}
    assert h.scheduler.cache.nominator.node_of("default/hi") == "n0"
    # Tried again while the victim terminates: it does not preempt again, it waits.
    h.scheduler.queue.on_event("NodeAdd")
    await h.run()
    assert h.writer.deleted == ["default/a"] and h.placements() == {}
    assert h.writer.conditions["default/hi"]["message"].endswith(
        "preemption: not eligible due to a terminating pod on the nominated node.")
    # corral explain says the same of it, and names no victims
    report = h.scheduler.explain(h.pods["default/hi"])
    assert report["preemption"] == {"message": "preemption: not eligible due to a terminating pod on the nominated "
                                               "node.", "node": None, "victims": []}
    h.finish_terminating()
    await h.run()
    assert h.placements() == {"default/hi": "n0"}
    assert h.scheduler.cache.nominator.node_of("default/hi") == ""


@pytest.mark.parametrize("priority, takes_the_room", [
    pytest.param(10, False, id="a pod of the same priority leaves a nominated pod's room alone"),
    pytest.param(5, False, id="a pod of lower priority leaves it alone"),
    pytest.param(20, True, id="a pod of higher priority may take it"),
])
async def test_a_nominated_pods_room_is_kept_from_pods_that_are_not_more_important(priority, takes_the_room):
    h = Harness()
    h.slow_termination = True
    h.add_node(node("n0"))
    h.add_pod(low("a", "n0", "4"))
    h.add_pod(make_pod("hi").requests(cpu="3").priority(10))
    await h.run()
    assert h.scheduler.cache.nominator.node_of("default/hi") == "n0"
    h.finish_terminating()  # the room is free; "hi" has not had its next try yet
    report = h.scheduler.explain(make_pod("other").requests(cpu="2").priority(priority).obj)
    assert (report["chosen"] == "n0") is takes_the_room


async def test_pods_already_terminating_are_room_that_costs_no_victim():
    h = Harness()
    h.add_node(node("n0"))
    h.add_node(node("n1"))
    going = low("going", "n0", "4")
    going["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z"
    h.add_pod(going)
    h.add_pod(low("b", "n1", "4"))
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await h.run()
    assert h.writer.deleted == [] and h.scheduler.cache.nominator.node_of("default/hi") == "n0"
    assert h.writer.conditions["default/hi"]["message"].endswith(
        "preemption: node n0 nominated: pods of lower priority are already leaving it.")


async def test_a_nomination_read_back_after_a_restart_keeps_its_room():
    h = Harness()
    h.add_node(node("n0"))
    waiting = make_pod("hi").requests(cpu="3").priority(10).obj
    waiting["status"]["nominatedNodeName"] = "n0"
    h.add_pod(waiting)
    assert h.scheduler.cache.nominator.node_of("default/hi") == "n0"
    assert h.scheduler.cache.table.requested["cpu"][h.scheduler.cache.table.row_of["n0"]] == 3000
    h.scheduler.pod_changed("default/hi", None)
    assert h.scheduler.cache.table.requested["cpu"][h.scheduler.cache.table.row_of["n0"]] == 0


# --- explain ----------------------------------------------------------------------------------------

async def test_explain_shows_per_node_the_victims_or_why_preemption_cannot_help():
    h = Harness()
    for n in (node("n0"), node("n1"), node("n2").taint("dedicated", "gpu"),
              make_node("n3").capacity(cpu=4, memory="16Gi", pods=1)):
        h.add_node(n)
    for p in (low("a", "n0", "2"), low("b", "n0", "2", priority=3), low("c", "n1", "4", priority=50),
              low("d", "n3", "0", priority=50), low("e", "n3", "0")):  # n3 holds one pod more than it may
        h.add_pod(p)
    report = h.scheduler.explain(make_pod("hi").requests(cpu="2").priority(10).obj)
    by_node = {n["node"]: n.get("preemption") for n in report["nodes"]}
    assert by_node == {
        "n0": {"victims": [{"pod": "default/a", "priority": 0}]},
        "n1": {"reasons": ["No preemption victims found for incoming pod"]},
        "n2": {"reasons": ["Preemption is not helpful for scheduling"]},
        "n3": {"reasons": ["Too many pods"]},  # even with e gone, d fills it
    }
    assert report["preemption"] == {
        "message": "preemption: node n0 nominated, preempting 1 pod(s) of lower priority: default/a.", "node": "n0",
        "victims": [{"pod": "default/a", "priority": 0}]}
    assert report["message"].endswith("preemption: node n0 nominated, preempting 1 pod(s) of lower priority: "
                                      "default/a.")


# --- the columns against Kubernetes' node-by-node procedure -----------------------------------------

@st.composite
def clusters(draw):
    nodes = draw(st.integers(1, 4))
    count = draw(st.integers(0, 12))
    starts = draw(st.permutations(range(count)))  # distinct: Kubernetes leaves ties in no set order
    pods = []
    for i in range(count):
        pods.append((f"p{i}", f"n{draw(st.integers(0, nodes - 1))}", draw(st.sampled_from([250, 500, 1000, 1500])),
                     draw(st.sampled_from([0, 1, 5, 10, 20])), starts[i],
                     draw(st.sampled_from([0, 0, 1, 2])), draw(st.booleans())))
    want = draw(st.sampled_from([500, 1000, 2000, 3000, 4000]))
    port = draw(st.booleans())
    budgets = draw(st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 2), max_size=2))
    apps = [draw(st.sampled_from(["a", "b", ""])) for _ in pods]
    # memory and ephemeral storage: (node GiB, the pod's GiB); pods bound by name may overcommit a
    # small node, and a request of 0 is no need at all
    storage = (draw(st.sampled_from([16, 2])), draw(st.sampled_from([0, 1])), draw(st.sampled_from([8, 1])),
               draw(st.sampled_from([0, 1])))
    return nodes, pods, want, port, budgets, apps, storage


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_the_columns_choose_the_victims_kubernetes_dry_run_chooses_on_every_node(cluster):
    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.plugins.default_preemption.candidates import find_candidates
    from corral.scheduler.profiles import build_frameworks, parse_config

    nodes, pods, want, port, budgets, apps, (node_mem, want_mem, node_disk, want_disk) = cluster
    cache = Cache()
    for app, allowed in budgets.items():
        cache.set_budget(f"default/{app}", {"metadata": {"name": app, "namespace": "default"},
                                            "spec": {"selector": {"matchLabels": {"app": app}}},
                                            "status": {"disruptionsAllowed": allowed}})
    for i in range(nodes):
        cache.set_node(make_node(f"n{i}").capacity(cpu=4, memory=f"{node_mem}Gi", ephemeral_storage=f"{node_disk}Gi",
                                                   pods=6).obj)
    for (name, where, cpu, priority, start, mem_gi, holds_port), app in zip(pods, apps):
        b = make_pod(name).requests(cpu=f"{cpu}m", memory=f"{mem_gi}Gi", ephemeral_storage=f"{mem_gi % 2}Gi").priority(
            priority).node(where)
        if app:
            b.labels(app=app)
        if holds_port:
            b.host_port(9000)
        cache.set_pod(started(b, start))
    fwk = build_frameworks(parse_config({}), cache=cache, clock=lambda: 0.0)["default-scheduler"]
    b = make_pod("hi").requests(cpu=f"{want}m", memory=f"{want_mem}Gi", ephemeral_storage=f"{want_disk}Gi").priority(10)
    if port:
        b.host_port(9000)
    pod = PodInfo.from_object(b.obj)
    _, diagnosis = fwk.find_feasible(CycleState(), pod, cache.table)
    potential = diagnosis.preemptable_rows()
    found = find_candidates(cache, pod, potential)
    candidates = set(found.ranked.tolist())
    for row in np.flatnonzero(potential).tolist():
        exact = select_victims_on_row(fwk, cache, pod, row)
        if exact.victims is None:
            assert row not in candidates
            continue
        assert row in candidates
        assert sorted(cache.columns.keys[s] for s in found.victims_of(row)) == sorted(v.info.key for v in exact.victims)
        assert found.violations[row] == exact.violations


@pytest.mark.parametrize("priority, expected", [
    pytest.param(10, (None, ["No preemption victims found for incoming pod"]), id="only pods as important"),
    pytest.param(11, ([], []), id="a lower pod, yet the node has room"),
])
def test_the_dry_run_names_the_reason_when_a_node_has_no_pod_of_lower_priority(priority, expected):
    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.plugins.default_preemption import NO_VICTIMS
    from corral.scheduler.profiles import build_frameworks, parse_config

    cache = Cache()
    cache.set_node(make_node("n0").capacity(cpu=4, memory="16Gi", pods=6).obj)
    cache.set_pod(low("a", "n0", "1", priority=10))
    fwk = build_frameworks(parse_config({}), cache=cache, clock=lambda: 0.0)["default-scheduler"]
    result = select_victims_on_row(fwk, cache, PodInfo.from_object(make_pod("hi").priority(priority).obj), 0)
    assert (result.victims, result.reasons) == expected
    assert expected[1] in ([], [NO_VICTIMS])


def preemption_args(**args: Any) -> dict[str, Any]:
    """The default profile with DefaultPreemption's ``args``."""
    return {"profiles": [{"pluginConfig": [{"name": "DefaultPreemption", "args": args}]}]}


@pytest.mark.parametrize("args, message", [
    ({"minCandidateNodesPercentage": 101}, "minCandidateNodesPercentage must be an integer from 0 to 100, not 101"),
    ({"minCandidateNodesPercentage": -1}, "minCandidateNodesPercentage must be an integer from 0 to 100, not -1"),
    ({"minCandidateNodesPercentage": True}, "minCandidateNodesPercentage must be an integer from 0 to 100, not True"),
    ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute must be an integer of at least 0, not -1"),
    ({"minCandidateNodesAbsolute": "5"}, "minCandidateNodesAbsolute must be an integer of at least 0, not '5'"),
])
def test_bad_preemption_arguments_are_refused_by_name(args, message):
    from corral.scheduler.profiles import ConfigError, build_frameworks, parse_config

    with pytest.raises(ConfigError, match=f"DefaultPreemption: {re.escape(message)}$"):
        build_frameworks(parse_config(preemption_args(**args)), cache=None, clock=lambda: 0.0)


def preemption_limit(config: dict[str, Any], nodes: int) -> int:
    h = Harness(config)
    for i in range(nodes):
        h.add_node(make_node(f"n{i}"))
    (plugin,) = h.scheduler.frameworks["default-scheduler"].post_filters
    return plugin._limit()


@pytest.mark.parametrize("args, nodes, limit", [
    pytest.param({}, 50, 100, id="by default at least 100 nodes"),
    pytest.param({}, 1500, 150, id="by default 10 % of the nodes"),
    pytest.param({"minCandidateNodesPercentage": 100, "minCandidateNodesAbsolute": 0}, 7, 7, id="100 % allowed"),
    pytest.param({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, 7, 1, id="never below one"),
    pytest.param({"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 0}, 11, 2, id="rounded up"),
])
def test_the_dry_runs_limit_is_kubernetes_percentage_of_the_nodes_or_its_absolute_floor(args, nodes, limit):
    assert preemption_limit(preemption_args(**args), nodes) == limit


def test_explain_is_quiet_for_a_pod_that_fits():
    h = Harness()
    h.add_node(node("n0"))
    report = h.scheduler.explain(make_pod("p").requests(cpu="1").obj)
    assert "preemption" not in report and all("preemption" not in n for n in report["nodes"])



@pytest.mark.parametrize("victims, listed", [
    pytest.param(5, "default/v0, default/v1, default/v2, default/v3, default/v4.", id="five: all named"),
    pytest.param(6, "default/v0, default/v1, default/v2, default/v3, default/v4 and 1 more.", id="six: five and a count"),
    pytest.param(7, "default/v0, default/v1, default/v2, default/v3, default/v4 and 2 more.", id="seven: five and a count"),
])
async def test_the_pending_message_names_at_most_five_victims_and_counts_the_rest(victims, listed):
    pods = [low(f"v{i}", "n0", "500m", start=i) for i in range(victims)]
    whole = (victims + 1) // 2  # cores: the victims' 500m each leave less than one free; hi needs them all
    h = await preempt([node("n0", cpu=whole)], pods, make_pod("hi").requests(cpu=str(whole)).priority(10))
    message = h.writer.conditions["default/hi"]["message"]
    assert message.endswith(f"preemption: node n0 nominated, preempting {victims} pod(s) of lower priority: {listed}")


# --- choosing among the candidates extenders kept (the extender path's own ordering) ------------------

def choose_among(h: Harness, pod: dict[str, Any], kept: dict[str, tuple[tuple[str, ...], int]]):
    from corral.scheduler.schedule_one import FitError, schedule_pod

    fwk = h.scheduler.frameworks["default-scheduler"]
    plugin = next(p for p in fwk.post_filters if hasattr(p, "choose"))
    info = PodInfo.from_object(pod)
    with pytest.raises(FitError) as fit:
        schedule_pod(fwk, h.scheduler.cache, info)
    return plugin.choose(info, fit.value.diagnosis, kept, {})


def two_nodes(*pods: dict[str, Any]) -> Harness:
    h = Harness()
    for name in ("n0", "n1"):
        h.add_node(node(name).heartbeat_age(0))
    for p in pods:
        h.add_pod(p)
    return h


HI = make_pod("hi").requests(cpu="4").priority(10).obj


def test_of_the_kept_candidates_the_node_whose_victim_started_last_is_taken():
    h = two_nodes(low("a", "n0", "4", start=10), low("b", "n1", "4", start=40))
    post = choose_among(h, HI, {"n0": (("uid-default-a",), 0), "n1": (("uid-default-b",), 0)})
    assert post.nominated_node == "n1" and [v.key for v in post.victims] == ["default/b"]


def test_a_kept_candidate_that_needs_no_victim_beats_one_with_victims_even_of_negative_priority():
    leaving = low("leaving", "n0", "4")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z"
    h = two_nodes(leaving, low("b", "n1", "4", priority=-5))
    post = choose_among(h, HI, {"n0": ((), 0), "n1": (("uid-default-b",), 0)})
    assert post.nominated_node == "n0" and post.victims == ()


def test_of_the_kept_candidates_fewer_victims_win_over_lower_priorities():
    h = two_nodes(low("a", "n0", "2", priority=1), low("b", "n0", "1"), low("c", "n0", "1"),
                  low("d", "n1", "2", priority=1), low("e", "n1", "2", priority=1))
    kept = {"n0": (("uid-default-a", "uid-default-b", "uid-default-c"), 0), "n1": (("uid-default-d", "uid-default-e"), 0)}
    post = choose_among(h, HI, kept)
    assert post.nominated_node == "n1" and sorted(v.key for v in post.victims) == ["default/d", "default/e"]


def test_of_the_kept_candidates_fewer_budget_violations_win_over_lower_priorities():
    h = two_nodes(low("a", "n0", "4", priority=1), low("b", "n1", "4", priority=5))
    post = choose_among(h, HI, {"n0": (("uid-default-a",), 1), "n1": (("uid-default-b",), 0)})
    assert post.nominated_node == "n1"


async def test_explain_says_per_node_why_preemption_cannot_help_there():
    h = Harness()
    h.add_node(node("empty", cpu=2).heartbeat_age(0))  # nothing of lower priority to remove
    h.add_node(node("small", cpu=2).heartbeat_age(0))  # removing everything would still not make room
    h.add_pod(low("a", "small", "1"))
    report = h.scheduler.explain(make_pod("hi").requests(cpu="3").priority(10).obj)
    reasons = {n["node"]: n["preemption"]["reasons"] for n in report["nodes"]}
    assert reasons == {"empty": ["No preemption victims found for incoming pod"], "small": ["Insufficient cpu"]}


def test_a_victim_two_budgets_select_breaks_the_one_it_exhausts_and_only_budgets_of_its_namespace_count():
    h = Harness()
    h.add_node(node("n0").heartbeat_age(0))
    h.add_pod(low("db", "n0", "4", app="db", tier="data"))
    h.add_budget("tight", allowed=0, tier="data")  # exhausted first, then one with room to spare
    h.add_budget("roomy", allowed=5, app="db")
    h.add_budget("elsewhere", "other", allowed=0, app="db")  # another namespace: not this pod's
    fwk = h.scheduler.frameworks["default-scheduler"]
    cache = h.scheduler.cache
    found = select_victims_on_row(fwk, cache, PodInfo.from_object(HI), cache.table.row_of["n0"])
    assert [v.info.key for v in found.victims] == ["default/db"] and found.violations == 1
    h.add_budget("tight", allowed=1, tier="data")
    found = select_victims_on_row(fwk, cache, PodInfo.from_object(HI), cache.table.row_of["n0"])
    assert found.violations == 0


async def test_explain_gives_the_dry_runs_reason_where_removing_pods_would_not_satisfy_every_filter():
    """The room is there once the lower pod goes, but the preemptor may not sit beside the guard."""
    h = Harness()
    h.add_node(node("n0").heartbeat_age(0))
    h.add_pod(low("guard", "n0", "1", priority=50, app="guard"))
    h.add_pod(low("filler", "n0", "3"))
    report = h.scheduler.explain(make_pod("hi").requests(cpu="3").priority(10).anti_affinity(HOST, app="guard").obj)
    (n0,) = report["nodes"]
    assert n0["preemption"] == {"reasons": ["node(s) didn't match pod anti-affinity rules"]}


async def test_a_nomination_that_preemption_can_no_longer_keep_is_cleared_and_the_pod_told():
    """hi was nominated on n0 before a restart; now the pod there outranks it: nothing to preempt."""
    h = Harness()
    h.add_node(node("n0").heartbeat_age(0))
    h.add_pod(low("boss", "n0", "4", priority=50))
    hi = make_pod("hi").requests(cpu="4").priority(10).obj
    hi["status"]["nominatedNodeName"] = "n0"
    h.add_pod(hi)
    assert h.scheduler.cache.nominator.node_of("default/hi") == "n0"
    await h.run()
    assert h.scheduler.cache.nominator.node_of("default/hi") == ""
    assert ("default/hi", {"status": {"nominatedNodeName": None}}) in h.writer.status_patches


async def test_nodes_the_first_filter_rejects_are_counted_where_preemption_cannot_help():
    """NodeReady filters first: a node without a fresh heartbeat is in the summary like any other."""
    h = Harness()
    h.add_node(node("silent").heartbeat_age(600))
    h.add_node(node("cordoned").heartbeat_age(0).unschedulable())
    h.add_node(node("full", cpu=1).heartbeat_age(0))
    report = h.scheduler.explain(make_pod("hi").requests(cpu="2").priority(10).obj)
    assert report["message"].endswith(
        "preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, "
        "2 Preemption is not helpful for scheduling."), report["message"]


async def test_explain_under_a_profile_without_preemption_says_nothing_of_it():
    profile = {"profiles": [{"schedulerName": "default-scheduler",
                             "plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}}]}
    h = Harness(profile)
    h.add_node(node("n0"))
    h.add_pod(low("a", "n0", "4"))
    report = h.scheduler.explain(make_pod("hi").requests(cpu="2").priority(10).obj)
    assert report["chosen"] is None and "preemption" not in report
    assert [n.get("preemption") for n in report["nodes"]] == [None]


# --- the columns, the dry run and its limit ----------------------------------------------------------

def dry_run_limit(nodes: int) -> dict[str, Any]:
    """A profile whose node-by-node dry run examines at most ``nodes`` nodes."""
    return preemption_args(minCandidateNodesAbsolute=nodes, minCandidateNodesPercentage=0)


def victims_by_node(report: dict[str, Any]) -> dict[str, list[str]]:
    return {n["node"]: [v["pod"] for v in n["preemption"].get("victims", ())] for n in report["nodes"]}


def holding_port(pod: dict[str, Any]) -> dict[str, Any]:
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 9000, "hostPort": 9000, "protocol": "TCP"}]
    return pod


@pytest.mark.parametrize("pods, preemptor", [
    pytest.param([low("a", "n0", "4"), low("b", "n1", "4", priority=1)], make_pod("hi").requests(cpu="4"), id="cpu"),
    pytest.param([holding_port(low("a", "n0", "1")), holding_port(low("b", "n1", "1", priority=1))],
                 make_pod("hi").requests(cpu="1").host_port(9000), id="a host port"),
])
async def test_past_the_dry_runs_limit_explain_gives_each_nodes_victims_from_the_columns(pods, preemptor):
    h = Harness(dry_run_limit(1))
    for name in ("n0", "n1"):
        h.add_node(node(name).heartbeat_age(0))
    for p in pods:
        h.add_pod(p)
    report = h.scheduler.explain(preemptor.priority(10).obj)
    assert report["preemption"]["node"] == "n0"
    assert victims_by_node(report) == {"n0": ["default/a"], "n1": ["default/b"]}


async def test_preemption_takes_only_what_it_needs_once_the_pod_columns_have_grown_past_their_first_size():
    h = Harness()
    h.add_node(make_node("n0").capacity(cpu=4, memory="16Gi", pods=2000).heartbeat_age(0))
    for i in range(1100):  # the columns start with room for 1,024 pods
        h.add_pod(low(f"idle-{i}", "n0", "0", start=i % 60))
    h.add_pod(low("big", "n0", "3", start=61))
    h.add_pod(make_pod("hi").requests(cpu="2").priority(10))
    await h.run()
    assert h.writer.deleted == ["default/big"] and h.placements()["default/hi"] == "n0"


async def test_preemption_is_counted_in_the_metrics_operators_scrape():
    from prometheus_client import generate_latest

    h = await preempt([node("n0")], [low("a", "n0", "2"), low("b", "n0", "2")],
                      make_pod("hi").requests(cpu="4").priority(10))
    assert sorted(h.writer.deleted) == ["default/a", "default/b"] and h.placements()["default/hi"] == "n0"
    assert (h.scheduler.preemptor.victims, h.scheduler.preemptor.failures) == (2, 0)
    lines = generate_latest(h.scheduler.metrics.registry).decode().splitlines()
    assert "# HELP corral_scheduler_preemption_attempts_total Preemption attempts (pods no node fits that " \
           "PostFilter ran for)" in lines
    assert "corral_scheduler_preemption_attempts_total 1.0" in lines
    assert "# HELP corral_scheduler_preemption_victims Pods removed by one successful preemption" in lines
    # Kubernetes' buckets for victims per preemption: 1, 2, 4 … 64.
    buckets = {line.split('le="')[1].split('"')[0]: float(line.split()[-1]) for line in lines
               if line.startswith("corral_scheduler_preemption_victims_bucket")}
    assert buckets == {"1.0": 0, "2.0": 1, "4.0": 1, "8.0": 1, "16.0": 1, "32.0": 1, "64.0": 1, "+Inf": 1}
    assert "corral_scheduler_preemption_victims_sum 2.0" in lines


async def test_a_pod_that_starts_leaving_is_room_preemption_waits_for_rather_than_take_another():
    h = Harness()
    h.slow_termination = True
    h.add_node(node("n0").heartbeat_age(0))
    leaving = low("leaving", "n0", "2", priority=5)
    h.add_pod(leaving)
    h.add_pod(low("staying", "n0", "2"))  # less important, but not needed once "leaving" is gone
    leaving = copy.deepcopy(leaving)
    leaving["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z"  # deleted by someone, after it was seen
    h.add_pod(leaving)
    h.add_pod(make_pod("hi").requests(cpu="2").priority(10))
    await h.run()
    assert h.writer.deleted == [] and h.scheduler.cache.nominator.node_of("default/hi") == "n0"
    assert h.writer.conditions["default/hi"]["message"].endswith(
        "preemption: node n0 nominated: pods of lower priority are already leaving it.")


async def test_a_resource_an_extender_manages_never_stops_preemption():
    h = Harness()
    h.add_node(node("n0").heartbeat_age(0))  # offers no example.com/gpu: the extender answers for it
    h.add_pod(low("a", "n0", "4"))
    fit = next(p for p in h.scheduler.frameworks["default-scheduler"].filters if p.NAME == "NodeResourcesFit")
    fit.ignored_resources = frozenset({"example.com/gpu"})  # as the scheduler sets it for ignoredByScheduler
    h.add_pod(make_pod("hi").requests(cpu="4", **{"example.com/gpu": "1"}).priority(10))
    await h.run()
    assert h.writer.deleted == ["default/a"] and h.placements()["default/hi"] == "n0"


async def test_with_node_ports_disabled_a_pod_holding_the_same_port_is_no_victim_for_it():
    profile = {"profiles": [{"schedulerName": "default-scheduler",
                             "plugins": {"filter": {"disabled": [{"name": "NodePorts"}]}}}]}
    h = Harness(profile)
    h.add_node(node("n0").heartbeat_age(0))
    h.add_pod(holding_port(low("port", "n0", "2", priority=1)))  # the more important of the two: kept if the room allows
    h.add_pod(low("plain", "n0", "2"))
    h.add_pod(make_pod("hi").requests(cpu="2").host_port(9000).priority(10))
    await h.run()
    assert h.writer.deleted == ["default/plain"]


async def test_with_node_resources_fit_disabled_preemption_frees_what_the_other_filters_want_not_cpu():
    profile = {"profiles": [{"schedulerName": "default-scheduler",
                             "plugins": {"filter": {"disabled": [{"name": "NodeResourcesFit"}]}}}]}
    h = Harness(profile)
    h.add_node(node("n0").heartbeat_age(0))
    h.add_pod(holding_port(low("port", "n0", "4")))
    h.add_pod(make_pod("hi").requests(cpu="8").host_port(9000).priority(10))  # twice the node: nobody checks
    await h.run()
    assert h.writer.deleted == ["default/port"] and h.placements()["default/hi"] == "n0"


def guarded(name: str, guard: int, filler: int) -> list[dict[str, Any]]:
    """On node ``name``: a 1-cpu pod the preemptor may not sit beside, and a 3-cpu filler."""
    return [low(f"x-{name}", name, "1", priority=guard, app="x"), low(f"f-{name}", name, "3", priority=filler)]


ANTI_X = make_pod("hi").requests(cpu="3").priority(10).anti_affinity(HOST, app="x")


def dry_run_cluster(config: dict[str, Any] | None = None) -> Harness:
    """Columns rank a (filler 1), c (filler 2), b (filler 5); the dry run, which must take the guard
    too, ranks b (guard 0, filler 5) first: its most important victim is the least important."""
    h = Harness(config)
    for name, guard, filler in (("a", 9, 1), ("b", 0, 5), ("c", 8, 2)):
        h.add_node(node(name).heartbeat_age(0))
        for p in guarded(name, guard, filler):
            h.add_pod(p)
    return h


async def test_the_dry_run_weighs_every_candidate_up_to_its_limit_not_the_first_that_works():
    h = dry_run_cluster()
    report = h.scheduler.explain(ANTI_X.obj)
    assert report["preemption"]["node"] == "b"
    assert victims_by_node(report) == {"a": ["default/x-a", "default/f-a"], "b": ["default/f-b", "default/x-b"],
                                       "c": ["default/x-c", "default/f-c"]}  # the most important first
    h.add_pod(copy.deepcopy(ANTI_X.obj))
    await h.run()
    assert sorted(h.writer.deleted) == ["default/f-b", "default/x-b"]


def test_asked_for_several_candidates_the_dry_run_stops_once_it_has_them():
    from corral.scheduler.schedule_one import FitError, schedule_pod

    h = dry_run_cluster()
    fwk = h.scheduler.frameworks["default-scheduler"]
    plugin = next(p for p in fwk.post_filters if hasattr(p, "evaluate"))
    info = PodInfo.from_object(ANTI_X.obj)
    with pytest.raises(FitError) as fit:
        schedule_pod(fwk, h.scheduler.cache, info)
    found = plugin.evaluate(info, fit.value.diagnosis, want=2)
    names = h.scheduler.cache.table.names
    assert [names[row] for row, _, _ in found.candidates] == ["c", "a"]  # the columns' first two, best first


@pytest.mark.parametrize("limit", [1, 2, 3])
async def test_the_dry_run_stops_at_its_limit_and_says_how_many_nodes_it_did_not_examine(limit):
    h = Harness(dry_run_limit(limit))
    for i in range(4):  # the guard outranks the preemptor: no node can be helped
        h.add_node(node(f"n{i}").heartbeat_age(0))
        for p in guarded(f"n{i}", 50, 0):
            h.add_pod(p)
    report = h.scheduler.explain(ANTI_X.obj)
    examined = f"{limit} node(s) didn't match pod anti-affinity rules"
    skipped = f"{4 - limit} not examined: the node-by-node dry run stopped at its limit" if limit < 4 else ""
    parts = ", ".join(sorted(filter(None, (examined, skipped))))  # sorted as text, counts first
    assert report["preemption"]["message"] == f"preemption: 0/4 nodes are available: {parts}."
    reasons = [n["preemption"]["reasons"] for n in report["nodes"]]
    assert sorted(map(tuple, reasons)) == sorted(
        [("node(s) didn't match pod anti-affinity rules",)] * limit
        + [("not examined: the node-by-node dry run stopped at its limit",)] * (4 - limit))


async def test_in_a_cluster_with_no_nodes_preemption_says_so():
    h = await preempt([], [], make_pod("hi").requests(cpu="1").priority(10))
    assert h.writer.conditions["default/hi"]["message"].endswith("preemption: 0/0 nodes are available.")


async def test_a_pod_nominated_on_a_node_without_pods_where_it_still_does_not_fit_preempts_elsewhere():
    h = Harness()
    h.add_node(node("n0", cpu=2).heartbeat_age(0))  # empty, and too small for it
    h.add_node(node("n1").heartbeat_age(0))
    h.add_pod(low("a", "n1", "4"))
    hi = make_pod("hi").requests(cpu="4").priority(10).obj
    hi["status"]["nominatedNodeName"] = "n0"  # from before a restart
    h.add_pod(hi)
    await h.run()
    assert h.writer.deleted == ["default/a"] and h.placements() == {"default/hi": "n1"}


async def test_a_pod_of_the_same_priority_terminating_on_the_nominated_node_is_not_room_to_wait_for():
    """Only lower-priority pods leaving make room for the preemptor (Kubernetes' rule): with an equal
    one leaving its nominated node, it preempts again where it can."""
    h = Harness()
    h.slow_termination = True
    for name in ("n0", "n1"):
        h.add_node(node(name).heartbeat_age(0))
    peer = low("peer", "n0", "4", priority=10)
    peer["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z"
    h.add_pod(peer)
    h.add_pod(low("a", "n1", "4"))
    hi = make_pod("hi").requests(cpu="4").priority(10).obj
    hi["status"]["nominatedNodeName"] = "n0"  # from before a restart
    h.add_pod(hi)
    await h.run()
    assert h.writer.deleted == ["default/a"] and h.scheduler.cache.nominator.node_of("default/hi") == "n1"


@pytest.mark.parametrize("a_priorities, b_priorities, chosen", [
    pytest.param((1, 8), (7, 6), "n1", id="the guarded victim is the row's least important: the other one is its highest"),
    pytest.param((7, 6), (1, 8), "n0", id="the guarded victim is the row's most important: it is its highest"),
])
async def test_past_the_dry_runs_limit_the_columns_rank_by_each_nodes_most_important_victim_though_budgets_reorder_them(
        a_priorities, b_priorities, chosen):
    """Both nodes break one budget; then the node whose most important victim is the least important
    wins (Kubernetes' second criterion), whichever of a node's victims the budget guards (victims a
    budget would lose are put first for the reprieve, which must not change which one is highest)."""
    h = Harness(dry_run_limit(1))
    for name, (guarded_priority, other_priority) in (("n0", a_priorities), ("n1", b_priorities)):
        h.add_node(node(name, cpu=2).heartbeat_age(0))
        h.add_pod(low(f"g-{name}", name, "1", priority=guarded_priority, app="guarded"))
        h.add_pod(low(f"o-{name}", name, "1", priority=other_priority))
    h.add_budget("guarded", allowed=0, app="guarded")
    report = h.scheduler.explain(make_pod("hi").requests(cpu="2").priority(10).obj)
    assert report["preemption"]["node"] == chosen


async def test_an_update_carrying_an_older_nomination_does_not_move_the_claim_the_scheduler_holds():
    """Only a nomination the scheduler holds no claim for is read from the pod (after a restart): an
    echo of an earlier write, still naming the old node, must not move the room it claims now."""
    h = Harness()
    for name in ("n0", "n1"):
        h.add_node(node(name).heartbeat_age(0))
    waiting = make_pod("hi").requests(cpu="3").priority(10).obj
    waiting["status"]["nominatedNodeName"] = "n0"
    h.add_pod(waiting)
    assert h.scheduler.cache.nominator.node_of("default/hi") == "n0"
    h.scheduler.cache.nominator.nominate(PodInfo.from_object(waiting), "n1")  # preemption chose again
    echo = copy.deepcopy(waiting)
    echo["metadata"]["labels"] = {"seen": "again"}
    h.add_pod(echo)
    assert h.scheduler.cache.nominator.node_of("default/hi") == "n1"
    table = h.scheduler.cache.table
    assert [int(table.requested["cpu"][table.row_of[n]]) for n in ("n0", "n1")] == [0, 3000]
