"""The informer's loop against a scripted client: what it asks the server, what it hands to handlers,
how it backs off. (tests/client/test_informer.py runs it against a real server.)"""

from __future__ import annotations

import asyncio
import logging

import msgspec
import pytest

from corral.api.models import Pod
from corral.client import ConnectionFailed, Informer
from corral.client import informer as informer_module
from corral.client.rest import ApiError, Gone, ObjectList, WatchEvent

real_sleep = asyncio.sleep


def pod(name: str, rv: str, node: str = "n1") -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "team", "resourceVersion": rv},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}


class ScriptedClient:
    """Answers ``list`` and ``watch`` from scripts, one step per call, and records every call.

    A list step is an ObjectList or an exception to raise. A watch step is a list of WatchEvents,
    optionally ending with an exception; with the watch script used up, a watch stays open."""

    def __init__(self, lists: list, watches: list, typed: bool = False) -> None:
        self.lists, self.watches, self.typed = list(lists), list(watches), typed
        self.calls: list[tuple] = []

    def _object(self, obj: dict):
        return msgspec.convert(obj, Pod) if self.typed else obj

    async def list(self, resource, namespace=None, **options):
        self.calls.append(("list", resource.plural, namespace, options))
        if not self.lists:
            await asyncio.Event().wait()
        step = self.lists.pop(0)
        if isinstance(step, BaseException):
            raise step
        return ObjectList([self._object(o) for o in step.items], step.resource_version)

    async def watch(self, resource, namespace=None, **options):
        self.calls.append(("watch", resource.plural, namespace, options))
        if not self.watches:
            await asyncio.Event().wait()
        for item in self.watches.pop(0):
            if isinstance(item, BaseException):
                raise item
            yield WatchEvent(item.type, self._object(item.object), item.resource_version)


async def until(predicate, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await real_sleep(0.001)


def recorder(informer: Informer) -> list[tuple]:
    """Every handler call as (kind, name, resourceVersion...) of its objects."""
    def ident(obj) -> tuple[str, str]:
        meta = obj["metadata"] if isinstance(obj, dict) else obj.metadata
        return (meta["name"], meta["resourceVersion"]) if isinstance(meta, dict) else (meta.name, meta.resource_version)

    log: list[tuple] = []
    informer.on_add(lambda o: log.append(("add", *ident(o))))
    informer.on_update(lambda old, new: log.append(("update", *ident(old), *ident(new))))
    informer.on_delete(lambda o: log.append(("delete", *ident(o))))
    return log


def by_node(obj) -> list[str]:
    return [obj["spec"]["nodeName"]] if isinstance(obj, dict) else [obj.spec.node_name]


def names(objects) -> list[str]:
    return sorted(o["metadata"]["name"] if isinstance(o, dict) else o.metadata.name for o in objects)


async def test_list_and_every_watch_carry_the_scope_and_each_watch_resumes_from_the_last_event_seen():
    client = ScriptedClient(
        lists=[ObjectList([pod("a", "10")], "10")],
        watches=[[WatchEvent("ADDED", pod("b", "11"), "11"),
                  WatchEvent("BOOKMARK", pod("marker", "12"), "12")],
                 [WatchEvent("MODIFIED", pod("b", "13"), "")]])  # an event without a version keeps the last
    informer = Informer(client, "pods", namespace="team", label_selector="app=web",
                        field_selector="spec.nodeName=n1", raw=True, watch_timeout=7)
    assert (informer.resource_version, informer.relists) == ("", 0)
    task = informer.start()
    assert informer.start() is task and task.get_name() == "informer-pods"
    try:
        await until(lambda: len(client.calls) == 4)
        scope = {"label_selector": "app=web", "field_selector": "spec.nodeName=n1", "raw": True}
        watch = {**scope, "timeout_seconds": 7}
        assert client.calls == [
            ("list", "pods", "team", scope),
            ("watch", "pods", "team", {**watch, "resource_version": "10"}),
            ("watch", "pods", "team", {**watch, "resource_version": "12"}),  # the bookmark's version
            ("watch", "pods", "team", {**watch, "resource_version": "12"}),
        ]
        # One list; a bookmark moves the version on and is not an object.
        assert informer.relists == 1 and informer.resource_version == "12"
        assert sorted(informer.keys()) == ["team/a", "team/b"]
        assert informer.get("team/b")["metadata"]["resourceVersion"] == "13"
    finally:
        await informer.stop()
    assert task.cancelled() and informer._task is None


@pytest.mark.parametrize("typed", [False, True], ids=["raw", "typed"])
async def test_a_relist_after_410_hands_over_exactly_what_changed_while_the_watch_was_gone(typed):
    client = ScriptedClient(
        lists=[ObjectList([pod("a", "1"), pod("b", "1"), pod("c", "1")], "5"),
               # a changed and moved node, b did not change, c went, d came
               ObjectList([pod("a", "7", node="n2"), pod("b", "1"), pod("d", "8")], "9")],
        watches=[[Gone(410, {"reason": "Expired", "message": "too old resource version"})]],
        typed=typed)
    informer = Informer(client, "pods", raw=not typed, indexers={"node": by_node})
    log = recorder(informer)
    informer.start()
    try:
        await until(lambda: informer.relists == 2)
        assert log == [("add", "a", "1"), ("add", "b", "1"), ("add", "c", "1"),
                       ("delete", "c", "1"), ("update", "a", "1", "a", "7"), ("add", "d", "8")]
        assert informer.resource_version == "9"
        assert names(informer.by_index("node", "n1")) == ["b", "d"]
        assert names(informer.by_index("node", "n2")) == ["a"]
        assert [c[0] for c in client.calls] == ["list", "watch", "list", "watch"]
        assert client.calls[3][3]["resource_version"] == "9"
    finally:
        await informer.stop()


async def test_a_watched_update_hands_over_the_old_object_and_moves_its_index_entry():
    client = ScriptedClient(
        lists=[ObjectList([pod("a", "1"), pod("b", "1")], "1")],
        watches=[[WatchEvent("MODIFIED", pod("a", "2", node="n2"), "2"),
                  WatchEvent("DELETED", pod("b", "3"), "3"),
                  WatchEvent("DELETED", pod("never-seen", "4"), "4")]])
    informer = Informer(client, "pods", raw=True, indexers={"node": by_node})
    log = recorder(informer)
    informer.start()
    try:
        await until(lambda: informer.resource_version == "4")
        # A delete hands over the object as the server last had it; one never seen is no news.
        assert log[2:] == [("update", "a", "1", "a", "2"), ("delete", "b", "3")]
        assert informer.by_index("node", "n1") == [] and names(informer.by_index("node", "n2")) == ["a"]
    finally:
        await informer.stop()


async def test_failures_back_off_doubling_to_the_cap_and_a_watch_that_worked_resets_the_delay(monkeypatch, caplog):
    delays: list[float] = []

    async def fake_sleep(delay):
        delays.append(delay)
        await real_sleep(0)

    monkeypatch.setattr(informer_module.asyncio, "sleep", fake_sleep)
    refused = ConnectionFailed("connection refused")
    client = ScriptedClient(
        lists=[RuntimeError("a bug"), ApiError(503, {"message": "busy"}), refused, refused, refused, refused,
               refused, refused, ObjectList([], "1")],
        watches=[[WatchEvent("ADDED", pod("a", "2"), "2")],  # ends normally: the delay starts over
                 [refused]])
    caplog.set_level(logging.INFO, logger="corral.client.informer")
    informer = Informer(client, "pods", raw=True)  # the default backoff: 0.2 s doubling to 10 s
    informer.start()
    try:
        await until(lambda: len(delays) == 9)
        assert delays == [0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 10.0, 10.0, 0.2]
        records = [(r.levelno, r.getMessage()) for r in caplog.records]
        # A bug is an error each time; the other failures of a run are debug lines after its first
        # line (this run's first was the bug), and its end is said once.
        assert records[:2] == [(logging.ERROR, "pods informer: a bug; retrying in 0.2s"),
                               (logging.INFO, "pods informer: the server answers again after 8 failed attempts")]
        # The list's six refusals are debug lines; the watch's refusal, once the list answered, is a new outage.
        assert [r.levelno for r in caplog.records if "refused" in r.getMessage()] == [logging.WARNING]
        assert informer.relists == 1 and informer.keys() == ["team/a"]
    finally:
        await informer.stop()


async def test_an_outage_is_one_warning_its_end_one_line_and_the_next_starts_at_the_shortest_delay(monkeypatch, caplog):
    async def fake_sleep(delay):
        await real_sleep(0)

    monkeypatch.setattr(informer_module.asyncio, "sleep", fake_sleep)
    refused = ConnectionFailed("connection refused")
    client = ScriptedClient(lists=[refused, refused, ApiError(503, {"message": "busy"}), ObjectList([], "1"),
                                   refused, ObjectList([], "1")],
                            watches=[[refused], [refused], [WatchEvent("ADDED", pod("a", "2"), "2"), refused],
                                     [Gone(410, {"message": "expired"})], [Gone(410, {"message": "expired"})]])
    caplog.set_level(logging.DEBUG, logger="corral.client.informer")
    informer = Informer(client, "pods", raw=True)
    informer.start()
    try:
        await until(lambda: informer.relists == 2)
        records = [(r.levelno, r.getMessage()) for r in caplog.records if "expired" not in r.getMessage()]
        assert records[:9] == [
            (logging.WARNING, "pods informer: connection refused; retrying in 0.2s"),
            (logging.DEBUG, "pods informer: connection refused; retrying in 0.4s"),
            (logging.DEBUG, "pods informer: busy; retrying in 0.8s"),
            (logging.INFO, "pods informer: the server answers again after 3 failed attempts"),  # the list
            # The watch refused twice (a watch again each time, no list): still one warning, and the
            # delays start over, as the server had answered.
            (logging.WARNING, "pods informer: connection refused; retrying in 0.2s"),
            (logging.DEBUG, "pods informer: connection refused; retrying in 0.4s"),
            (logging.INFO, "pods informer: the server answers again after 2 failed attempts"),  # its event
            (logging.WARNING, "pods informer: connection refused; retrying in 0.2s"),  # a new outage: warned again
            (logging.DEBUG, "pods informer: connection refused; retrying in 0.4s")]  # the list after the Gone
    finally:
        await informer.stop()


async def test_wait_synced_gives_up_after_its_timeout_while_the_list_has_not_answered():
    informer = Informer(ScriptedClient(lists=[], watches=[]), "pods", raw=True)
    informer.start()
    try:
        waiting = asyncio.ensure_future(informer.wait_synced(0.05))
        await asyncio.wait({waiting}, timeout=3)  # a wait without its timeout is still waiting here
        assert waiting.done() and isinstance(waiting.exception(), TimeoutError)
        assert not informer.synced
    finally:
        await informer.stop()
