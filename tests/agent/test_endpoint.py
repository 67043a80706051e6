"""An agent in the test's event loop, against an in-process server: its endpoint (TLS with the
node's certificate, on the node's own address, answering only the API server's client certificate)
and its node's life (deleted while the agent runs, it registers again; cut off from the server, it
is Ready again within seconds of the server's return)."""

from __future__ import annotations

import asyncio
import ssl

import aiohttp
import pytest

from corral.agent.agent import Agent, AgentConfig
from corral.agent.runtimes.process import ProcessRuntime
from corral.client import ApiError, Client, NotFound
from corral.pki import AGENT_CLIENT_USER
from corral.pki.kubeconfig import load_cert_pair
from corral.testing import running_server
from corral.testing.builders import PodBuilder


@pytest.fixture
async def agent(tmp_path):
    async with running_server(str(tmp_path / "server"), scheduler=False, controllers=False) as server:
        async with Client(credentials=server.node_credentials("n1")) as client:
            agent = Agent(client, ProcessRuntime(str(tmp_path / "agent")), AgentConfig(
                name="n1", data_dir=str(tmp_path / "agent"), capacity={"cpu": "1", "memory": "1Gi", "pods": "10"},
                address="127.0.0.1", port=0, throughput_interval_seconds=3600, heartbeat_seconds=0.2))
            await agent.start()
            try:
                yield server, agent
            finally:
                await agent.stop()


def context(server, cert=None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=server.pki.ca.cert_pem.decode())
    ctx.check_hostname = False
    if cert is not None:
        load_cert_pair(ctx, cert.cert_pem, cert.key_pem)
    return ctx


async def get(url: str, ctx: ssl.SSLContext) -> int:
    async with aiohttp.ClientSession() as session:
        async with session.get(url, ssl=ctx) as resp:
            return resp.status


async def test_only_the_api_servers_certificate_is_answered(agent):
    server, node = agent
    url = f"https://127.0.0.1:{node.port}/healthz"
    with pytest.raises(aiohttp.ClientError):
        await get(url, context(server))  # no client certificate: no handshake
    with pytest.raises(aiohttp.ClientError):  # plain HTTP: nothing
        async with aiohttp.ClientSession() as session:
            async with session.get(url.replace("https", "http")) as resp:
                await resp.read()
    assert await get(url, context(server, server.pki.ca.issue_client("system:node:n2", ["system:nodes"]))) == 403
    assert await get(url, context(server, server.pki.ca.issue_client("admin", ["system:masters"]))) == 403
    assert await get(url, context(server, server.pki.ca.issue_client(AGENT_CLIENT_USER))) == 200
    logs = f"https://127.0.0.1:{node.port}/containerLogs/default/p/c?tailLines="
    as_server = context(server, server.pki.ca.issue_client(AGENT_CLIENT_USER))
    for bad in ("abc", "-1", "9" * 40, "١٢"):  # the last: Arabic-Indic digits, which str.isdigit accepts
        assert await get(logs + bad, as_server) == 400
    assert await get(logs + "10", as_server) == 404  # well-formed: on to the pod, which is not here
    node.max_log_streams = node.log_streams  # as if every stream it answers at once were open
    assert await get(logs + "10", as_server) == 429


async def test_it_listens_on_the_nodes_address_only(agent):
    _, node = agent
    bound = {s.getsockname()[0] for site in node._runner.sites for s in site._server.sockets}
    assert bound == {"127.0.0.1"}


async def test_a_node_deleted_while_its_agent_runs_registers_again(agent):
    server, _ = agent
    async with server.client() as admin:
        before = await admin.get("nodes", "n1", raw=True)
        await admin.delete("nodes", "n1")
        for _ in range(50):
            await asyncio.sleep(0.1)
            try:
                again = await admin.get("nodes", "n1", raw=True)
                break
            except NotFound:
                continue
        else:
            raise AssertionError("the node did not come back within 5 s")
    assert again["metadata"]["uid"] != before["metadata"]["uid"]
    assert again["status"]["allocatable"] == before["status"]["allocatable"]


async def test_a_log_stream_read_to_its_end_gives_its_seat_back(agent):
    """The endpoint answers at most max_log_streams at once: each answered stream, once read,
    frees its place, or the node would refuse every log request after the 64th."""
    server, node = agent
    pod = PodBuilder("talker").node("n1").obj
    pod["spec"]["containers"][0]["command"] = ["sh", "-c", "echo hello; sleep 30"]
    async with server.client() as admin:
        await admin.create(pod, raw=True)
        for _ in range(100):
            try:
                if b"hello" in await admin.request("GET", "/api/v1/namespaces/default/pods/talker/log"):
                    break
            except ApiError:  # not started yet
                pass
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("no log within 10 s")
        for _ in range(3):
            assert b"hello" in await admin.request("GET", "/api/v1/namespaces/default/pods/talker/log")
    assert node.log_streams == 0


async def test_an_agent_cut_off_from_the_server_is_ready_again_within_seconds_of_its_return(tmp_path, monkeypatch, caplog):
    """Heartbeats 30 s apart; one that fails is tried again after 0.2 s, 0.4 s, ... (at most 7 s),
    so the node is Ready again soon after the server is back, not at the next heartbeat."""
    import logging

    from corral.agent import agent as agent_module
    from corral.client.rest import ConnectionFailed

    cut = {"on": False}
    renew = agent_module.renew_lease

    async def renew_unless_cut(client, node, **kwargs):
        if cut["on"]:
            raise ConnectionFailed("cannot reach the server")
        return await renew(client, node, **kwargs)

    monkeypatch.setattr(agent_module, "renew_lease", renew_unless_cut)
    caplog.set_level(logging.DEBUG, logger="corral.agent.agent")
    async with running_server(str(tmp_path / "server"), scheduler=False, controllers=False) as server:
        async with Client(credentials=server.node_credentials("n1")) as client, server.client() as admin:
            node = Agent(client, ProcessRuntime(str(tmp_path / "agent")), AgentConfig(
                name="n1", data_dir=str(tmp_path / "agent"), capacity={"cpu": "1", "memory": "1Gi", "pods": "10"},
                address="127.0.0.1", port=0, throughput_interval_seconds=3600, heartbeat_seconds=30))
            cut["on"] = True  # the heartbeat loop's first beat fails
            await node.start()
            try:
                def failures() -> list[logging.LogRecord]:
                    return [r for r in caplog.records if "heartbeat failed" in r.getMessage()]

                for _ in range(50):  # attempts at 0, 0.2 and 0.6 s: not 30 s apart
                    if len(failures()) >= 3:
                        break
                    await asyncio.sleep(0.1)
                first, second, third = [r.created for r in failures()[:3]]
                assert second - first >= 0.19 and third - second >= 0.39  # twice as long each time
                assert [r.levelname for r in failures()[:2]] == ["WARNING", "DEBUG"]  # one warning an outage
                await admin.patch("nodes", "n1", {"status": {"conditions": [  # as the node controller marks it
                    {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                     "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
                    subresource="status", raw=True)
                cut["on"] = False  # the next attempt, at most 0.8 s away, succeeds
                for _ in range(30):
                    ready = next(c for c in (await admin.get("nodes", "n1", raw=True))["status"]["conditions"]
                                 if c["type"] == "Ready")
                    if ready["status"] == "True":
                        break
                    await asyncio.sleep(0.1)
                assert ready["status"] == "True"
                assert any("heartbeat renewed after" in r.getMessage() for r in caplog.records)
            finally:
                await node.stop()
