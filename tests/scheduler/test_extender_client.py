"""One extender's calls on the wire, against a recording HTTP server in the test: what each verb
sends (kube-scheduler's ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs, in both the
node-cache-capable and the whole-object forms), how each answer is read (and what in it is
ignored), and each way an answer fails, named after the extender."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from corral.scheduler.extenders import client as client_module
from corral.scheduler.extenders.client import ExtenderClient, ExtenderError, Proposal
from corral.scheduler.extenders.config import ExtenderConfig

POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": {"containers": []}}
NODES = [("a", {"metadata": {"name": "a"}}), ("b", {"metadata": {"name": "b"}})]


class Recorder:
    """A plain-HTTP extender: each request's path and body kept; each answer as the test sets it."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []
        self.content_types: list[str | None] = []
        self.answer: object = {}
        self.status = 200
        self.raw: bytes | None = None
        self.delay = 0.0

    async def handle(self, request: web.Request) -> web.Response:
        self.content_types.append(request.headers.get("Content-Type"))
        self.seen.append((request.path, await request.json()))
        if self.delay:
            await asyncio.sleep(self.delay)
        body = self.raw if self.raw is not None else json.dumps(self.answer).encode()
        return web.Response(status=self.status, body=body, content_type="application/json")


@pytest.fixture
async def ext():
    rec = Recorder()
    app = web.Application()
    app.router.add_post("/sched/{verb}", rec.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    rec.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/sched"
    yield rec
    await runner.cleanup()


def client_for(rec: Recorder, **settings) -> ExtenderClient:
    config = ExtenderConfig(url_prefix=rec.url, filter_verb="filter", prioritize_verb="prioritize",
                            bind_verb="bind", preempt_verb="preempt", timeout=2.0, name="ext-1", **settings)
    return ExtenderClient(config)


async def failure(call) -> str:
    with pytest.raises(ExtenderError) as err:
        await call
    return str(err.value)


@pytest.mark.parametrize("capable, sent", [
    pytest.param(True, {"pod": POD, "nodenames": ["a", "b"]}, id="node-cache-capable: names only"),
    pytest.param(False, {"pod": POD, "nodes": {"apiVersion": "v1", "kind": "NodeList",
                                               "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}},
                 id="otherwise: a NodeList of the whole objects"),
])
async def test_filter_and_prioritize_send_extender_args(ext, capable, sent):
    c = client_for(ext, node_cache_capable=capable)
    ext.answer = {"nodenames": ["a"]}
    await c.filter(POD, NODES)
    ext.answer = []
    await c.prioritize(POD, NODES)
    assert ext.seen == [("/sched/filter", sent), ("/sched/prioritize", sent)]
    await c.close()


async def test_a_filter_answer_is_read_for_the_asked_nodes_only(ext):
    c = client_for(ext, node_cache_capable=True)
    ext.answer = {"nodenames": ["a", 7, None], "failedNodes": {"b": "too hot", "zz": "not asked"},
                  "failedAndUnresolvableNodes": {"b": 3, "yy": "not asked"}, "error": ""}
    got = await c.filter(POD, NODES)
    assert (got.passed, got.failed, got.unresolvable) == ({"a"}, {"b": "too hot"}, {"b": "3"})
    ext.answer = {"nodes": {"items": [{"metadata": {"name": "b"}}]}, "failedNodes": ["not", "a", "map"]}
    got = await c.filter(POD, NODES)  # the whole-object form of the answer; reasons that are no map: none
    assert (got.passed, got.failed, got.unresolvable) == ({"b"}, {}, {})
    ext.answer = {"failedNodes": {"a": "no", "b": "no"}}
    assert (await c.filter(POD, NODES)).passed == set()  # neither list: nothing passed
    await c.close()


@pytest.mark.parametrize("answer, message", [
    pytest.param(["a"], "filter: answer is not an ExtenderFilterResult", id="a list"),
    pytest.param({"nodenames": ["a"], "error": "out of licences"}, "filter: out of licences", id="its error"),
])
async def test_a_filter_answer_that_fails_names_the_extender(ext, answer, message):
    c = client_for(ext)
    ext.answer = answer
    text = await failure(c.filter(POD, NODES))
    assert text == f"extender ext-1 failed: {message}"
    with pytest.raises(ExtenderError) as err:
        await c.filter(POD, NODES)
    assert err.value.extender is c.config
    await c.close()


async def test_prioritize_scores_are_kept_in_kube_schedulers_range_and_malformed_entries_skipped(ext):
    c = client_for(ext)
    ext.answer = [{"host": "a", "score": 7}, {"host": "b", "score": 42}, {"host": "c", "score": -3},
                  {"host": "d", "score": "9"}, {"host": 5, "score": 1}, "junk", {"host": "e", "score": 10},
                  {"host": "f", "score": 0}]
    assert await c.prioritize(POD, NODES) == {"a": 7, "b": 10, "c": 0, "e": 10, "f": 0}
    ext.answer = {"host": "a", "score": 1}
    assert await failure(c.prioritize(POD, NODES)) == "extender ext-1 failed: prioritize: answer is not a HostPriorityList"
    await c.close()


async def test_bind_sends_extender_binding_args_and_reads_its_error(ext):
    c = client_for(ext)
    ext.answer = {}
    await c.bind("default", "p", "u1", "a")
    assert ext.seen == [("/sched/bind", {"podName": "p", "podNamespace": "default", "podUID": "u1", "node": "a"})]
    ext.answer = ["not", "a", "result"]
    await c.bind("default", "p", "u1", "a")  # no error in it: bound
    ext.answer = {"error": "node is full"}
    assert await failure(c.bind("default", "p", "u1", "a")) == "extender ext-1 failed: bind: node is full"
    await c.close()


PROPOSALS = {"a": Proposal(("u-x", "u-y"), 1, ({"metadata": {"uid": "u-x"}}, {"metadata": {"uid": "u-y"}})),
             "b": Proposal(("u-z",), 0, ({"metadata": {"uid": "u-z"}},))}


@pytest.mark.parametrize("capable, sent", [
    pytest.param(True, {"pod": POD, "nodeNameToMetaVictims": {
        "a": {"pods": [{"uid": "u-x"}, {"uid": "u-y"}], "numPDBViolations": 1},
        "b": {"pods": [{"uid": "u-z"}], "numPDBViolations": 0}}}, id="node-cache-capable: uids"),
    pytest.param(False, {"pod": POD, "nodeNameToVictims": {
        "a": {"pods": [{"metadata": {"uid": "u-x"}}, {"metadata": {"uid": "u-y"}}], "numPDBViolations": 1},
        "b": {"pods": [{"metadata": {"uid": "u-z"}}], "numPDBViolations": 0}}}, id="otherwise: whole pods"),
])
async def test_preemption_sends_each_candidate_with_its_victims(ext, capable, sent):
    c = client_for(ext, node_cache_capable=capable)
    ext.answer = {"nodeNameToMetaVictims": {}}
    assert await c.process_preemption(POD, PROPOSALS) == {}
    assert ext.seen == [("/sched/preempt", sent)]
    await c.close()


async def test_a_preemption_answer_keeps_proposed_nodes_only_in_either_case_of_keys(ext):
    c = client_for(ext, node_cache_capable=True)
    ext.answer = {"nodeNameToMetaVictims": {"zz": {"pods": [{"uid": "u-q"}]},  # not proposed: skipped
                                            "a": {"pods": [{"uid": "u-x"}, "junk"], "numPDBViolations": 2},
                                            "b": {"pods": 7, "numPDBViolations": True}}}
    assert await c.process_preemption(POD, PROPOSALS) == {"a": Proposal(("u-x",), 2), "b": Proposal((), 0)}
    ext.answer = {"NodeNameToMetaVictims": {"b": {"Pods": [{"UID": "u-z"}], "NumPDBViolations": 1}}}
    assert await c.process_preemption(POD, PROPOSALS) == {"b": Proposal(("u-z",), 1)}
    ext.answer = {}
    assert await c.process_preemption(POD, PROPOSALS) == {}  # no map at all: it keeps nothing
    await c.close()


@pytest.mark.parametrize("answer, message", [
    pytest.param([], "preempt: answer is not an ExtenderPreemptionResult", id="a list"),
    pytest.param({"nodeNameToMetaVictims": ["a"]}, "preempt: answer is not an ExtenderPreemptionResult",
                 id="its nodes not a map"),
    pytest.param({"nodeNameToMetaVictims": {}, "Error": "busy"}, "preempt: busy", id="its error, in Go's case"),
])
async def test_a_preemption_answer_that_fails_names_the_extender(ext, answer, message):
    c = client_for(ext, node_cache_capable=True)
    ext.answer = answer
    assert await failure(c.process_preemption(POD, PROPOSALS)) == f"extender ext-1 failed: {message}"
    await c.close()


async def test_transport_failures_name_the_extender_the_verb_and_what_went_wrong(ext, monkeypatch):
    c = client_for(ext)
    ext.status, ext.raw = 500, b"x" * 300
    assert await failure(c.filter(POD, NODES)) == f"extender ext-1 failed: filter: HTTP 500: {'x' * 200}"
    ext.status, ext.raw = 502, b"bad gateway \xff"  # not UTF-8: shown with a replacement character
    assert await failure(c.filter(POD, NODES)) == "extender ext-1 failed: filter: HTTP 502: bad gateway \ufffd"
    ext.status, ext.raw = 200, b"{not json"
    assert (await failure(c.prioritize(POD, NODES))).startswith("extender ext-1 failed: prioritize: answer is not JSON: ")
    monkeypatch.setattr(client_module, "_MAX_ANSWER", 16)
    ext.raw = json.dumps({"nodenames": ["a", "b", "c", "d"]}).encode()
    assert await failure(c.filter(POD, NODES)) == "extender ext-1 failed: filter: answer larger than 16 bytes"
    ext.raw = json.dumps({"nodenames": ["a"]}).encode()[:16]  # exactly the limit is read whole
    assert (await failure(c.filter(POD, NODES))).startswith("extender ext-1 failed: filter: answer is not JSON")
    await c.close()
    slow = ExtenderClient(ExtenderConfig(url_prefix=ext.url, filter_verb="filter", timeout=0.2, name="ext-1"))
    ext.raw, ext.delay = None, 1.0
    assert await failure(slow.filter(POD, NODES)) == "extender ext-1 failed: filter: no answer within 0.2s"
    await slow.close()
    gone = ExtenderClient(ExtenderConfig(url_prefix="http://127.0.0.1:9/sched", filter_verb="filter", name="ext-1"))
    assert (await failure(gone.filter(POD, NODES))).startswith("extender ext-1 failed: filter: Cannot connect")
    await gone.close()


# --- over TLS ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pki():
    from corral.pki.ca import CertificateAuthority

    ca = CertificateAuthority.generate("extender-test-ca")
    return ca, ca.issue_serving("extender", ["extender.example"]), ca.issue_client("system:kube-scheduler")


@pytest.fixture
async def tls_ext(pki):
    """An HTTPS extender whose certificate names only extender.example, reached at 127.0.0.1; it asks
    for a client certificate of the same CA and answers only callers that present one."""
    import ssl

    ca, serving, _ = pki
    rec = Recorder()
    rec.answer = {"nodenames": ["a"]}
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=ca.cert_pem.decode())
    from corral.pki.kubeconfig import load_cert_pair

    load_cert_pair(ctx, serving.cert_pem, serving.key_pem)
    ctx.verify_mode = ssl.CERT_OPTIONAL

    async def handle(request: web.Request) -> web.Response:
        if not request.transport.get_extra_info("peercert"):
            return web.Response(status=403, text="a client certificate is required")
        return await rec.handle(request)

    app = web.Application()
    app.router.add_post("/sched/{verb}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    rec.url = f"https://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/sched"
    yield rec
    await runner.cleanup()


def tls_client(rec: Recorder, pki, **tls) -> ExtenderClient:
    from corral.scheduler.extenders.config import TLSConfig

    _, _, client = pki
    return client_for(rec, node_cache_capable=True, tls=TLSConfig(**{"cert": client.cert_pem, "key": client.key_pem,
                                                                     **tls}))


async def test_an_https_extender_is_verified_against_its_ca_under_its_server_name(tls_ext, pki):
    ca = pki[0].cert_pem
    c = tls_client(tls_ext, pki, ca=ca, server_name="extender.example")
    try:
        assert (await c.filter(POD, NODES)).passed == {"a"}
        assert tls_ext.content_types == ["application/json"]
    finally:
        await c.close()
    for settings, why in (({"ca": ca}, "127.0.0.1"),  # the certificate does not name the address
                          ({"server_name": "extender.example"}, "certificate verify failed"),  # not its CA
                          ({"ca": ca, "server_name": "other.example"}, "other.example")):
        c = tls_client(tls_ext, pki, **settings)
        try:
            message = await failure(c.filter(POD, NODES))
        finally:
            await c.close()
        assert message.startswith("extender ext-1 failed: filter: ") and why in message
    assert len(tls_ext.seen) == 1  # none of them reached it


async def test_an_insecure_extender_is_not_verified_and_a_missing_client_certificate_is_refused(tls_ext, pki):
    c = tls_client(tls_ext, pki, insecure=True)  # no CA, no server name: anything it presents is taken
    try:
        assert (await c.filter(POD, NODES)).passed == {"a"}
    finally:
        await c.close()
    c = tls_client(tls_ext, pki, insecure=True, cert=b"", key=b"")
    try:
        assert "HTTP 403" in await failure(c.filter(POD, NODES))
    finally:
        await c.close()
