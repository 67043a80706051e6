"""The events controllers write about the objects they act on: whole, as ``kubectl describe`` and
``kubectl get events`` read them, in the object's namespace (a cluster-scoped object's in
``default``), never holding the controller up."""

from __future__ import annotations

import logging
import re

import aiohttp

from corral.api.resources import by_kind
from corral.controllers.events import ObjectEvents
from corral.testing.clock import FakeClock
from corral.testing.server import running_server

EVENTS = by_kind("Event")


async def written(api) -> list[dict]:
    await api.cache.wait_consistent()
    return sorted((r.obj for r in api.cache.items(EVENTS.store_prefix)), key=lambda e: e["reason"])


async def test_an_event_about_an_object_is_written_whole_in_its_namespace(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        events = ObjectEvents(api, "replicaset-controller")
        events.start()
        try:
            rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                  "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web"}}
            node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "uid-n1"}}
            await api.create(by_kind("Namespace"), None, {"metadata": {"name": "shop"}}, events._opts)
            events.record(rs, "Normal", "SuccessfulCreate", "Created pod: web-x1")
            events.record(node, "Warning", "NodeNotReady", "Node n1 status is now: NodeNotReady")
            await events.drain()
        finally:
            await events.stop()
        made, created = await written(api), {}
        for event in made:
            meta = event.pop("metadata")
            assert re.fullmatch(rf"{event['involvedObject']['name']}\.\w+", meta["name"])
            created[event["reason"]] = (meta["namespace"], event)
    stamp = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
    for _, event in created.values():
        assert stamp.fullmatch(event.pop("firstTimestamp")) and stamp.fullmatch(event.pop("lastTimestamp"))
        event.pop("apiVersion", None), event.pop("kind", None)
    assert created == {
        "SuccessfulCreate": ("shop", {
            "involvedObject": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "namespace": "shop",
                               "uid": "uid-web"},
            "reason": "SuccessfulCreate", "message": "Created pod: web-x1", "type": "Normal", "count": 1,
            "source": {"component": "replicaset-controller"}, "reportingComponent": "replicaset-controller"}),
        "NodeNotReady": ("default", {  # a cluster-scoped object's events go to default, as Kubernetes'
            "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-n1"},
            "reason": "NodeNotReady", "message": "Node n1 status is now: NodeNotReady", "type": "Warning",
            "count": 1, "source": {"component": "replicaset-controller"},
            "reportingComponent": "replicaset-controller"}),
    }


async def test_events_past_the_queue_limit_are_dropped_counted_and_logged_and_the_rest_written(tmp_path, caplog):
    """The controller never waits for its events: past ``max_pending`` waiting, an event is dropped,
    counted and logged (once a minute, not once an event), and those queued before are written once
    the writer runs."""
    clock = FakeClock()
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        events = ObjectEvents(api, "replicaset-controller", max_pending=2, clock=clock)
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "default"}}
        with caplog.at_level(logging.WARNING, logger="corral.controllers.events"):
            for i in range(5):
                events.record(rs, "Normal", f"Reason{i}", f"event {i}")
            assert events.dropped == 3
            (warning,) = [r.getMessage() for r in caplog.records if r.name == "corral.controllers.events"]
            assert warning.startswith("replicaset-controller: 2 events wait to be written") and \
                "(1 dropped so far; corral_controller_events_dropped_total counts them)" in warning
            clock.advance(60.0)
            events.record(rs, "Normal", "Reason5", "event 5")
            assert [r.getMessage() for r in caplog.records if r.name == "corral.controllers.events"][1:] == [
                "replicaset-controller: 2 events wait to be written, as many as are kept: new ones are dropped "
                "until some are written (4 dropped so far; corral_controller_events_dropped_total counts them)"]
        events.start()
        try:
            await events.drain()
        finally:
            await events.stop()
        assert [e["reason"] for e in await written(api)] == ["Reason0", "Reason1"]


async def test_the_servers_metrics_show_each_controllers_events_waiting_and_dropped(tmp_path):
    """An operator sees a burst's lost events on /metrics, by controller, counted once however often
    it is scraped, and counted on when a new term's controllers start from nothing."""
    async with running_server(str(tmp_path / "s"), scheduler=False) as server:
        replicasets = next(c for c in server.controllers.controllers if c.name == "replicaset")
        await replicasets.events.stop()  # its writer stopped: what it records waits
        replicasets.events = ObjectEvents(server.api, "replicaset-controller", max_pending=2)
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "default"}}

        async with aiohttp.ClientSession(server.url, headers=server.admin.headers(),
                                         connector=aiohttp.TCPConnector(ssl=server.admin.ssl_context())) as http:
            async def figures(controller: str = "replicaset-controller") -> tuple[str, str]:
                async with http.get("/metrics") as r:
                    assert r.status == 200
                    text = await r.text()
                return tuple(re.search(rf'^corral_controller_events_{what}{{controller="{controller}"}} (\S+)$',
                                       text, re.M).group(1) for what in ("waiting", "dropped_total"))

            assert await figures() == ("0.0", "0.0")
            assert await figures("job-controller") == ("0.0", "0.0")
            for i in range(5):
                replicasets.events.record(rs, "Normal", "SuccessfulCreate", f"Created pod: web-{i}")
            assert await figures() == ("2.0", "3.0")
            assert await figures() == ("2.0", "3.0")  # scraped again: not counted twice
            replicasets.events.record(rs, "Normal", "SuccessfulCreate", "Created pod: web-5")
            assert await figures() == ("2.0", "4.0")
            assert await figures("job-controller") == ("0.0", "0.0")
            # The next term's controllers: a new recorder, counting from 0; the counter counts on.
            replicasets.events = ObjectEvents(server.api, "replicaset-controller", max_pending=1)
            for i in range(3):
                replicasets.events.record(rs, "Normal", "SuccessfulCreate", f"Created pod: web-{i}")
            assert await figures() == ("1.0", "6.0")
            replicasets.events.start()
            await replicasets.events.drain()
            assert await figures() == ("0.0", "6.0")
            await replicasets.events.stop()
