"""Custom plugins: the per-node adapter, and the Reserve / Permit / PreEnqueue / PostFilter points."""

from __future__ import annotations

import asyncio
import logging

import pytest

from corral.scheduler.framework.interface import NodeFilterAdapter, Plugin, PostFilterResult
from corral.scheduler.framework.status import SUCCESS, Status
from corral.scheduler.plugins import REGISTRY, register
from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import Harness

CALLS: list[tuple[str, str]] = []


class EvenNodesOnly(NodeFilterAdapter):
    NAME = "EvenNodesOnly"

    @staticmethod
    def check(pod, node):
        return None if int(node.name[1:]) % 2 == 0 else "node(s) had an odd number"


class Gatekeeper(Plugin):
    NAME = "Gatekeeper"

    def pre_enqueue(self, pod) -> Status:
        return Status(Status.unschedulable().code) if pod.labels.get("gated") == "true" else SUCCESS

    def reserve(self, state, pod, node) -> Status:
        CALLS.append(("reserve", pod.name))
        return Status.unschedulable("refused") if pod.labels.get("refuse") == "reserve" else SUCCESS

    def unreserve(self, state, pod, node) -> None:
        CALLS.append(("unreserve", pod.name))

    async def permit(self, state, pod, node) -> Status:
        CALLS.append(("permit", pod.name))
        return Status.unschedulable("refused") if pod.labels.get("refuse") == "permit" else SUCCESS

    def post_filter(self, state, pod, diagnosis) -> PostFilterResult:
        CALLS.append(("post_filter", pod.name))
        return PostFilterResult(Status.unschedulable())


@pytest.fixture(autouse=True)
def registered():
    register(EvenNodesOnly)
    register(Gatekeeper)
    CALLS.clear()
    yield
    REGISTRY.pop("EvenNodesOnly")
    REGISTRY.pop("Gatekeeper")


CONFIG = {"profiles": [{"plugins": {
    "filter": {"enabled": [{"name": "EvenNodesOnly"}]},
    "preEnqueue": {"enabled": [{"name": "Gatekeeper"}]},
    "reserve": {"enabled": [{"name": "Gatekeeper"}]},
    "permit": {"enabled": [{"name": "Gatekeeper"}]},
    "postFilter": {"enabled": [{"name": "Gatekeeper"}]},
}}]}


async def one_round(h: Harness) -> None:
    """Each queued pod tried once by hand, its binding awaited."""
    s = h.scheduler
    while (qp := s.queue.pop_nowait()) is not None:
        s.schedule_one(qp)
    while s._inflight:
        await asyncio.gather(*list(s._inflight))


async def test_a_node_by_node_plugin_filters_and_explains_like_a_column_plugin():
    h = Harness(CONFIG)
    for i in range(4):
        h.add_node(make_node(f"n{i}"))
    for i in range(6):
        h.add_pod(make_pod(f"p{i}"))
    await h.run()
    assert set(h.placements().values()) <= {"n0", "n2"}
    # Only n1 matches the selector, and the custom plugin refuses n1: each node is counted once,
    # under the first plugin (in profile order) that refused it.
    h.add_pod(make_pod("picky").node_selector(**{"kubernetes.io/hostname": "n1"}))
    await h.run()
    assert h.writer.conditions["default/picky"]["message"] == (
        "0/4 nodes are available: 1 node(s) had an odd number, "
        "3 node(s) didn't match Pod's node affinity/selector.")
    assert ("post_filter", "picky") in CALLS


async def test_reserve_and_permit_run_around_binding_and_a_refusal_unreserves():
    h = Harness(CONFIG)
    h.add_node(make_node("n0"))
    h.add_pod(make_pod("ok"))
    h.add_pod(make_pod("no").labels(refuse="permit"))
    s = h.scheduler
    await one_round(h)  # not h.run(): the refused pod must stay in backoff, not be retried
    assert h.placements() == {"default/ok": "n0"}
    assert [c for c in CALLS if c[1] == "ok"] == [("reserve", "ok"), ("permit", "ok")]
    assert [c for c in CALLS if c[1] == "no"] == [("reserve", "no"), ("permit", "no"), ("unreserve", "no")]
    assert not s.cache.is_assumed("default/no")  # un-assumed, and waiting in backoff
    assert s.queue.get("default/no").where == "backoff"
    # The pod is told, as for a pod no node fits: PodScheduled=False and a Warning event.
    assert {k: h.writer.conditions["default/no"][k] for k in ("status", "reason", "message")} == {
        "status": "False", "reason": "Unschedulable", "message": "refused"}
    s.events.start()
    await s.events.drain()
    assert [(e["type"], e["reason"], e["message"]) for e in h.writer.event_objects
            if e["involvedObject"]["name"] == "no"] == [("Warning", "FailedScheduling", "refused")]
    await s.events.stop()


async def test_a_pod_a_reserve_plugin_refuses_is_not_placed_and_waits_in_backoff():
    h = Harness(CONFIG)
    h.add_node(make_node("n0"))
    h.add_pod(make_pod("no").labels(refuse="reserve"))
    s = h.scheduler
    assert s.schedule_one(s.queue.pop_nowait()) is None  # decided on n0, then refused
    assert [c for c in CALLS if c[1] == "no"] == [("reserve", "no"), ("unreserve", "no")]
    assert not s.cache.is_assumed("default/no") and s.queue.get("default/no").where == "backoff"
    assert not s._inflight and h.placements() == {}


class RaisingPermit(Plugin):
    NAME = "RaisingPermit"

    async def permit(self, state, pod, node) -> Status:
        raise RuntimeError("quota service unreachable")


async def test_a_permit_plugin_that_raises_fails_the_binding_with_its_error_and_the_pod_is_retried(caplog):
    register(RaisingPermit)
    try:
        h = Harness({"profiles": [{"plugins": {"permit": {"enabled": [{"name": "RaisingPermit"}]}}}]})
        h.add_node(make_node("n0"))
        h.add_pod(make_pod("p"))
        with caplog.at_level(logging.WARNING, logger="corral.scheduler.scheduler"):
            await one_round(h)
    finally:
        REGISTRY.pop("RaisingPermit")
    s = h.scheduler
    assert h.placements() == {} and s.bind_failures == 1 and not s.cache.is_assumed("default/p")
    assert s.queue.get("default/p").where == "backoff"
    assert caplog.messages == ["binding default/p to n0 failed: quota service unreachable; retrying after backoff"]


async def test_a_pre_enqueue_plugin_keeps_a_pod_out_of_the_queue():
    h = Harness(CONFIG)
    h.add_node(make_node("n0"))
    h.add_pod(make_pod("held").labels(gated="true"))
    await h.run()
    assert h.placements() == {} and "default/held" not in h.scheduler.queue


# --- the order of the points, and the cycle state carried through them ---------------------------------

TRACE: list[tuple] = []
PRE_FILTERS: list[tuple[str, str]] = []  # (plugin, pod) of each PreFilter call


class Tracer(Plugin):
    """Records each call it gets: (point, plugin, pod, node, what its PreFilter left in the cycle state).
    A pod labelled ``refuse: <plugin>.<point>`` is refused there."""

    def _note(self, point, state, pod, node) -> Status:
        TRACE.append((point, self.NAME, pod.name, node, state.get(self.NAME)))
        return Status.unschedulable("refused") if pod.labels.get("refuse") == f"{self.NAME}.{point}" else SUCCESS

    def pre_filter(self, state, pod) -> Status:
        PRE_FILTERS.append((self.NAME, pod.name))
        state[self.NAME] = f"cycle of {pod.name}"
        return SUCCESS

    def reserve(self, state, pod, node) -> Status:
        return self._note("reserve", state, pod, node)

    def unreserve(self, state, pod, node) -> None:
        self._note("unreserve", state, pod, node)

    async def permit(self, state, pod, node) -> Status:
        return self._note("permit", state, pod, node)

    def post_filter(self, state, pod, diagnosis) -> PostFilterResult:
        # A PostFilter that cannot help: the next one runs (one that succeeds ends the chain).
        self._note("post_filter", state, pod, diagnosis.node_count)
        return PostFilterResult(Status.unschedulable())


class First(Tracer):
    NAME = "First"


class Second(Tracer):
    NAME = "Second"


class TracingBinder(Plugin):
    NAME = "TracingBinder"

    async def bind(self, state, pod, node) -> Status:
        TRACE.append(("bind", self.NAME, pod.name, node, state.get("First")))
        if pod.labels.get("refuse") == "bind":
            raise RuntimeError("the store is read-only")
        return await self.handle.binder.bind(pod, node)


TRACED = {"profiles": [{"plugins": {
    point: {"enabled": [{"name": "First"}, {"name": "Second"}]}
    for point in ("preFilter", "reserve", "permit", "postFilter")} | {
    "bind": {"enabled": [{"name": "TracingBinder"}], "disabled": [{"name": "*"}]}}}]}


@pytest.fixture
def traced():
    for plugin in (First, Second, TracingBinder):
        register(plugin)
    TRACE.clear()
    PRE_FILTERS.clear()
    yield
    for plugin in (First, Second, TracingBinder):
        REGISTRY.pop(plugin.NAME)


def calls(pod: str) -> list[tuple]:
    return [(point, plugin, node) for point, plugin, p, node, seen in TRACE if p == pod]


@pytest.mark.parametrize("refuse, expected", [
    pytest.param(None, [("reserve", "First"), ("reserve", "Second"), ("permit", "First"), ("permit", "Second"),
                        ("bind", "TracingBinder")], id="each point in profile order, then the binder"),
    pytest.param("First.reserve", [("reserve", "First"), ("unreserve", "First")],
                 id="a refused Reserve stops there and unreserves only what reserved"),
    pytest.param("Second.reserve", [("reserve", "First"), ("reserve", "Second"), ("unreserve", "Second"),
                                    ("unreserve", "First")], id="unreserve runs in reverse order"),
    pytest.param("First.permit", [("reserve", "First"), ("reserve", "Second"), ("permit", "First"),
                                  ("unreserve", "Second"), ("unreserve", "First")],
                 id="a refused Permit stops the later ones and unreserves every reservation"),
    pytest.param("Second.permit", [("reserve", "First"), ("reserve", "Second"), ("permit", "First"),
                                   ("permit", "Second"), ("unreserve", "Second"), ("unreserve", "First")],
                 id="the last Permit's refusal counts too"),
    pytest.param("bind", [("reserve", "First"), ("reserve", "Second"), ("permit", "First"), ("permit", "Second"),
                          ("bind", "TracingBinder"), ("unreserve", "Second"), ("unreserve", "First")],
                 id="a binder that raises is a failed binding"),
])
async def test_the_points_run_in_order_with_the_pod_the_node_and_one_cycle_state(traced, refuse, expected):
    h = Harness(TRACED)
    h.add_node(make_node("n0"))
    pod = make_pod("p")
    if refuse:
        pod.labels(refuse=refuse)
    h.add_pod(pod)
    await one_round(h)
    assert calls("p") == [(point, plugin, "n0") for point, plugin in expected]
    # Every call saw the state its plugin's PreFilter wrote in this pod's cycle.
    assert {seen for *_, p, node, seen in TRACE} == {"cycle of p"}
    assert h.placements() == ({} if refuse else {"default/p": "n0"})
    if refuse:
        assert not h.scheduler.cache.is_assumed("default/p")
        assert h.scheduler.queue.get("default/p").where == "backoff"


async def test_failed_bindings_are_counted_and_logged_with_their_cause(traced, caplog):
    h = Harness(TRACED)
    h.add_node(make_node("n0"))
    for name in ("a", "b"):
        h.add_pod(make_pod(name).labels(refuse="bind"))
    await one_round(h)
    assert h.scheduler.bind_failures == 2 and h.scheduler.scheduled == 0
    assert "binding default/a to n0 failed: the store is read-only; retrying after backoff" in caplog.messages


async def test_post_filter_gets_the_cycle_state_and_the_diagnosis_of_a_pod_that_fits_nowhere(traced):
    h = Harness(TRACED)
    h.add_node(make_node("n0"))
    h.add_node(make_node("n1"))
    h.add_pod(make_pod("huge").requests(cpu="64"))
    await one_round(h)
    assert [(point, plugin, count, seen) for point, plugin, _, count, seen in TRACE] == [
        ("post_filter", "First", 2, "cycle of huge"), ("post_filter", "Second", 2, "cycle of huge")]
    # PreFilter ran once in that cycle, though the remembered answers handed it to the full evaluation.
    assert PRE_FILTERS == [("First", "huge"), ("Second", "huge")]


@pytest.mark.parametrize("base", [object, Plugin], ids=["no NAME at all", "Plugin's empty NAME"])
def test_a_plugin_class_without_a_name_is_refused_by_name(base):
    class Nameless(base):
        pass

    with pytest.raises(ValueError, match="^Nameless has no NAME$"):
        register(Nameless)


async def test_the_default_binder_without_a_binder_fails_the_binding_and_says_why():
    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.framework.interface import CycleState
    from corral.scheduler.framework.podinfo import PodInfo
    from corral.scheduler.profiles import build_frameworks, parse_config

    fwk = build_frameworks(parse_config({}), cache=Cache(), clock=lambda: 0.0)["default-scheduler"]
    status = await fwk.binders[0].bind(CycleState(), PodInfo.from_object(make_pod("p").obj), "n0")
    assert (status.ok, status.message()) == (False, "no binder configured")


async def test_a_gang_member_refused_by_a_later_reserve_plugin_lets_the_members_waiting_for_it_go():
    """All or nothing: w0 and w1 wait at Permit for w2; Gatekeeper (after Coscheduling) refuses w2 at
    Reserve, and Coscheduling's Unreserve lets the two go instead of holding them to the timeout."""
    from corral.api.kinds.scheduling import POD_GROUP_LABEL

    h = Harness(CONFIG)
    for i in range(3):
        h.add_node(make_node(f"n{i}"))
    h.add_group("train", 3, timeout=60)
    for name in ("w0", "w1", "w2"):
        pod = make_pod(name).label(POD_GROUP_LABEL, "train")
        h.add_pod(pod.labels(refuse="reserve") if name == "w2" else pod)
    s = h.scheduler
    gang = s.cache.gangs.gangs["default/train"]
    for name in ("default/w0", "default/w1", "default/w2"):
        s.schedule_one(s.queue.pop_nowait())
        for _ in range(10):  # its binding task reaches Permit
            await asyncio.sleep(0)
        if name != "default/w2":
            assert name in gang.waiting
    await asyncio.wait_for(asyncio.gather(*list(s._inflight)), timeout=5)
    assert h.placements() == {} and not gang.waiting
    assert h.writer.conditions["default/w0"]["message"] == "PodGroup default/train: member default/w2 could not be bound"


class QuotaPreFilter(Plugin):
    """Refuses every pod at PreFilter: resolvably (pods removed could make room) unless labelled final."""
    NAME = "QuotaPreFilter"

    def pre_filter(self, state, pod) -> Status:
        return Status.unschedulable("over quota", plugin=self.NAME, unresolvable=pod.labels.get("final") == "true")


@pytest.mark.parametrize("final, preemptable", [(False, [True, True]), (True, [False, False])])
def test_a_pre_filter_refusal_rules_every_node_in_or_out_of_preemption_as_it_says(final, preemptable):
    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.framework.interface import CycleState
    from corral.scheduler.framework.podinfo import PodInfo
    from corral.scheduler.profiles import build_frameworks, parse_config

    register(QuotaPreFilter)
    try:
        cache = Cache()
        for i in range(2):
            cache.set_node(make_node(f"n{i}").obj)
        fwk = build_frameworks(parse_config({"profiles": [{"plugins": {"preFilter": {"enabled": [
            {"name": "QuotaPreFilter"}]}}}]}), cache=cache, clock=lambda: 0.0)["default-scheduler"]
    finally:
        REGISTRY.pop("QuotaPreFilter")
    pod = PodInfo.from_object(make_pod("p").labels(final=str(final).lower()).obj)
    _, diagnosis = fwk.find_feasible(CycleState(), pod, cache.table)
    assert diagnosis.preemptable_rows()[:2].tolist() == preemptable
