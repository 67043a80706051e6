"""Scheduler extenders: a real extender process over TLS (client certificate required) filters and
scores; an extender that is down stops scheduling unless it is ignorable; bad configuration is
refused by the setting's path."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys

import pytest
from prometheus_client import generate_latest

from corral.pki.ca import CertificateAuthority
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
    assert h.writer.conditions["default/huge"]["message"].startswith(
        "0/4 nodes are available: 1 node(s) are never allowed by the test extender, "
        "1 node(s) not allowed by the test extender, 2 Insufficient cpu.")


async def test_an_extender_that_is_down_stops_scheduling_and_is_named(pki):
    h = Harness(config("https://127.0.0.1:9/scheduler", pki))
    nodes(h)
    h.add_pod(make_pod("web").requests(cpu="500m"))
    await _rounds(h, 3)
    assert h.placements() == {}
    (event,) = {m for k, r, m in h.writer.events if k == "default/web" and r == "FailedScheduling"}
    assert event.startswith("extender https://127.0.0.1:9/scheduler failed: filter: ")
    assert h.writer.conditions["default/web"]["reason"] == "SchedulerError"
    metrics = generate_latest(h.scheduler.metrics.registry).decode()
    assert 'corral_scheduler_extender_errors_total{extender="https://127.0.0.1:9/scheduler",ignorable="false"}' in metrics


async def test_an_ignorable_extender_that_is_down_is_skipped_and_counted(pki):
    h = Harness(config("https://127.0.0.1:9/scheduler", pki, ignorable=True))
    nodes(h)
    h.add_pod(make_pod("web").requests(cpu="500m"))
    await h.run()
    assert h.placements() == {"default/web": "refused"}  # the built-in scores alone: the emptiest node
    metrics = generate_latest(h.scheduler.metrics.registry).decode()
    assert 'corral_scheduler_extender_errors_total{extender="https://127.0.0.1:9/scheduler",ignorable="true"} 2.0' in metrics


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
    client = h.scheduler.extenders.clients[0]
    async with client._http().get(f"{extender}/binds") as resp:
        binds = await resp.json()
    assert [(b["podNamespace"], b["podName"], b["node"]) for b in binds] == [("default", "gpu", "high-score")]
    await h.scheduler.extenders.close()


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
    pytest.param({"urlPrefix": "http://x", "preemptVerb": "preempt"}, "extenders[0].preemptVerb: extenders that take part in "
                 "preemption are not supported yet", id="preemptVerb is refused plainly, not ignored"),
])
def test_bad_extender_settings_are_refused_by_path(entry, message):
    with pytest.raises(ConfigError, match="^" + re.escape(f"sched.yaml: {message}")):
        parse_config({"extenders": [entry]}, "sched.yaml")


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
