"""The events controllers write about the objects they act on: whole, as ``kubectl describe`` and
``kubectl get events`` read them, in the object's namespace (a cluster-scoped object's in
``default``), never holding the controller up."""

from __future__ import annotations

import logging
import re

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
                "(1 dropped so far)" in warning
            clock.advance(60.0)
            events.record(rs, "Normal", "Reason5", "event 5")
            assert [r.getMessage() for r in caplog.records if r.name == "corral.controllers.events"][1:] == [
                "replicaset-controller: 2 events wait to be written, as many as are kept: new ones are dropped "
                "until some are written (4 dropped so far)"]
        events.start()
        try:
            await events.drain()
        finally:
            await events.stop()
        assert [e["reason"] for e in await written(api)] == ["Reason0", "Reason1"]
