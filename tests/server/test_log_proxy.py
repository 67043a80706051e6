"""The log proxy reaches an agent only at the endpoint a node registered, validated, and only if
the agent there proves to be that node: no Node object can turn the API server into a fetcher of
other URLs."""

from __future__ import annotations

import asyncio
import ssl

import pytest

from corral.client import ApiError
from corral.pki.kubeconfig import load_cert_pair
from corral.server.agents import agent_endpoint
from corral.testing import running_server
from corral.testing.builders import NodeBuilder, PodBuilder


class Listener:
    """A TCP port that records whatever arrives (TLS optional, with the given certificate)."""

    def __init__(self, cert=None, ca_pem: bytes | None = None) -> None:
        self.received = b""
        self.connections = 0
        self._ssl = None
        if cert is not None:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=ca_pem.decode())
            load_cert_pair(ctx, cert.cert_pem, cert.key_pem)
            self._ssl = ctx

    async def __aenter__(self) -> "Listener":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._ssl)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader, writer) -> None:
        self.connections += 1
        try:
            self.received += await asyncio.wait_for(reader.read(65536), 2)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret")
            await writer.drain()
        except (OSError, asyncio.TimeoutError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def __aexit__(self, *exc) -> None:
        self._server.close()


def node(name: str, address: str, port) -> dict:
    obj = NodeBuilder(name).obj
    obj["status"]["addresses"] = [{"type": "InternalIP", "address": address}]
    obj["status"]["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
    return obj


@pytest.mark.parametrize("address, port, expected", [
    ("10.0.0.7", 10250, ("10.0.0.7", 10250)),
    ("fd00::7", 10250, ("[fd00::7]", 10250)),
    ("Node-7.example", 1, ("node-7.example", 1)),
    ("127.0.0.1:18999/secret#", 10250, None),
    ("evil.example/x?y", 10250, None),
    ("user@host", 10250, None),
    ("10.0.0.7", 0, None),
    ("10.0.0.7", 65536, None),
    ("10.0.0.7", "10250", None),
    ("10.0.0.7", True, None),
])
def test_only_an_ip_or_dns_name_and_a_port_make_an_endpoint(address, port, expected):
    assert agent_endpoint(node("n", address, port)) == expected


async def test_a_forged_endpoint_is_never_fetched(tmp_path):
    async with running_server(str(tmp_path / "d"), scheduler=False, controllers=False) as server:
        async with Listener() as plain, server.client() as admin:
            await admin.create(node("hostile", f"127.0.0.1:{plain.port}/secret#", 10250), raw=True)
            await admin.create(node("plain", "127.0.0.1", plain.port), raw=True)
            await admin.create(PodBuilder("a").node("hostile").obj, raw=True)
            await admin.create(PodBuilder("b").node("plain").obj, raw=True)
            with pytest.raises(ApiError) as err:
                await admin.request("GET", "/api/v1/namespaces/default/pods/a/log")
            assert err.value.code == 503 and "no valid agent endpoint" in err.value.message
            # A valid address where no agent is: the TLS handshake fails before any request is sent.
            with pytest.raises(ApiError) as err:
                await admin.request("GET", "/api/v1/namespaces/default/pods/b/log")
            assert err.value.code == 502
        assert b"GET" not in plain.received and b"secret" not in plain.received


async def test_an_endpoint_that_is_another_nodes_agent_is_not_read(tmp_path):
    async with running_server(str(tmp_path / "d"), scheduler=False, controllers=False) as server:
        other = server.pki.ca.issue_client("system:node:n2", ["system:nodes"], serving_name="n2")
        async with Listener(other, server.pki.ca.cert_pem) as impostor, server.client() as admin:
            await admin.create(node("n1", "127.0.0.1", impostor.port), raw=True)
            await admin.create(PodBuilder("p").node("n1").obj, raw=True)
            with pytest.raises(ApiError) as err:
                await admin.request("GET", "/api/v1/namespaces/default/pods/p/log")
        assert err.value.code == 502 and "n1" in err.value.message and "certificate" in err.value.message
        assert impostor.received == b""  # refused in the handshake: not even the request line was sent


async def test_the_nodes_own_agent_is_read(tmp_path):
    async with running_server(str(tmp_path / "d"), scheduler=False, controllers=False) as server:
        own = server.pki.ca.issue_client("system:node:n1", ["system:nodes"], serving_name="n1")
        async with Listener(own, server.pki.ca.cert_pem) as agent, server.client() as admin:
            await admin.create(node("n1", "127.0.0.1", agent.port), raw=True)
            await admin.create(PodBuilder("p").node("n1").obj, raw=True)
            body = await admin.request("GET", "/api/v1/namespaces/default/pods/p/log", params={"tailLines": 5})
        assert body == b"secret"
        assert agent.received.startswith(b"GET /containerLogs/default/p/main?tailLines=5 HTTP/1.1\r\n")
