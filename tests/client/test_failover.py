"""A client given several servers uses the one that answers and moves on when it goes away."""

from __future__ import annotations

import socket

import pytest

from corral.client import Client
from corral.client.config import server_url
from corral.client.rest import ConnectionFailed


def closed_port_url() -> str:
    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return f"https://127.0.0.1:{s.getsockname()[1]}"


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


async def test_requests_and_watches_go_to_the_next_server_when_one_cannot_be_reached(server):
    dead = closed_port_url()
    async with Client(f"{dead},{server.url}", credentials=server.admin) as c:
        created = await c.create(pod("a"))  # a write that never reached the dead server is sent on
        assert created["metadata"]["name"] == "a"
        assert c.base_url == server.url  # and the client stays with the server that answered
        assert (await c.get("pods", "a", "default", raw=True))["metadata"]["uid"] == created["metadata"]["uid"]

    async with Client([dead, server.url], credentials=server.admin) as c:
        async for event in c.watch("pods", "default", raw=True):
            assert event.object["metadata"]["name"] == "a"  # served by the live server
            break


async def test_when_no_server_answers_the_error_names_them_all():
    a, b = closed_port_url(), closed_port_url()
    async with Client(f"{a},{b}") as c:
        with pytest.raises(ConnectionFailed) as failed:
            await c.get("pods", "x", "default")
    assert a in str(failed.value) and b in str(failed.value)


def test_server_addresses_may_be_a_comma_separated_list_and_get_a_scheme():
    assert server_url("10.0.0.1:7443, https://b:7443") == "https://10.0.0.1:7443,https://b:7443"
    with pytest.raises(ValueError):
        server_url(" , ")
