"""Probe handlers against real servers on loopback: gRPC's health service (SERVING passes,
NOT_SERVING and an unknown service fail, a dead port fails within its timeout), HTTP status codes
and TCP. The runtime is a stand-in that says where the pod's port is."""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest
from aiohttp import web

from corral.agent.probes import Prober
from corral.agent.runtimes.base import ContainerRef
from corral.testing.process import free_port

REF = ContainerRef("uid", "default/p", "c", "process://1")


class Loopback:
    """Pods share the node's network: a port is 127.0.0.1's."""

    async def port_address(self, ref, pod, port, *, probe=False):
        return "127.0.0.1", port


async def health_server(port: int, statuses: dict[str, int]) -> grpc.aio.Server:
    async def check(request: bytes, context) -> bytes:
        service = request[2:].decode() if request[:1] == b"\x0a" else ""
        if service not in statuses:
            await context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return bytes([0x08, statuses[service]])

    handler = grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": grpc.unary_unary_rpc_method_handler(check, request_deserializer=None, response_serializer=None)})
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server


async def test_a_grpc_probe_asks_the_health_service_and_passes_only_on_serving():
    port = free_port()
    server = await health_server(port, {"": 1, "db": 2})
    prober = Prober(Loopback(), lambda *a: None, lambda: 0.0)
    try:
        async def check(**grpc_action) -> tuple[bool, str]:
            return await prober.check({}, REF, {"ports": []}, {"grpc": {"port": port, **grpc_action}, "timeoutSeconds": 2})

        assert await check() == (True, "")
        ok, message = await check(service="db")
        assert not ok and 'responded with "NOT_SERVING"' in message
        ok, message = await check(service="nope")
        assert not ok and "NOT_FOUND" in message
    finally:
        await server.stop(None)
        await prober.close()
    dead = Prober(Loopback(), lambda *a: None, lambda: 0.0)
    ok, message = await asyncio.wait_for(dead.check({}, REF, {}, {"grpc": {"port": port}, "timeoutSeconds": 1}), 5)
    assert not ok and ("UNAVAILABLE" in message or "DEADLINE_EXCEEDED" in message), message


@pytest.mark.parametrize("status, passes", [(200, True), (302, True), (404, False), (503, False)])
async def test_an_http_probe_passes_on_2xx_and_3xx(status, passes):
    async def healthz(request: web.Request) -> web.Response:
        return web.Response(status=status, text="body")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    prober = Prober(Loopback(), lambda *a: None, lambda: 0.0)
    try:
        ok, message = await prober.check({}, REF, {"ports": [{"name": "http", "containerPort": port}]},
                                         {"httpGet": {"path": "/healthz", "port": "http"}})
        assert ok is passes and (passes or f"statuscode: {status}" in message)
        assert (await prober.check({}, REF, {}, {"tcpSocket": {"port": port}}))[0]
    finally:
        await prober.close()
        await runner.cleanup()
