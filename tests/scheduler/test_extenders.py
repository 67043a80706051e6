"""Scheduler extenders: a real extender process over TLS (client certificate required) filters and
scores; an extender that is down stops scheduling unless it is ignorable; bad configuration is
refused by the setting's path."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import subprocess
import sys
import time

import pytest
from prometheus_client import generate_latest

from corral.pki.ca import CertificateAuthority
from corral.scheduler.framework.interface import Plugin
from corral.scheduler.framework.status import SUCCESS, Status
from corral.scheduler.plugins import REGISTRY, register
from corral.scheduler.profiles import ConfigError, parse_config
from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import Harness

ALLOW, SCORE = "extender.test/allow", "extender.test/score"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    root = tmp_path_factory.mktemp("extender-pki")
    ca = CertificateAuthority.generate("extender-ca")
    serving = ca.issue_serving("extender", ["127.0.0.1", "localhost"])
    client = ca.issue_client("system:kube-scheduler")
    files = {}
    for name, data in (("ca.pem", ca.cert_pem), ("cert.pem", serving.cert_pem), ("key.pem", serving.key_pem),
                       ("client.pem", client.cert_pem), ("client-key.pem", client.key_pem)):
        (root / name).write_bytes(data)
        files[name] = str(root / name)
    return files


@pytest.fixture(scope="module")
def extender(pki):
    """The extender process; yields its URL prefix."""
    proc = subprocess.Popen([sys.executable, "-m", "corral.testing.extender", "--cert", pki["cert.pem"],
                             "--key", pki["key.pem"], "--client-ca", pki["ca.pem"]],
                            stdout=subprocess.PIPE, text=True)
    try:
        port = json.loads(proc.stdout.readline())["port"]
        yield f"https://127.0.0.1:{port}/scheduler"
    finally:
        proc.terminate()
        proc.wait(10)


def config(url: str, pki: dict, **overrides) -> dict:
    entry = {"urlPrefix": url, "filterVerb": "filter", "prioritizeVerb": "prioritize", "weight": 5,
             "httpTimeout": "2s", "enableHTTPS": True,
             "tlsConfig": {"caFile": pki["ca.pem"], "certFile": pki["client.pem"], "keyFile": pki["client-key.pem"]},
             **overrides}
    return {"extenders": [entry]}


def nodes(h: Harness) -> None:
    h.add_node(make_node("low-score").capacity(cpu=4, memory="8Gi", pods=20).labels(**{ALLOW: "yes", SCORE: "1"}))
    h.add_node(make_node("high-score").capacity(cpu=2, memory="8Gi", pods=20).labels(**{ALLOW: "yes", SCORE: "9"}))
    h.add_node(make_node("refused").capacity(cpu=16, memory="64Gi", pods=20))
    h.add_node(make_node("never").capacity(cpu=8, memory="64Gi", pods=20).labels(**{ALLOW: "never"}))


async def test_placements_follow_the_extenders_filter_and_its_weighted_scores(extender, pki):
    h = Harness(config(extender, pki))
    nodes(h)
    h.add_pod(make_pod("web").requests(cpu="500m"))
    h.add_pod(make_pod("big").requests(cpu="3"))
    h.add_pod(make_pod("huge").requests(cpu="8"))
    await h.run()
    # The emptiest nodes are refused by the extender; among the rest its score (9 × 5 × 10) wins.
    assert h.placements() == {"default/web": "high-score", "default/big": "low-score"}
    assert h.writer.conditions["default/huge"]["message"] == (
        "0/4 nodes are available: 1 node(s) are never allowed by the test extender, "
        "1 node(s) not allowed by the test extender, 2 Insufficient cpu. preemption: 0/4 nodes are available: "
        "1 Preemption is not helpful for scheduling, 3 No preemption victims found for incoming pod.")
    # Each attempt is timed from its start, extenders' answers included (seconds, not a clock reading).
    sums = [float(line.split()[-1]) for line in generate_latest(h.scheduler.metrics.registry).decode().splitlines()
            if line.startswith("corral_scheduler_scheduling_attempt_duration_seconds_sum")]
    assert len(sums) == 2 and 0 < sum(sums) < 30  # scheduled, unschedulable


async def test_the_running_scheduler_asks_the_extender_for_each_pod(extender, pki):
    """Scheduler.start() runs the loop a server runs (the harness above takes the pods round by round)."""
    h = Harness(config(extender, pki))
    nodes(h)
    h.scheduler.start()
    try:
        h.add_pod(make_pod("web").requests(cpu="500m"))
        deadline = time.monotonic() + 20
        while "default/web" not in h.writer.bindings:
            assert time.monotonic() < deadline, h.scheduler.queue.counts()
            await asyncio.sleep(0.02)
    finally:
        await h.scheduler.stop()
    assert h.placements() == {"default/web": "high-score"}


class CycleNotes(Plugin):
    """Its PreFilter leaves a note in the cycle state; Reserve and Permit record what they find there."""
    NAME = "CycleNotes"
    seen: list[tuple[str, str | None]] = []

    def pre_filter(self, state, pod) -> Status:
        state[self.NAME] = f"cycle of {pod.name}"
        return SUCCESS

    def reserve(self, state, pod, node) -> Status:
        self.seen.append(("reserve", state.get(self.NAME)))
        return SUCCESS

    async def permit(self, state, pod, node) -> Status:
        self.seen.append(("permit", state.get(self.NAME)))
        return SUCCESS


async def test_with_an_extender_reserve_and_permit_see_the_cycle_state_the_pods_pre_filter_wrote(extender, pki):
    register(CycleNotes)
    CycleNotes.seen = []
    try:
        h = Harness({**config(extender, pki), "profiles": [{"plugins": {
            point: {"enabled": [{"name": "CycleNotes"}]} for point in ("preFilter", "reserve", "permit")}}]})
        nodes(h)
        h.add_pod(make_pod("web").requests(cpu="500m"))
        await h.run()
    finally:
        REGISTRY.pop("CycleNotes")
    assert h.placements() == {"default/web": "high-score"}
    assert CycleNotes.seen == [("reserve", "cycle of web"), ("permit", "cycle of web")]


async def test_with_a_preempting_extender_a_pod_that_fits_is_bound_and_nothing_is_preempted(extender, pki):
    h = Harness(config(extender, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt"))
    h.add_node(make_node("n0").capacity(cpu=4, memory="8Gi", pods=20))
    h.add_pod(make_pod("low").requests(cpu="2").node("n0").obj)
    h.add_pod(make_pod("hi").requests(cpu="1").priority(10))
    await h.run()
    assert h.placements() == {"default/hi": "n0"} and h.writer.deleted == []
    assert [a for a in await _recorded(extender, h) if a["pod"]["metadata"]["name"] == "hi"] == []
    await h.scheduler.extenders.close()


async def test_the_extender_is_asked_only_about_nodes_the_filters_passed_and_to_score_only_a_choice(extender, pki):
    h = Harness(config(extender, pki))
    nodes(h)
    h.add_pod(make_pod("ask-none").requests(cpu="64"))  # no node fits: nothing to ask about
    h.add_pod(make_pod("ask-one").requests(cpu="3"))  # the extender passes one of the three that fit: no choice
    h.add_pod(make_pod("ask-two").requests(cpu="500m"))
    await h.run()
    assert h.placements() == {"default/ask-one": "low-score", "default/ask-two": "high-score"}
    calls = {verb: [(c["pod"], sorted(c["nodes"])) for c in await _recorded(extender, h, verb)
                    if c["pod"].startswith("ask-")]  # the extender is shared by this module's tests: only ours
             for verb in ("filters", "prioritizes")}
    assert calls["filters"] == [("ask-one", ["low-score", "never", "refused"]),
                                ("ask-two", ["high-score", "low-score", "never", "refused"])]
    assert calls["prioritizes"] == [("ask-two", ["high-score", "low-score"])]
    await h.scheduler.extenders.close()


async def test_an_extender_with_a_filter_only_filters_and_a_node_it_leaves_unnamed_is_rejected(extender, pki):
    h = Harness(config(extender, pki, prioritizeVerb=""))
    nodes(h)
    h.add_node(make_node("silent").capacity(cpu=32, memory="64Gi", pods=20).labels(**{ALLOW: "silent"}))
    h.add_pod(make_pod("only-filtered").requests(cpu="500m"))
    h.add_pod(make_pod("fits-no-allowed-node").requests(cpu="6"))
    await h.run()
    # Without its scores the built-in ones choose among the nodes it passed: the emptier one.
    assert h.placements() == {"default/only-filtered": "low-score"}
    assert h.writer.conditions["default/fits-no-allowed-node"]["message"].startswith(
        "0/5 nodes are available: 1 node(s) are never allowed by the test extender, 1 node(s) not allowed by "
        "the test extender, 1 node(s) were rejected by the extender, 2 Insufficient cpu.")
    await h.scheduler.extenders.close()


async def test_an_extender_that_is_down_stops_scheduling_and_is_named(pki):
    h = Harness(config("https://127.0.0.1:9/scheduler", pki))
    nodes(h)
    h.add_pod(make_pod("web").requests(cpu="500m"))
    await _rounds(h, 3)
    assert h.placements() == {}
    (event,) = {m for k, r, m in h.writer.events if k == "default/web" and r == "FailedScheduling"}
    assert event.startswith("extender https://127.0.0.1:9/scheduler failed: filter: ")
    assert {e["type"] for e in h.writer.event_objects if e["reason"] == "FailedScheduling"} == {"Warning"}
    assert h.writer.conditions["default/web"]["reason"] == "SchedulerError"
    metrics = generate_latest(h.scheduler.metrics.registry).decode()
    assert 'corral_scheduler_schedule_attempts_total{profile="default-scheduler",result="error"} 3.0' in metrics
    assert 'corral_scheduler_extender_errors_total{extender="https://127.0.0.1:9/scheduler",ignorable="false"}' in metrics
    assert "# HELP corral_scheduler_extender_errors_total Extender calls that failed\n" in metrics


async def test_an_ignorable_extender_that_is_down_is_skipped_and_counted(pki):
    h = Harness(config("https://127.0.0.1:9/scheduler", pki, ignorable=True))
    nodes(h)
    h.add_pod(make_pod("web").requests(cpu="500m"))
    await h.run()
    assert h.placements() == {"default/web": "refused"}  # the built-in scores alone: the emptiest node
    metrics = generate_latest(h.scheduler.metrics.registry).decode()
    assert 'corral_scheduler_extender_errors_total{extender="https://127.0.0.1:9/scheduler",ignorable="true"} 2.0' in metrics


async def test_an_ignorable_extender_that_is_down_does_not_silence_the_one_after_it(extender, pki):
    down = config("https://127.0.0.1:9/scheduler", pki, ignorable=True)["extenders"][0]
    h = Harness({"extenders": [down, config(extender, pki)["extenders"][0]]})
    nodes(h)
    h.add_pod(make_pod("web").requests(cpu="500m"))
    await h.run()
    assert h.placements() == {"default/web": "high-score"}  # the second one's filter and scores held
    await h.scheduler.extenders.close()


async def test_an_extender_without_our_client_certificate_gets_no_answer_through(extender, pki):
    entry = config(extender, pki)
    entry["extenders"][0]["tlsConfig"] = {"caFile": pki["ca.pem"]}
    h = Harness(entry)
    nodes(h)
    h.add_pod(make_pod("web").requests(cpu="500m"))
    await _rounds(h, 1)
    assert h.placements() == {}


async def test_an_extender_with_a_bind_verb_binds_the_pods_it_manages(extender, pki):
    h = Harness(config(extender, pki, bindVerb="bind", managedResources=[{"name": "example.com/gpu", "ignoredByScheduler": True}]))
    nodes(h)
    h.add_pod(make_pod("plain").requests(cpu="500m"))
    h.add_pod(make_pod("gpu").requests(cpu="500m", **{"example.com/gpu": "1"}))
    await _rounds(h, 1)
    # Only the pod asking for the managed resource went through the extender (its filter, its bind);
    # no node offers example.com/gpu, which the extender, not NodeResourcesFit, answers for.
    assert h.placements() == {"default/plain": "refused"}
    assert await _recorded(extender, h, "binds") == [{"podNamespace": "default", "podName": "gpu", "podUID": "uid-default-gpu", "node": "high-score"}]
    await h.scheduler.extenders.close()


async def test_a_binding_the_extender_fails_is_retried_after_backoff_and_logged_with_its_error(extender, pki, caplog):
    h = Harness(config(extender, pki, bindVerb="no-such-verb",
                       managedResources=[{"name": "example.com/gpu", "ignoredByScheduler": True}]))
    nodes(h)
    h.add_pod(make_pod("gpu").requests(cpu="500m", **{"example.com/gpu": "1"}))
    with caplog.at_level(logging.WARNING, logger="corral.scheduler.scheduler"):
        await _rounds(h, 1)
    s = h.scheduler
    assert h.placements() == {} and s.bind_failures == 1 and not s.cache.is_assumed("default/gpu")
    assert "default/gpu" in s.queue  # to be tried again (its backoff is over once the round ends)
    assert (f"binding default/gpu to high-score failed: extender {extender} failed: no-such-verb: HTTP 404: "
            "404: Not Found; retrying after backoff") in caplog.messages
    await s.extenders.close()


async def _rounds(h: Harness, rounds: int) -> None:
    """A few rounds of attempts (an extender that fails keeps a pod in backoff, so run() would not settle)."""
    s = h.scheduler
    s.events.start()
    for _ in range(rounds):
        while (qp := s.queue.pop_nowait()) is not None:
            await s.attempt(qp)
        while s._inflight:
            await asyncio.gather(*list(s._inflight), return_exceptions=True)
        h.queue_clock.advance(s.queue.settings.backoff_max)
        s.queue.flush_backoff()
    await s.events.drain()
    await s.extenders.close()


@pytest.mark.parametrize("entry, message", [
    pytest.param({"urlPrefix": "ftp://x"}, "extenders[0].urlPrefix: must be an http:// or https:// URL",
                 id="a URL that is not http or https is refused"),
    pytest.param({"urlPrefix": "http://x", "filterVerb": "../admin"}, "extenders[0].filterVerb: must be a path segment",
                 id="a verb that climbs out of the prefix is refused"),
    pytest.param({"urlPrefix": "http://x", "prioritizeVerb": "p", "weight": 0},
                 "extenders[0].weight: must be a positive integer", id="a prioritizer needs a positive weight"),
    pytest.param({"urlPrefix": "http://x", "httpTimeout": "soon"}, "extenders[0].httpTimeout: must be a positive duration",
                 id="a timeout must be a duration"),
    pytest.param({"urlPrefix": "http://x", "enableHTTPS": True}, "extenders[0].enableHTTPS: True does not match urlPrefix",
                 id="https must match the URL"),
    pytest.param({"urlPrefix": "http://x", "filterverb": "f"}, "extenders[0]: unknown field 'filterverb'",
                 id="a misspelt field is named"),
    pytest.param({"urlPrefix": "http://x", "preemptVerb": "../preempt"}, "extenders[0].preemptVerb: must be a path segment",
                 id="a preempt verb that climbs out of the prefix is refused"),
])
def test_bad_extender_settings_are_refused_by_path(entry, message):
    with pytest.raises(ConfigError, match="^" + re.escape(f"sched.yaml: {message}")):
        parse_config({"extenders": [entry]}, "sched.yaml")


# --- preemption ------------------------------------------------------------------------------------


def victim(name: str, node: str, priority: int) -> dict:
    return make_pod(name).requests(cpu="4").priority(priority).node(node).obj


def preempting(url: str, pki: dict, verb: str = "preempt", *, extenders: dict | None = None, **overrides) -> Harness:
    """Two full nodes: the cheaper victim on ``no-cheap`` (which the extender drops), a dearer one
    on ``ok-dear``; the preemptor needs a whole node. ``extenders``: a configuration of several."""
    h = Harness(extenders or config(url, pki, filterVerb="", prioritizeVerb="", preemptVerb=verb, **overrides))
    for name in ("no-cheap", "ok-dear"):
        h.add_node(make_node(name).capacity(cpu=4, memory="8Gi", pods=20))
    h.add_pod(victim("cheap", "no-cheap", 0))
    h.add_pod(victim("dear", "ok-dear", 5))
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    return h


async def _recorded(url: str, h: Harness, calls: str = "preempts") -> list[dict]:
    """What the test extender recorded of its ``calls`` (preempts, filters, prioritizes, binds)."""
    async with h.scheduler.extenders.clients[0]._http().get(f"{url}/{calls}") as resp:
        return await resp.json()


@pytest.mark.parametrize("verb, cache_capable", [
    pytest.param("preempt", True, id="answered in kube-scheduler's JSON field names, node names only"),
    pytest.param("preempt-go", False, id="answered with the capitalised keys of its untagged Go types, whole pods"),
])
async def test_preemption_takes_the_candidate_the_extender_keeps(extender, pki, verb, cache_capable):
    h = preempting(extender, pki, verb, nodeCacheCapable=cache_capable)
    await _rounds(h, 1)
    # Alone, DefaultPreemption would take the priority-0 pod on no-cheap; the extender dropped that node.
    assert h.writer.deleted == ["default/dear"]
    assert h.scheduler.cache.nominator.node_of("default/hi") == "ok-dear"
    assert h.writer.conditions["default/hi"]["message"].endswith(
        "preemption: node ok-dear nominated, preempting 1 pod(s) of lower priority: default/dear.")
    sent = [a for a in await _recorded(extender, h) if a["pod"]["metadata"]["name"] == "hi"][-1]
    if cache_capable:
        assert sent["nodeNameToMetaVictims"] == {
            "no-cheap": {"pods": [{"uid": "uid-default-cheap"}], "numPDBViolations": 0},
            "ok-dear": {"pods": [{"uid": "uid-default-dear"}], "numPDBViolations": 0}}
    else:
        assert {n: [p["metadata"]["name"] for p in v["pods"]] for n, v in sent["nodeNameToVictims"].items()} == {
            "no-cheap": ["cheap"], "ok-dear": ["dear"]}
    await h.scheduler.extenders.close()


async def test_of_the_candidates_the_extender_keeps_the_best_by_kubernetes_criteria_is_taken(extender, pki):
    """Both nodes kept: the one whose victim has the lower priority wins, though it came second."""
    h = Harness(config(extender, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt"))
    for name in ("ok-first", "ok-second"):
        h.add_node(make_node(name).capacity(cpu=4, memory="8Gi", pods=20))
    h.add_pod(victim("dear", "ok-first", 5))
    h.add_pod(victim("cheap", "ok-second", 0))
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await _rounds(h, 1)
    assert h.writer.deleted == ["default/cheap"]
    assert h.scheduler.cache.nominator.node_of("default/hi") == "ok-second"


@pytest.mark.parametrize("nodes, percentage, absolute, sent", [
    pytest.param(3, 0, 2, 2, id="minCandidateNodesAbsolute caps the candidates the extender sees"),
    pytest.param(10, 30, 1, 3, id="minCandidateNodesPercentage of the nodes, rounded up"),
    pytest.param(67, 3, 1, 3, id="a fraction of a node counts as one more (2.01 of 67 nodes: 3)"),
    pytest.param(4, 0, 0, 1, id="never fewer than one"),
])
async def test_the_extender_is_offered_as_many_candidates_as_the_preemption_arguments_allow(
        extender, pki, nodes, percentage, absolute, sent):
    h = Harness({**config(extender, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt"),
                 "profiles": [{"pluginConfig": [{"name": "DefaultPreemption", "args": {
                     "minCandidateNodesPercentage": percentage, "minCandidateNodesAbsolute": absolute}}]}]})
    for i in range(nodes):
        h.add_node(make_node(f"ok-{i}").capacity(cpu=4, memory="8Gi", pods=20))
        h.add_pod(victim(f"v{i}", f"ok-{i}", 0))
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await _rounds(h, 1)
    asked = [a for a in await _recorded(extender, h) if a["pod"]["metadata"]["name"] == "hi"][-1]
    assert len(asked["nodeNameToMetaVictims"] if "nodeNameToMetaVictims" in asked else asked["nodeNameToVictims"]) == sent
    assert len(h.writer.deleted) == 1  # one node's victim goes, whichever was offered


async def test_when_the_extender_keeps_no_candidate_nothing_is_preempted_and_the_message_says_who(extender, pki):
    h = preempting(extender, pki)
    h.delete_pod("default/dear")
    h.add_node(make_node("no-other").capacity(cpu=4, memory="8Gi", pods=20))
    h.add_pod(victim("other", "no-other", 0))
    h.add_pod(victim("full", "ok-dear", 20))  # ok-dear has no victim to offer now
    await _rounds(h, 1)
    assert h.writer.deleted == [] and not h.scheduler.cache.nominator.node_of("default/hi")
    assert h.writer.conditions["default/hi"]["message"] == (
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
        f"2 candidate node(s) refused by extender {extender}.")


def two_preempting(url: str, pki: dict, first: dict) -> Harness:
    """preempting()'s cluster with two extenders: ``first`` (settings of the first), then one that
    keeps only the ok- nodes."""
    entries = [config(url, pki, filterVerb="", prioritizeVerb="", **first)["extenders"][0],
               config(url, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt")["extenders"][0]]
    return preempting(url, pki, extenders={"extenders": entries})


async def test_an_ignorable_extender_that_fails_leaves_the_candidates_to_the_next_one(extender, pki):
    h = two_preempting(extender, pki, {"preemptVerb": "no-such-verb", "ignorable": True})
    await _rounds(h, 1)
    assert h.writer.deleted == ["default/dear"]  # the second extender dropped no-cheap
    await h.scheduler.extenders.close()


async def test_once_an_extender_keeps_no_candidate_the_next_one_is_not_asked(extender, pki):
    h = two_preempting(extender, pki, {"preemptVerb": "preempt"})
    h.delete_pod("default/dear")
    h.add_pod(victim("full", "ok-dear", 20))  # ok-dear has no victim to offer: the first keeps nothing
    before = len(await _recorded(extender, h))  # the extender serves the whole module
    await _rounds(h, 1)
    assert h.writer.deleted == [] and not h.scheduler.cache.nominator.node_of("default/hi")
    assert len(await _recorded(extender, h)) == before + 1
    await h.scheduler.extenders.close()


@pytest.mark.parametrize("keeper", [
    pytest.param(20, id="a pod of higher priority named as a victim rules its node out"),
    pytest.param(10, id="a pod of the preemptor's own priority named as a victim rules its node out"),
    pytest.param(None, id="a victim that is no pod on the node rules its node out"),
])
async def test_victims_an_extender_names_that_preemption_may_not_take_rule_their_node_out(extender, pki, keeper):
    h = Harness(config(extender, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt"))
    h.add_node(make_node("bogus-a").capacity(cpu=8, memory="8Gi", pods=20))
    h.add_pod(victim("a", "bogus-a", 0))
    if keeper is not None:
        h.add_pod(victim("keeper", "bogus-a", keeper))  # the extender names it a victim too
    h.add_pod(make_pod("hi").requests(cpu="8" if keeper is None else "4").priority(10))
    await _rounds(h, 1)
    assert h.writer.deleted == []
    assert h.writer.conditions["default/hi"]["message"].endswith(
        "preemption: 0/1 nodes are available: 1 candidate node(s) where an extender named victims that are "
        "not pods of lower priority there.")


async def test_a_node_where_the_extenders_victims_would_not_make_room_is_ruled_out(extender, pki):
    h = Harness(config(extender, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt"))
    h.add_node(make_node("few-a").capacity(cpu=4, memory="8Gi", pods=20))
    h.add_pod(make_pod("a").requests(cpu="2").node("few-a").obj)
    h.add_pod(make_pod("b").requests(cpu="2").node("few-a").obj)
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await _rounds(h, 1)
    assert h.writer.deleted == []  # the extender named one of the two pods that must go
    assert h.writer.conditions["default/hi"]["message"].endswith(
        "preemption: 0/1 nodes are available: 1 candidate node(s) where the pod would not fit once the "
        "extender's victims were gone.")


@pytest.mark.parametrize("node", [
    pytest.param("ok-t", id="pods already leaving count as room though the extender did not name them"),
    pytest.param("bogus-t", id="a pod already leaving that the extender names is room, not a victim to delete"),
])
async def test_pods_already_leaving_are_room_when_the_extender_decides(extender, pki, node):
    h = Harness(config(extender, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt"))
    h.add_node(make_node(node).capacity(cpu=4, memory="8Gi", pods=20))
    going = make_pod("keeper").requests(cpu="2").node(node).obj
    going["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z"
    h.add_pod(going)
    h.add_pod(make_pod("b").requests(cpu="2").node(node).obj)
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await _rounds(h, 1)
    assert h.writer.deleted == ["default/b"] and h.scheduler.cache.nominator.node_of("default/hi") == node
    assert h.writer.conditions["default/hi"]["message"].endswith(
        f"preemption: node {node} nominated, preempting 1 pod(s) of lower priority: default/b.")


@pytest.mark.parametrize("call", [
    pytest.param("filter", id="a pod deleted while the extenders filter is neither placed nor bound"),
    pytest.param("process_preemption", id="a pod deleted while an extender judges preemption makes nobody leave"),
])
async def test_a_pod_deleted_while_the_extenders_answer_is_left_alone(extender, pki, call):
    if call == "filter":
        h = Harness(config(extender, pki))
        nodes(h)
        h.add_pod(make_pod("hi").requests(cpu="500m"))
    else:
        h = preempting(extender, pki)
    extenders = h.scheduler.extenders
    real = getattr(extenders, call)

    async def deleted_meanwhile(*args):
        answer = await real(*args)
        h.delete_pod("default/hi")
        return answer

    setattr(extenders, call, deleted_meanwhile)
    await _rounds(h, 1)
    assert h.writer.deleted == [] and h.writer.bind_attempts == 0
    assert "default/hi" not in h.writer.conditions and not h.scheduler.cache.nominator.node_of("default/hi")


async def test_each_node_ruled_out_is_counted_in_the_message(extender, pki):
    h = Harness(config(extender, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt"))
    for name in ("few-a", "few-b", "bogus-a", "bogus-b"):
        h.add_node(make_node(name).capacity(cpu=4, memory="8Gi", pods=20))
        h.add_pod(make_pod(f"{name}-1").requests(cpu="2").node(name).obj)
        h.add_pod(make_pod(f"{name}-2").requests(cpu="2").node(name).obj)
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await _rounds(h, 1)
    assert h.writer.deleted == []
    assert h.writer.conditions["default/hi"]["message"].endswith(
        "preemption: 0/4 nodes are available: 2 candidate node(s) where an extender named victims that are not pods "
        "of lower priority there, 2 candidate node(s) where the pod would not fit once the extender's victims were gone.")


async def test_nodes_that_leave_while_the_extender_decides_are_ruled_out(extender, pki):
    h = Harness(config(extender, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt"))
    for name in ("ok-1", "ok-2"):
        h.add_node(make_node(name).capacity(cpu=4, memory="8Gi", pods=20))
        h.add_pod(victim(f"v-{name}", name, 0))
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    real = h.scheduler.extenders.process_preemption

    async def nodes_gone_meanwhile(*args):
        answer = await real(*args)
        h.scheduler.node_changed("ok-1", None)
        h.scheduler.node_changed("ok-2", None)
        return answer

    h.scheduler.extenders.process_preemption = nodes_gone_meanwhile
    await _rounds(h, 1)
    assert h.writer.deleted == []
    assert h.writer.conditions["default/hi"]["message"].endswith(
        "preemption: 0/2 nodes are available: 2 candidate node(s) left the cluster while the extenders decided.")


async def test_pods_leaving_of_the_preemptors_own_priority_are_no_room(extender, pki):
    h = Harness(config(extender, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt"))
    h.add_node(make_node("few-t").capacity(cpu=6, memory="8Gi", pods=20))
    equal = make_pod("equal").requests(cpu="2").priority(10).node("few-t").obj
    equal["metadata"]["deletionTimestamp"] = "2026-11-25T10:00:00Z"
    h.add_pod(equal)
    h.add_pod(make_pod("a").requests(cpu="2").node("few-t").obj)
    h.add_pod(make_pod("b").requests(cpu="2").node("few-t").obj)
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await _rounds(h, 1)
    assert h.writer.deleted == []  # one of a and b named: only 2 cpu of lower priority would leave
    assert h.writer.conditions["default/hi"]["message"].endswith("once the extender's victims were gone.")


async def test_the_victims_kept_are_named_most_important_first(extender, pki):
    h = Harness(config(extender, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt"))
    h.add_node(make_node("ok-x").capacity(cpu=4, memory="8Gi", pods=20))
    h.add_pod(make_pod("low").requests(cpu="2").priority(1).node("ok-x").obj)
    h.add_pod(make_pod("mid").requests(cpu="2").priority(5).node("ok-x").obj)
    h.add_pod(make_pod("hi").requests(cpu="4").priority(10))
    await _rounds(h, 1)
    assert sorted(h.writer.deleted) == ["default/low", "default/mid"]
    assert h.writer.conditions["default/hi"]["message"].endswith(
        "preemption: node ok-x nominated, preempting 2 pod(s) of lower priority: default/mid, default/low.")


async def test_a_nomination_is_dropped_when_the_extenders_keep_no_candidate(extender, pki):
    h = preempting(extender, pki)
    h.delete_pod("default/dear")
    h.add_pod(victim("full", "ok-dear", 20))
    nominated = make_pod("hi").requests(cpu="4").priority(10).obj
    nominated["status"]["nominatedNodeName"] = "no-cheap"  # claimed before a restart
    h.add_pod(nominated)
    assert h.scheduler.cache.nominator.node_of("default/hi") == "no-cheap"
    await _rounds(h, 1)
    assert h.writer.deleted == [] and not h.scheduler.cache.nominator.node_of("default/hi")
    assert ("default/hi", {"status": {"nominatedNodeName": None}}) in h.writer.status_patches


async def test_an_extender_that_is_down_stops_preemption_unless_it_is_ignorable(pki):
    down = "https://127.0.0.1:9/scheduler"
    h = preempting(down, pki)
    await _rounds(h, 2)
    assert h.writer.deleted == []
    assert h.writer.conditions["default/hi"]["reason"] == "SchedulerError"
    assert h.writer.conditions["default/hi"]["message"].startswith(f"extender {down} failed: preempt: ")
    h = preempting(down, pki, ignorable=True)
    await _rounds(h, 1)
    assert h.writer.deleted == ["default/cheap"]  # DefaultPreemption's own choice


async def test_a_pod_the_preempting_extender_is_not_interested_in_preempts_without_it(extender, pki):
    h = preempting(extender, pki, managedResources=[{"name": "example.com/gpu"}])
    await _rounds(h, 1)
    assert h.writer.deleted == ["default/cheap"]


async def test_explain_shows_the_extenders_rejections_and_scores(extender, pki):
    h = Harness(config(extender, pki))
    nodes(h)
    report = await h.scheduler.explain_with_extenders(make_pod("web").requests(cpu="500m").obj)
    await h.scheduler.extenders.close()
    by_node = {n["node"]: n for n in report["nodes"]}
    assert report["chosen"] == "high-score" and report["feasible"] == 2
    assert by_node["refused"] == {"node": "refused", "feasible": False, "plugin": f"extender {extender}",
                                  "reasons": ["node(s) not allowed by the test extender"]}
    assert by_node["high-score"]["scores"][f"extender {extender}"] == 450.0
    assert report["message"] == ("2/4 nodes are available: 1 node(s) are never allowed by the test extender, "
                                 "1 node(s) not allowed by the test extender.")


async def test_explain_asks_the_extender_about_the_nodes_the_filters_passed_only(extender, pki):
    h = Harness(config(extender, pki))
    nodes(h)
    await h.scheduler.explain_with_extenders(make_pod("asked").requests(cpu="3").obj)
    asked = [f["nodes"] for f in await _recorded(extender, h, "filters") if f["pod"] == "asked"]
    await h.scheduler.extenders.close()
    assert [sorted(n) for n in asked] == [["low-score", "never", "refused"]]  # high-score has 2 cpu: not asked


async def test_explain_says_when_the_extender_failed_and_keeps_the_built_in_report(pki):
    down = "https://127.0.0.1:9/scheduler"
    h = Harness(config(down, pki))
    nodes(h)
    pod = make_pod("web").requests(cpu="500m").obj
    report = await h.scheduler.explain_with_extenders(pod)
    await h.scheduler.extenders.close()
    assert report.pop("extenderError").startswith(f"extender {down} failed: filter: ")
    assert report == h.scheduler.explain(pod)


async def test_explain_leaves_out_an_extender_not_interested_in_the_pod(extender, pki):
    h = Harness(config(extender, pki, managedResources=[{"name": "example.com/gpu"}]))
    nodes(h)
    pod = make_pod("web").requests(cpu="500m").obj
    report = await h.scheduler.explain_with_extenders(pod)
    too_big = make_pod("big").requests(cpu="64").obj  # fits nowhere: the whole message, preemption's part too
    big_report = await h.scheduler.explain_with_extenders(too_big)
    await h.scheduler.extenders.close()
    assert report == h.scheduler.explain(pod) and report["feasible"] == 4
    assert big_report == h.scheduler.explain(too_big) and "preemption: " in big_report["message"]


async def test_an_extenders_score_beyond_ten_counts_as_ten(extender, pki):
    h = Harness(config(extender, pki))
    for name, score in (("boastful", "99"), ("honest", "10")):
        h.add_node(make_node(name).capacity(cpu=4, memory="8Gi", pods=20).labels(**{ALLOW: "yes", SCORE: score}))
    report = await h.scheduler.explain_with_extenders(make_pod("web").requests(cpu="500m").obj)
    await h.scheduler.extenders.close()
    assert {n["node"]: n["scores"][f"extender {extender}"] for n in report["nodes"]} == {
        "boastful": 500.0, "honest": 500.0}


def test_a_server_with_an_extender_in_its_scheduler_config_places_and_explains_by_it(extender, pki, tmp_path):
    import yaml

    from corral.testing import ServerProcess
    from tests.cli.test_cli import corral
    from tests.scheduler.test_end_to_end import manifests, node, pod, pod_nodes, wait_for

    path = tmp_path / "sched.yaml"
    path.write_text(yaml.safe_dump(config(extender, pki)))
    allowed = node("allowed", **{ALLOW: "yes", SCORE: "3"})
    with ServerProcess(str(tmp_path / "api"), "--scheduler-config", str(path)) as api:
        kc = api.kubeconfig
        corral("apply", "-f", manifests(tmp_path, node("refused"), allowed), kubeconfig=kc)
        corral("apply", "-f", manifests(tmp_path, pod("web", "100m")), kubeconfig=kc)
        assert wait_for(lambda: pod_nodes(kc)["web"] == "allowed" or None, what="web placed by the extender")
        explained = corral("explain", "pod", "web", kubeconfig=kc).stdout
        assert f"extender {extender}: node(s) not allowed by the test extender" in explained
        # A plan asks the extender too: every pod on the one node it allows (the scores alone
        # would spread them over both).
        planned = json.loads(corral("plan", "-f", manifests(tmp_path, *[pod(f"p{i}", "100m") for i in range(3)]),
                                    "-o", "json", kubeconfig=kc).stdout)
        assert [p["node"] for p in planned["pods"]] == ["allowed"] * 3
        assert planned["notes"] == ["scheduler extenders were asked to filter and score"]


@pytest.mark.parametrize("timeout, seconds", [
    pytest.param("1.5s", 1.5, id="seconds with a fraction"),
    pytest.param("250ms", 0.25, id="milliseconds"),
    pytest.param("2m", 120.0, id="minutes"),
    pytest.param(3, 3.0, id="a plain number is seconds"),
])
def test_http_timeouts_are_read_as_go_durations(timeout, seconds):
    (entry,) = parse_config({"extenders": [{"urlPrefix": "http://x", "httpTimeout": timeout}]}, "s.yaml").extenders
    assert entry.timeout == seconds


@pytest.mark.parametrize("timeout", [
    pytest.param("0s", id="zero is refused"), pytest.param(0, id="a zero number is refused"),
    pytest.param(True, id="a boolean is no duration"), pytest.param("5 s", id="a space is no duration"),
])
def test_a_timeout_that_is_no_positive_duration_is_refused(timeout):
    with pytest.raises(ConfigError, match=r"httpTimeout: must be a positive duration"):
        parse_config({"extenders": [{"urlPrefix": "http://x", "httpTimeout": timeout}]}, "s.yaml")


def test_tls_settings_come_inline_or_from_files_and_bad_ones_are_named(pki, tmp_path):
    import base64

    ca = open(pki["ca.pem"], "rb").read()
    entry = {"urlPrefix": "https://x", "prioritizeVerb": "p",
             "tlsConfig": {"caData": base64.b64encode(ca).decode(), "certFile": pki["client.pem"],
                           "keyData": base64.b64encode(open(pki["client-key.pem"], "rb").read()).decode(),
                           "insecure": True, "serverName": "extender.local"}}
    (parsed,) = parse_config({"extenders": [entry]}, "s.yaml").extenders
    assert parsed.tls.ca == ca and parsed.tls.cert == open(pki["client.pem"], "rb").read()
    assert parsed.tls.key.startswith(b"-----BEGIN") and parsed.tls.insecure and parsed.tls.server_name == "extender.local"
    assert parsed.weight == 1 and not parsed.node_cache_capable and not parsed.ignorable  # the defaults
    for tls, message in (({"caData": "YWJj!"}, "tlsConfig.caData: not valid base64"),  # "abc" but for the "!"
                         ({"caFile": str(tmp_path / "missing.pem")}, "tlsConfig.caFile: cannot read"),
                         ({"certFile": pki["client.pem"]}, "tlsConfig: a client certificate needs both"),
                         ({"caFlie": "x"}, "tlsConfig: unknown field 'caFlie'"),
                         ("yes", "tlsConfig: must be a mapping")):
        with pytest.raises(ConfigError, match="^" + re.escape(f"s.yaml: extenders[0].{message}")):
            parse_config({"extenders": [{**entry, "tlsConfig": tls}]}, "s.yaml")


def test_a_plan_asks_the_extenders_preempt_verb_as_the_scheduler_does(extender, pki, tmp_path):
    """Alone, DefaultPreemption would take the priority-0 pod on no-cheap; the extender drops that
    node, so the plan preempts the dearer pod on ok-dear, as the scheduler would."""
    import yaml

    from corral.testing import ServerProcess
    from tests.cli.test_cli import corral
    from tests.scheduler.test_end_to_end import manifests, node, pod

    path = tmp_path / "sched.yaml"
    path.write_text(yaml.safe_dump(config(extender, pki, filterVerb="", prioritizeVerb="", preemptVerb="preempt")))

    def bound(name: str, where: str, cls: str) -> dict:
        p = pod(name, "2")
        p["spec"].update(nodeName=where, priorityClassName=cls)
        return p

    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": n}, "value": v}
               for n, v in (("low", 0), ("mid", 5), ("top", 10))]
    with ServerProcess(str(tmp_path / "api"), "--scheduler-config", str(path)) as api:
        kc = api.kubeconfig
        corral("apply", "-f", manifests(tmp_path, *classes, node("no-cheap"), node("ok-dear")), kubeconfig=kc)
        corral("apply", "-f", manifests(tmp_path, bound("cheap", "no-cheap", "low"), bound("dear", "ok-dear", "mid")),
               kubeconfig=kc)
        hi = pod("hi", "2")
        hi["spec"]["priorityClassName"] = "top"
        planned = json.loads(corral("plan", "-f", manifests(tmp_path, hi), "-o", "json", kubeconfig=kc).stdout)
        assert planned["preempted"] == [{"pod": "default/dear", "node": "ok-dear", "by": "default/hi"}]
        assert planned["pods"][0]["node"] == "ok-dear"
