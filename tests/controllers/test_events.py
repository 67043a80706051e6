"""The events controllers write about the objects they act on: whole, as ``kubectl describe`` and
``kubectl get events`` read them, in the object's namespace (a cluster-scoped object's in
``default``), never holding the controller up."""

from __future__ import annotations

import logging
import re

import aiohttp

from corral.api.resources import by_kind
from corral.controllers.events import REMEMBERED, EventCorrelator, ObjectEvents
from corral.testing.clock import FakeClock
from corral.testing.server import running_server
from corral.testing.waiting import until

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


# --- correlation: what a controller acting on one object many times writes ---------------------------


def event_about(name: str = "web", message: str = "Created pod: web-1", *, reason: str = "SuccessfulCreate",
                stamp: str = "2026-12-06T00:00:00Z") -> dict:
    return {"involvedObject": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "namespace": "default",
                               "uid": f"uid-{name}"},
            "reason": reason, "message": message, "type": "Normal", "count": 1, "firstTimestamp": stamp,
            "lastTimestamp": stamp, "source": {"component": "replicaset-controller"}}


def test_the_same_event_again_counts_on_the_first_since_its_first_time():
    correlator = EventCorrelator(FakeClock())
    first = correlator.correlate(event_about())
    again = [event_about(stamp=f"2026-12-06T00:00:0{i}Z") for i in (1, 2)]
    assert [correlator.correlate(e) for e in again] == [first, first]
    assert [(e["count"], e["firstTimestamp"], e["lastTimestamp"]) for e in again] == [
        (2, "2026-12-06T00:00:00Z", "2026-12-06T00:00:01Z"), (3, "2026-12-06T00:00:00Z", "2026-12-06T00:00:02Z")]
    other = event_about(message="Created pod: web-2")
    assert correlator.correlate(other) is not first and other["count"] == 1


def test_past_nine_messages_of_one_reason_about_one_object_the_rest_are_combined_in_one_event():
    correlator = EventCorrelator(FakeClock())
    made = [event_about(message=f"Created pod: web-{i}") for i in range(15)]
    series = [correlator.correlate(e) for e in made]
    assert len({id(s) for s in series[:9]}) == 9 and all(e["count"] == 1 for e in made[:9])
    assert all(s is series[9] for s in series[9:]) and series[9] not in series[:9]
    assert [(e["message"], e["count"]) for e in made[9:11]] == [
        ("(combined from similar events): Created pod: web-9", 1),
        ("(combined from similar events): Created pod: web-10", 2)]
    assert made[-1]["count"] == 6
    # Another reason, or another object, is not combined with them.
    deleted, elsewhere = event_about(reason="SuccessfulDelete", message="Deleted pod: web-0"), event_about("api")
    correlator.correlate(deleted), correlator.correlate(elsewhere)
    assert (deleted["message"], deleted["count"]) == ("Deleted pod: web-0", 1)
    assert (elsewhere["message"], elsewhere["count"]) == ("Created pod: web-1", 1)


def test_messages_start_apart_again_after_ten_quiet_minutes():
    clock = FakeClock()
    correlator = EventCorrelator(clock)
    for i in range(10):
        correlator.correlate(event_about(message=f"Created pod: web-{i}"))
    clock.advance(600.5)
    later = event_about(message="Created pod: web-10")
    correlator.correlate(later)
    assert (later["message"], later["count"]) == ("Created pod: web-10", 1)


def test_a_source_writes_25_events_about_one_object_at_once_then_one_every_five_minutes_with_the_count():
    clock = FakeClock()
    correlator = EventCorrelator(clock)
    made = [event_about(message=f"Created pod: web-{i}") for i in range(40)]
    written = [correlator.correlate(e) is not None for e in made]
    assert written == [True] * 25 + [False] * 15 and correlator.suppressed == 15
    assert made[24]["count"] == 16  # 9 apart, and the combined one's 16th
    assert correlator.correlate(event_about("api")) is not None  # another object: its own budget
    clock.advance(299.0)
    assert correlator.correlate(event_about(message="Created pod: web-40")) is None
    clock.advance(1.0)
    last = event_about(message="Created pod: web-41")
    assert correlator.correlate(last) is not None
    assert last["count"] == 33  # what was not written is counted in the next that is


def test_the_newest_unwritten_event_is_written_once_the_budget_allows_so_the_count_ends_exact():
    clock = FakeClock()
    correlator = EventCorrelator(clock)
    for i in range(40):
        correlator.correlate(event_about(message=f"Created pod: web-{i}"))
    assert correlator.due() == []  # no budget left yet
    clock.advance(300.0)
    ((event, series),) = correlator.due()
    assert (event["message"], event["count"]) == ("(combined from similar events): Created pod: web-39", 31)
    assert series.count == 31 and correlator.due() == []  # written once; the budget's token spent
    assert correlator.correlate(event_about(message="Created pod: web-40")) is None
    clock.advance(300.0)
    assert [e["count"] for e, _ in correlator.due()] == [32]
    # One written meanwhile settles what was owed of its kind.
    correlator.correlate(event_about(message="Created pod: web-41"))
    clock.advance(300.0)
    assert correlator.correlate(event_about(message="Created pod: web-42")) is not None
    clock.advance(300.0)
    assert correlator.due() == []


def test_what_the_correlator_remembers_is_bounded():
    correlator = EventCorrelator(FakeClock())
    first = event_about("web-0")
    correlator.correlate(first)
    for i in range(1, REMEMBERED + 1):
        correlator.correlate(event_about(f"web-{i}"))
    again = event_about("web-0")
    correlator.correlate(again)
    assert again["count"] == 1  # forgotten: the least recently seen went first
    recent = event_about(f"web-{REMEMBERED}")
    correlator.correlate(recent)
    assert recent["count"] == 2


async def test_a_replica_set_of_40_pods_leaves_nine_created_events_and_one_combined(tmp_path):
    """What ``kubectl describe rs`` shows after a large scale-up: not one event a pod (5,000 writes
    for a ReplicaSet of 5,000), but Kubernetes' correlation: nine apart, then one combined whose
    count rose with each write the object's budget of 25 allowed."""
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "namespace": "default"},
          "spec": {"replicas": 40, "selector": {"matchLabels": {"app": "web"}},
                   "template": {"metadata": {"labels": {"app": "web"}},
                                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}
    async with running_server(str(tmp_path / "s"), scheduler=False) as server:
        api = server.api
        replicasets = next(c for c in server.controllers.controllers if c.name == "replicaset")
        await api.create(by_kind("ReplicaSet"), "default", rs, replicasets.opts)

        async def pods() -> list[str]:
            await api.cache.wait_consistent()
            return [r.obj["metadata"]["name"] for r in api.cache.items(by_kind("Pod").store_prefix)]

        names = await until(pods, lambda ps: len(ps) == 40)
        await replicasets.events.drain()
        made = [e for e in await written(api) if e["involvedObject"]["name"] == "web"]
        assert replicasets.events.correlator.suppressed == 40 - 25
    apart = [e for e in made if not e["message"].startswith("(combined")]
    (combined,) = [e for e in made if e["message"].startswith("(combined from similar events): Created pod: web-")]
    assert len(apart) == 9 and all(e["count"] == 1 and e["message"][len("Created pod: "):] in names for e in apart)
    assert combined["count"] == 16 and combined["message"].split(": ")[-1] in names


async def test_a_burst_past_the_budget_ends_with_the_combined_events_count_exact(tmp_path):
    clock = FakeClock()
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api = server.api
        events = ObjectEvents(api, "replicaset-controller", clock=clock, settle_interval=0.01)
        rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
              "metadata": {"name": "web", "namespace": "default", "uid": "uid-web"}}
        events.start()
        try:
            for i in range(40):
                events.record(rs, "Normal", "SuccessfulCreate", f"Created pod: web-{i}")
            await events.drain()

            async def combined() -> list[int]:
                return [e["count"] for e in await written(api) if e["message"].startswith("(combined")]

            assert await combined() == [16]
            clock.advance(300.0)
            await until(combined, lambda counts: counts == [31])
        finally:
            await events.stop()
        assert len(await written(api)) == 10
