"""Requests in flight: past the limit a user's request waits its turn in its user's queue (round
robin between users), and past the queue it is a 429 with Retry-After, at once; the cluster's own
components (nodes here) have a lane of their own that the flood does not fill; the corral client
waits as asked and gets through."""

from __future__ import annotations

import asyncio
import collections
import json
import os

import aiohttp
import pytest

from corral.client import Client
from corral.pki.kubeconfig import Credentials
from corral.pki.tokens import new_token, token_object
from corral.testing import running_server

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
async def busy_server(tmp_path):
    """One write in flight at a time; a user ``vera`` who may edit the default namespace."""
    async with running_server(str(tmp_path / "server"), scheduler=False, max_mutating_requests_inflight=1) as server:
        token = new_token()
        async with server.client() as admin:
            await admin.create(token_object(token, user="vera"), raw=True)
            await admin.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                "metadata": {"name": "vera-edit", "namespace": "default"},
                                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                            "name": "edit"},
                                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "vera"}]},
                               raw=True)
        yield server, Credentials(server.url, server.pki.ca.cert_pem, token=str(token))


async def test_a_flood_past_the_users_queue_gets_429_with_retry_after_while_a_nodes_writes_go_through(busy_server):
    server, vera = busy_server
    server.inflight.queue_per_user = 20
    answers: list[tuple[int, str | None, dict]] = []

    async def create(session: aiohttp.ClientSession, i: int) -> None:
        async with session.post("/api/v1/namespaces/default/pods", json=pod(f"flood-{i}")) as r:
            answers.append((r.status, r.headers.get("Retry-After"), await r.json()))

    async with aiohttp.ClientSession(server.url, headers=vera.headers(),
                                     connector=aiohttp.TCPConnector(ssl=vera.ssl_context(), limit=60)) as session:
        async with Client(credentials=server.node_credentials("n1")) as node:
            node_writes = [node.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                        "metadata": {"name": "n1", "namespace": "kube-node-lease"},
                                        "spec": {"holderIdentity": "n1"}}, raw=True)]
            await asyncio.gather(*(create(session, i) for i in range(60)), *node_writes)
    refused = [(retry, status) for code, retry, status in answers if code == 429]
    assert refused, "60 concurrent writes against a limit of one: some must be refused"
    assert {retry for retry, _ in refused} == {"1"}
    assert {(s["reason"], s["details"]["retryAfterSeconds"]) for _, s in refused} == {("TooManyRequests", 1)}
    created = sum(1 for code, _, _ in answers if code == 201)
    assert created + len(refused) == 60 and server.inflight.refused >= len(refused)
    assert created >= 21 and server.inflight.queued >= 20  # the one in flight and the twenty that waited
    async with server.client() as admin:  # the node's lease, written in its own lane during the flood
        assert (await admin.get("leases", "n1", "kube-node-lease", raw=True))["spec"]["holderIdentity"] == "n1"
        assert len((await admin.list("pods", "default", raw=True)).items) == created


async def test_the_corral_client_waits_as_asked_and_every_write_gets_through(busy_server):
    server, vera = busy_server
    server.inflight.queue_per_user = 2  # most are refused at first
    async with Client(credentials=vera) as client:
        await asyncio.gather(*(client.create(pod(f"patient-{i}"), raw=True) for i in range(30)))
    assert server.inflight.refused > 0  # some were refused on the way, and sent again
    async with server.client() as admin:
        assert len((await admin.list("pods", "default", raw=True)).items) == 30


async def test_health_and_watches_are_not_counted(busy_server):
    server, vera = busy_server
    server.inflight.limits = {False: 0, True: 0}  # nothing at all may be in flight
    server.inflight.queue_wait = 0.2  # and what is counted waits that long for its 429
    async with aiohttp.ClientSession(server.url, connector=aiohttp.TCPConnector(ssl=vera.ssl_context())) as session:
        async with session.get("/readyz") as r:
            assert r.status == 200
        for word in ("true", "t", "yes"):  # however it is spelled, a watch is counted per user, not here
            async with session.get(f"/api/v1/namespaces/default/pods?watch={word}&timeoutSeconds=1",
                                   headers=vera.headers()) as r:
                assert r.status == 200
        # A node's throughput test (a stream, bounded on its own): past the limit, on to authorisation.
        for method, url in (("GET", "/corral/v1/throughput?bytes=16"), ("POST", "/corral/v1/throughput")):
            async with session.request(method, url, data=b"x" * 16, headers=vera.headers()) as r:
                assert r.status == 403  # a node's, not vera's: refused by RBAC, not counted
        async with session.get("/api/v1/namespaces/default/pods", headers=vera.headers()) as r:
            assert r.status == 429


async def test_a_full_user_lane_leaves_the_clusters_own_lane_free(busy_server):
    server, vera = busy_server
    server.inflight.counts[(False, True)] = 1  # as if one user write were in flight: the users' lane is full
    server.inflight.queue_wait = 0.2  # a user's write waits that long for its 429
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "n2", "namespace": "kube-node-lease"}, "spec": {"holderIdentity": "n2"}}
    async with aiohttp.ClientSession(server.url, headers=vera.headers(),
                                     connector=aiohttp.TCPConnector(ssl=vera.ssl_context())) as session:
        async with session.post("/api/v1/namespaces/default/pods", json=pod("waits")) as r:
            assert r.status == 429
    async with Client(credentials=server.node_credentials("n2")) as node:  # system:nodes: its own lane
        assert (await node.create(lease, raw=True))["metadata"]["name"] == "n2"
    async with server.client() as admin:  # system:masters too
        await admin.create(pod("admin-write"), raw=True)


async def test_watches_are_capped_per_user_and_a_watch_whose_client_left_is_let_go(busy_server, monkeypatch):
    from corral.server.http import routes

    monkeypatch.setattr(routes, "BOOKMARK_INTERVAL", 0.2)  # a watch wakes that often to see its client left
    server, vera = busy_server
    server.inflight.watches_per_user = 2
    cache = server.api.cache
    before = cache.watcher_count()
    url = "/api/v1/namespaces/default/pods?watch=true"
    session = aiohttp.ClientSession(server.url, headers=vera.headers(),
                                    connector=aiohttp.TCPConnector(ssl=vera.ssl_context()))
    first, second = await session.get(url), await session.get(url)
    assert (first.status, second.status) == (200, 200)
    async with session.get(url) as third:
        assert third.status == 429 and 'too many watches open for user "vera"' in (await third.json())["message"]
    async with Client(credentials=server.node_credentials("n3")) as node:  # another user: counted apart
        async for _ in node.watch("pods", None, field_selector="spec.nodeName=n3", timeout_seconds=1, raw=True):
            pass
    assert cache.watcher_count() == before + 2
    await session.close()  # the client goes away without a word
    for _ in range(150):  # within a few of the server's wake-ups
        if cache.watcher_count() == before and not server.inflight.watches:
            break
        await asyncio.sleep(0.1)
    assert cache.watcher_count() == before and server.inflight.watches == {}


async def two_users(server) -> dict[str, Credentials]:
    """Tokens for ``vera`` and ``walt``, who may each edit the default namespace."""
    creds = {}
    async with server.client() as admin:
        for name in ("vera", "walt"):
            token = new_token()
            await admin.create(token_object(token, user=name), raw=True)
            await admin.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                "metadata": {"name": f"{name}-edit", "namespace": "default"},
                                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                            "name": "edit"},
                                "subjects": [{"kind": "User", "name": name}]}, raw=True)
            creds[name] = Credentials(server.url, server.pki.ca.cert_pem, token=str(token))
    return creds


def session(creds: Credentials, limit: int = 100) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(creds.server, headers=creds.headers(),
                                 connector=aiohttp.TCPConnector(ssl=creds.ssl_context(), limit=limit))


async def test_a_user_at_half_the_lane_waits_while_another_users_write_goes_through_at_once(tmp_path):
    async with running_server(str(tmp_path / "server"), scheduler=False, max_mutating_requests_inflight=4) as server:
        creds = await two_users(server)
        # As if vera had two writes in flight: half of the four seats, all a user may hold.
        limits = server.inflight
        limits.counts[(False, True)] = 2
        limits.per_user[(True, "vera")] = 2
        async with session(creds["vera"]) as vera, session(creds["walt"]) as walt:
            waiting = asyncio.ensure_future(vera.post("/api/v1/namespaces/default/pods", json=pod("vera-pod")))
            while not limits.queues[True]:
                await asyncio.sleep(0.01)
            async with walt.post("/api/v1/namespaces/default/pods", json=pod("walt-pod")) as r:
                assert r.status == 201, await r.text()  # a seat at once, though vera waits
            assert not waiting.done() and limits.per_user == {(True, "vera"): 2}  # walt's seat given back
            for _ in range(2):  # vera's two writes finish: her waiting one gets a seat
                limits.leave(((False, True), (True, "vera")))
            async with await waiting as r:
                assert r.status == 201, await r.text()
        assert limits.per_user == {} and limits.counts[(False, True)] == 0 and not limits.queues[True]


async def test_seats_go_to_the_waiting_users_in_turn_so_a_few_requests_are_not_stuck_behind_a_flood(tmp_path):
    """vera has thirty writes waiting when walt sends three: walt's are served between vera's, not
    after them (first come, first served would put them behind all thirty)."""
    async with running_server(str(tmp_path / "server"), scheduler=False, max_mutating_requests_inflight=2) as server:
        creds = await two_users(server)
        done: list[str] = []

        async def create(http: aiohttp.ClientSession, who: str, i: int) -> None:
            async with http.post("/api/v1/namespaces/default/pods", json=pod(f"{who}-{i}")) as r:
                assert r.status == 201, await r.text()
            done.append(who)

        async with session(creds["vera"]) as vera, session(creds["walt"]) as walt:
            async def warm() -> None:  # walt's connections open (TLS handshakes) before the flood, not during it
                async with walt.get("/api/v1/namespaces/default/pods") as r:
                    assert r.status == 200

            await asyncio.gather(*(warm() for _ in range(3)))
            flood = [asyncio.ensure_future(create(vera, "vera", i)) for i in range(30)]
            while len(server.inflight.queues[True].get("vera", ())) < 20:  # most of vera's are waiting
                await asyncio.sleep(0.005)
            before = len(done)
            await asyncio.gather(*(create(walt, "walt", i) for i in range(3)))
            served_meanwhile = done[before:].count("vera")
            await asyncio.gather(*flood)
        assert done.count("walt") == 3 and done.count("vera") == 30
        assert served_meanwhile <= 6, done  # about one of vera's per one of walt's
        assert server.inflight.queued >= 20


async def test_a_request_that_waits_too_long_is_a_429_and_leaves_nothing_behind(busy_server):
    server, vera = busy_server
    limits = server.inflight
    limits.queue_wait = 0.3
    limits.counts[(False, True)] = 1  # the users' only write seat is taken, and stays so
    async with session(vera) as http:
        async with http.post("/api/v1/namespaces/default/pods", json=pod("late")) as r:
            status = await r.json()
            assert r.status == 429 and r.headers["Retry-After"] == "1", status
    assert status["message"] == 'user "vera" waited 0.3 s for the server and was not served; try again later'
    assert not limits.queues[True] and limits.per_user == {} and limits.counts[(False, True)] == 1
    limits.counts[(False, True)] = 0
    async with Client(credentials=vera) as client:
        assert (await client.list("pods", "default", raw=True)).items == []  # the late one was not written


async def test_through_a_flood_of_user_writes_twenty_hollow_nodes_heartbeat_and_stay_ready(tmp_path):
    """The issue's check: a flood fills the users' lane (requests wait in their users' queues) while
    every node's heartbeat goes through (none of the nodes' requests is refused or waits) and no
    node goes NotReady. Client, nodes and server share one event
    loop here, so the grace period (10 s) leaves room for the loop itself being busy."""
    from corral.sim.hollow import HollowConfig, HollowNodes

    async with running_server(str(tmp_path / "server"), scheduler=False, max_mutating_requests_inflight=2,
                              max_requests_inflight=2, node_grace_seconds=10.0) as server:
        users = []
        async with server.client() as admin:
            # Ten users flood (one user alone holds at most half the users' lane, so it takes many
            # to fill it), all in the group "flooders", which may edit the default namespace.
            for i in range(10):
                token = new_token()
                await admin.create(token_object(token, user=f"flooder-{i}", groups=["flooders"]), raw=True)
                users.append(Credentials(server.url, server.pki.ca.cert_pem, token=str(token)))
            await admin.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                                "metadata": {"name": "flooders-edit", "namespace": "default"},
                                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                            "name": "edit"},
                                "subjects": [{"kind": "Group", "name": "flooders"}]}, raw=True)
            # At most two node requests at a time: within their lane's two seats, so any 429 a node
            # meets would be the flood's doing.
            hollow = HollowNodes(admin, HollowConfig(count=20, lease_interval=1.0, status_interval=2.0, concurrency=2))
            await hollow.start()
            try:
                codes: collections.Counter[int] = collections.Counter()
                not_ready: set[str] = set()

                async def flood(worker: int) -> None:
                    user = users[worker % len(users)]
                    async with aiohttp.ClientSession(server.url, headers=user.headers(), connector=aiohttp.TCPConnector(
                            ssl=user.ssl_context())) as session:
                        for i in range(40):
                            async with session.post("/api/v1/namespaces/default/pods",
                                                    json=pod(f"f-{worker}-{i}")) as r:
                                codes[r.status] += 1
                            async with session.get("/api/v1/namespaces/default/pods") as r:
                                codes[r.status] += 1

                async def watch_nodes() -> None:
                    while True:
                        for node in (await admin.list("nodes", raw=True)).items:
                            ready = next((c for c in node["status"].get("conditions", []) if c["type"] == "Ready"), {})
                            if ready.get("status") != "True":
                                not_ready.add(node["metadata"]["name"])
                        await asyncio.sleep(0.25)

                observer = asyncio.create_task(watch_nodes())
                started = asyncio.get_running_loop().time()
                await asyncio.gather(*(flood(w) for w in range(30)))
                while asyncio.get_running_loop().time() - started < 5:  # past the grace period, at least
                    await asyncio.sleep(0.5)
                observer.cancel()
                assert server.inflight.queued > 100 and codes[201] > 0, (server.inflight.queued, codes)
                assert set(codes) <= {200, 201, 429}, codes
                assert not_ready == set(), f"nodes NotReady during the flood: {sorted(not_ready)}"
                server.audit.flush()
                with open(os.path.join(server.data_dir, "audit.log"), encoding="utf-8") as f:
                    audited = [json.loads(line) for line in f]
                node_refusals = [a for a in audited if a["user"].startswith("system:node:") and a["code"] == 429]
                node_writes = [a for a in audited if a["user"].startswith("system:node:") and a["resource"] == "leases"]
                assert node_refusals == [] and len(node_writes) >= 20 * 3, (len(node_refusals), len(node_writes))
                assert len((await admin.list("nodes", raw=True)).items) == 20
            finally:
                await hollow.stop()
