"""What every queue-driven controller shares: creates started in doubling batches, the time a sync
holds the event loop measured apart from its waits, and a key whose sync held the loop long
gathered into fewer syncs."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest

from corral.aio import OnLoop
from corral.api.resources import by_kind
from corral.client.workqueue import WorkQueue
from corral.controllers.batches import slow_start
from corral.controllers.queued import HOLD_FACTOR, QueuedController
from corral.server import errors
from corral.server.rest import WriteOptions
from corral.testing.server import running_server


def batches(log: list[tuple[str, int]]) -> list[int]:
    """Sizes of the batches: the calls started before the first of them ended."""
    sizes, current = [], 0
    for what, _ in log:
        if what == "start":
            current += 1
        elif current:
            sizes.append(current)
            current = 0
    return sizes


def recorder(log: list, fail: set[int] = frozenset()):
    def call(i: int):
        async def run() -> int:
            log.append(("start", i))
            await asyncio.sleep(0)
            log.append(("end", i))
            if i in fail:
                raise ValueError(f"call {i} failed")
            return i
        return run
    return call


@pytest.mark.parametrize("count, limit, expected", [
    (10, 64, [1, 2, 4, 3]),
    (10, 2, [1, 2, 2, 2, 2, 1]),
    (1, 64, [1]),
    (200, None, [1, 2, 4, 8, 16, 32, 64, 64, 9]),  # by default at most 64 at once
])
async def test_calls_start_in_batches_that_double_up_to_the_limit(count, limit, expected):
    log: list = []
    call = recorder(log)
    calls = [call(i) for i in range(count)]
    assert await (slow_start(calls) if limit is None else slow_start(calls, limit=limit)) == list(range(count))
    assert batches(log) == expected


async def test_after_a_batch_with_a_failure_no_further_call_is_made():
    log: list = []
    call = recorder(log, fail={2})
    results = await slow_start([call(i) for i in range(10)])
    assert results[:2] == [0, 1] and isinstance(results[2], ValueError) and len(results) == 3
    assert sorted(i for what, i in log if what == "start") == [0, 1, 2]  # the batch of 1, then of 2


async def test_on_loop_counts_the_time_a_coroutine_runs_not_the_time_it_waits():
    async def work() -> str:
        time.sleep(0.05)  # holds the loop
        await asyncio.sleep(0.2)  # waits: others run
        time.sleep(0.03)
        return "done"

    timed = OnLoop(work())
    started = time.perf_counter()
    assert await timed == "done"
    assert time.perf_counter() - started >= 0.28
    assert 0.08 <= timed.busy < 0.2


async def test_a_cancelled_coroutine_is_cancelled_where_it_waits():
    reached = []

    async def work() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            reached.append("cancelled")
            raise

    async def run(timed: OnLoop) -> None:
        await timed

    task = asyncio.ensure_future(run(OnLoop(work())))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reached == ["cancelled"]


class Slow(QueuedController):
    """Every ConfigMap change concerns one key, whose sync holds the loop for ``cost`` seconds
    and waits 20 ms in between."""

    name = "slow"
    workers = 1

    def __init__(self, api, cost: float) -> None:
        super().__init__(api)
        self.cost = cost
        self.synced: list[float] = []

    def keys_for(self, event):
        return ["all"] if event.key.startswith(by_kind("ConfigMap").store_prefix) else []

    def initial_keys(self):
        return []

    async def sync(self, key: str) -> None:
        self.synced.append(time.monotonic())
        time.sleep(self.cost / 2)
        await asyncio.sleep(0.02)  # a write: changes that come meanwhile queue the key again
        time.sleep(self.cost / 2)


@pytest.mark.parametrize("cost", [0.03, 0.0])
async def test_changes_during_a_long_syncs_hold_are_gathered_into_one_later_sync(tmp_path, cost):
    configmaps = by_kind("ConfigMap")
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        controller = Slow(server.api, cost)
        controller.start()
        begun = time.monotonic()
        try:
            for i in range(30):
                last_change = time.monotonic()  # a sync must begin after the last change is made
                await server.api.create(configmaps, "default", {"apiVersion": "v1", "kind": "ConfigMap",
                                                                "metadata": {"name": f"c{i}"}}, WriteOptions(warn=False))
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.3 + cost * (1 + HOLD_FACTOR))  # past any hold the last change met
        finally:
            await controller.stop()
            took = time.monotonic() - begun
    gaps = [b - a for a, b in zip(controller.synced, controller.synced[1:])]
    assert controller.synced and controller.synced[-1] >= last_change  # every change is seen, the last too
    if cost:  # each sync is followed by a hold of HOLD_FACTOR times what it held the loop
        period = (cost + 0.02 + cost * HOLD_FACTOR) * 0.9
        assert min(gaps) >= period
        # The 30 changes gathered: as many syncs as the time allows (how long 30 creates take depends
        # on the machine's load), and fewer than changes.
        assert len(controller.synced) <= min(took / period + 1, 15)
    else:  # a cheap sync is never held: changes 10 ms apart are synced (nearly) one by one
        assert len(controller.synced) >= 10


class Recording(QueuedController):
    """Routes each ConfigMap change to its own key (but refuses to route one named ``odd``); its
    sync of a key fails as many times as ``failures`` says, then asks to look again after ``again``."""

    name = "recording"
    workers = 1

    def __init__(self, api, failures: dict[str, int] | None = None, again: dict[str, float] | None = None,
                 error: Exception | None = None) -> None:
        super().__init__(api)
        self.failures, self.again, self.error = dict(failures or {}), dict(again or {}), error
        self.synced: list[tuple[str, float]] = []
        self.loaded = 0

    def keys_for(self, event):
        if not event.key.startswith(by_kind("ConfigMap").store_prefix):
            return []
        if event.key.endswith("/odd"):
            raise ValueError("an object this controller cannot read")
        return [event.key.rsplit("/", 1)[1]]

    def initial_keys(self):
        self.loaded += 1
        return ["start"]

    async def sync(self, key: str) -> float | None:
        self.synced.append((key, time.monotonic()))
        if self.failures.get(key, 0) > 0:
            self.failures[key] -= 1
            raise self.error or RuntimeError(f"{key} failed")
        return self.again.pop(key, None)


async def configmap(server, name: str) -> None:
    await server.api.create(by_kind("ConfigMap"), "default", {"metadata": {"name": name}}, WriteOptions(warn=False))


async def synced(controller: Recording, key: str, times: int) -> list[float]:
    async with asyncio.timeout(10):
        while len(at := [t for k, t in controller.synced if k == key]) < times:
            await asyncio.sleep(0.005)
    return at


async def test_a_change_that_cannot_be_routed_is_logged_and_the_ones_after_it_still_arrive(tmp_path, caplog):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        controller = Recording(server.api)
        controller.start()
        try:
            await synced(controller, "start", 1)  # what initial_keys gave
            await configmap(server, "odd")
            await configmap(server, "fine")
            await synced(controller, "fine", 1)
        finally:
            await controller.stop()
    assert "recording: could not route the change of /core/configmaps/default/odd" in caplog.text
    assert "odd" not in {k for k, _ in controller.synced}


class Routed(Recording):
    """Recording, declaring that it reads ConfigMaps only; keys_for sees every change it is handed."""

    def __init__(self, api) -> None:
        super().__init__(api)
        self.handed: list[str] = []

    def watched(self):
        return (by_kind("ConfigMap"),)

    def keys_for(self, event):
        self.handed.append(event.key)
        return super().keys_for(event)


async def test_a_controller_is_handed_only_the_changes_of_the_resources_it_declares_until_it_stops(tmp_path):
    """What the watch cache routes by a controller's ``watched()``: its resources' changes, in order,
    and nothing of the rest (a Secret, a Namespace); once stopped, nothing at all."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        controller = Routed(server.api)
        controller.start()
        try:
            await configmap(server, "one")
            await server.api.create(by_kind("Secret"), "default", {"metadata": {"name": "s"}}, WriteOptions(warn=False))
            await server.api.create(by_kind("Namespace"), None, {"metadata": {"name": "other"}},
                                    WriteOptions(warn=False))
            await configmap(server, "two")
            await synced(controller, "two", 1)
        finally:
            await controller.stop()
        assert controller.handed == ["/core/configmaps/default/one", "/core/configmaps/default/two"]
        await configmap(server, "three")
        await server.cache.wait_consistent()
        assert controller.handed[-1] == "/core/configmaps/default/two"  # stopped: no longer handed any
        hooks = [server.cache.on_event, *server.cache.on_prefix_event.values()]
        assert not any(controller._on_event in h for h in hooks)


async def test_a_controller_stopped_while_its_cache_catches_up_leaves_no_sync_unawaited(tmp_path):
    """Found as a RuntimeWarning ("coroutine 'GarbageCollector.sync' was never awaited") when a server
    stopped: a worker had made its sync's coroutine before waiting for a fresh cache, and was
    cancelled there. Nothing synced, nothing left over."""
    import gc
    import warnings

    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        controller = Recording(server.api)
        held = asyncio.Event()

        async def never_fresh() -> None:
            held.set()
            await asyncio.Event().wait()

        server.api.cache.wait_fresh = never_fresh
        controller.start()
        async with asyncio.timeout(10):
            await held.wait()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            await controller.stop()
            gc.collect()
        assert [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)] == []
        assert controller.synced == []


async def test_a_failed_sync_is_tried_again_after_a_growing_backoff_and_a_delay_it_asks_for_brings_it_back(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        controller = Recording(server.api, failures={"flaky": 2}, again={"flaky": 0.2})
        controller.start()
        try:
            await configmap(server, "flaky")
            first, second, third, fourth = await synced(controller, "flaky", 4)
        finally:
            await controller.stop()
    base = controller.queue._base
    assert second - first >= base * 0.9 and third - second >= 2 * base * 0.9  # 5 ms, then 10 ms
    assert fourth - third >= 0.2 * 0.9  # the third succeeded and asked to look again in 0.2 s


@pytest.mark.parametrize("error, quiet", [
    pytest.param(RuntimeError("the disk is full"), 3, id="any error: warned from the fourth failure in a row"),
    pytest.param(errors.ApiError(409, "Conflict", "the object has been modified"), 20,
                 id="a lost race: warned from the twenty-first"),
])
async def test_a_failing_sync_is_logged_quietly_at_first_and_warned_of_with_its_traceback_once_it_keeps_failing(
        tmp_path, caplog, error, quiet):
    """Operators see a key that keeps failing, not every race a retry resolves; a success starts the
    count over."""
    caplog.set_level(logging.DEBUG, logger=__name__)
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        controller = Recording(server.api, failures={"flaky": quiet + 2}, error=error)
        controller.queue = WorkQueue(base_delay=1e-4, max_delay=1e-3)
        controller.start()
        try:
            await configmap(server, "flaky")
            await synced(controller, "flaky", quiet + 3)  # the last one succeeds
            controller.failures["flaky"] = quiet
            controller.queue.add("flaky")
            await synced(controller, "flaky", 2 * quiet + 4)
        finally:
            await controller.stop()
    failed = [r for r in caplog.records if r.name == __name__ and "sync of flaky failed" in r.getMessage()]
    assert [r.levelno for r in failed] == [logging.DEBUG] * quiet + [logging.WARNING] * 2 + [logging.DEBUG] * quiet
    assert [bool(r.exc_info) for r in failed] == [r.levelno == logging.WARNING for r in failed]
    assert failed[-1].getMessage() == f"recording: sync of flaky failed ({error}); again in 0.00s"
    assert failed[quiet].exc_info[1] is error


async def test_a_reloaded_cache_starts_the_controller_over_from_its_initial_keys(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        controller = Recording(server.api)
        controller.start()
        try:
            await synced(controller, "start", 1)
            for callback in list(server.api.cache.on_reload):  # what the cache calls after a reload
                callback()
            await synced(controller, "start", 2)
        finally:
            await controller.stop()
        assert controller.loaded == 2 and controller._on_reload not in server.api.cache.on_reload


async def test_delete_if_unchanged_deletes_only_the_object_read_and_says_whether_it_did(tmp_path, monkeypatch):
    """Replaced meanwhile (same name, another uid: 409) or gone (404): nothing deleted, False, no
    error; any other refusal is raised."""
    from corral.server import errors

    cm = by_kind("ConfigMap")
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        api, controller = server.api, Recording(server.api)
        await configmap(server, "a")
        read = (await api.current(cm, "default", "a")).obj
        await api.delete(cm, "default", "a", None, None, None)
        assert await controller.delete_if_unchanged(cm, read) is False  # gone
        await configmap(server, "a")  # replaced: the one read is gone, this one stays
        assert await controller.delete_if_unchanged(cm, read) is False
        current = (await api.current(cm, "default", "a")).obj
        assert current["metadata"]["uid"] != read["metadata"]["uid"]
        assert await controller.delete_if_unchanged(cm, current) is True
        with pytest.raises(errors.ApiError, match="not found"):
            await api.current(cm, "default", "a")

        async def refuse(*args, **kwargs):
            raise errors.ApiError(403, "Forbidden", "not allowed")
        monkeypatch.setattr(api, "delete", refuse)
        with pytest.raises(errors.ApiError, match="not allowed"):
            await controller.delete_if_unchanged(cm, current)


def test_each_failed_create_is_a_warning_event_on_its_owner_and_the_first_failure_fails_the_sync():
    """As Kubernetes' controllers: FailedCreate "Error creating: ..." per refused create, and the
    sync fails (its key is tried again with backoff) with the first refusal."""
    from types import SimpleNamespace

    from corral.controllers.batches import record_creates
    from corral.server import errors

    recorded: list[tuple] = []
    controller = SimpleNamespace(events=SimpleNamespace(record=lambda *args: recorded.append(args)))
    owner = {"metadata": {"name": "web", "namespace": "default"}}
    quota = errors.ApiError(403, "Forbidden", 'pods "web-x" is forbidden: exceeded quota')
    invalid = errors.ApiError(422, "Invalid", "spec.containers[0].image: Required value")
    with pytest.raises(errors.ApiError) as raised:
        record_creates(controller, owner, ["made", quota, invalid], lambda result, i: f"Created pod: {result}-{i}")
    assert raised.value is quota
    assert recorded == [(owner, "Normal", "SuccessfulCreate", "Created pod: made-0"),
                        (owner, "Warning", "FailedCreate", 'Error creating: pods "web-x" is forbidden: exceeded quota'),
                        (owner, "Warning", "FailedCreate", "Error creating: spec.containers[0].image: Required value")]
    recorded.clear()
    record_creates(controller, owner, ["made"], lambda result, i: f"Created pod: {result}")  # nothing failed: no raise
    assert recorded == [(owner, "Normal", "SuccessfulCreate", "Created pod: made")]


class Holding(QueuedController):
    """One key for every ConfigMap change, whose sync holds the loop for 30 ms (a hold of 90 ms after it)."""

    name = "holding"
    workers = 1

    def __init__(self, api) -> None:
        super().__init__(api)
        self.synced: list[tuple[float, float]] = []  # (began, ended)

    def keys_for(self, event):
        return ["all"] if event.key.startswith(by_kind("ConfigMap").store_prefix) else []

    def initial_keys(self):
        return []

    async def sync(self, key: str) -> None:
        began = time.monotonic()
        time.sleep(0.03)
        self.synced.append((began, time.monotonic()))


async def test_changes_arriving_during_a_hold_are_synced_once_when_it_ends(tmp_path):
    """After a sync that held the loop 30 ms the key waits 90 ms: changes arriving in that window
    (none queued before them) are neither lost nor synced early, and two of them make one sync; and
    so again in the hold after that sync."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        controller = Holding(server.api)
        controller.start()
        try:
            await configmap(server, "first")
            async with asyncio.timeout(5):
                while not controller.synced:
                    await asyncio.sleep(0.001)
            hold_ends = controller.synced[0][1] + HOLD_FACTOR * 0.03
            await asyncio.sleep(0.02)
            await configmap(server, "during-1")
            await configmap(server, "during-2")
            assert time.monotonic() < hold_ends - 0.01, "the machine was too slow to change things within the hold"
            async with asyncio.timeout(5):
                while len(controller.synced) < 2:
                    await asyncio.sleep(0.001)
            second_hold_ends = controller.synced[1][1] + HOLD_FACTOR * 0.03
            await configmap(server, "during-the-second")  # the next hold gathers its changes the same way
            assert time.monotonic() < second_hold_ends - 0.01, "the machine was too slow to change things within the hold"
            await asyncio.sleep(0.4)
        finally:
            await controller.stop()
    assert len(controller.synced) == 3
    assert controller.synced[1][0] >= hold_ends - 0.005 and controller.synced[2][0] >= second_hold_ends - 0.005


class Records:
    """The two calls OwnedIndex makes of the watch cache, over a dict of key → object."""

    def __init__(self, *objects: dict) -> None:
        self.by_key = {key_of(o): o for o in objects}

    def items(self, prefix: str):
        return [record(o) for k, o in sorted(self.by_key.items()) if k.startswith(prefix)]

    def get(self, key: str):
        return record(self.by_key[key]) if key in self.by_key else None


def job_obj(name: str) -> dict:
    return {"kind": "Job", "metadata": {"namespace": "default", "name": name, "uid": f"uid-{name}"}}


def pod_obj(name: str, *refs: tuple[str, str, bool]) -> dict:
    """A pod with ownerReferences (kind, owner name, controller?)."""
    return {"kind": "Pod", "metadata": {"namespace": "default", "name": name, "ownerReferences": [
        {"kind": kind, "name": owner, "uid": f"uid-{owner}", "controller": controller} for kind, owner, controller in refs]}}


def key_of(obj: dict) -> str:
    return by_kind(obj["kind"]).key("default", obj["metadata"]["name"])


def record(obj: dict):
    from corral.store.base import Record
    return Record(key_of(obj), 1, json.dumps(obj).encode())


def test_the_owned_index_routes_each_change_to_the_owners_it_concerned_before_and_after():
    """The Job, CronJob and DaemonSet controllers learn of their objects' changes through it: a pod
    controlled by a Job concerns that Job, one adopted or released concerns both owners, a deleted
    owner stops being anyone's; ownerReferences that do not control, or name another kind, are no
    Job's business."""
    from corral.controllers.queued import OwnedIndex
    from corral.store.base import Event, EventType

    jobs, pods = by_kind("Job"), by_kind("Pod")
    j1, j2 = key_of(job_obj("j1")), key_of(job_obj("j2"))
    cache = Records(job_obj("j1"), pod_obj("p1", ("Job", "j1", True)), pod_obj("rs", ("ReplicaSet", "j1", True)),
                    pod_obj("loose", ("Job", "j1", False)), pod_obj("bare"))
    index = OwnedIndex(cache, jobs, pods)
    assert index.load() == [j1] and index.keys_of(job_obj("j1")) == [key_of(pod_obj("p1"))]

    def change(obj: dict, kind: EventType = EventType.MODIFIED) -> set[str]:
        if kind is EventType.DELETED:
            cache.by_key.pop(key_of(obj), None)
        else:
            cache.by_key[key_of(obj)] = obj
        return index.keys_for(Event(kind, record(obj)))

    def owned(job: str) -> list[str]:
        return [o["metadata"]["name"] for o in index.objects_of(job_obj(job))]

    assert change(job_obj("j2"), EventType.ADDED) == {j2} and sorted(index.owner_keys()) == [j1, j2]
    assert change(pod_obj("p2", ("Job", "j2", True)), EventType.ADDED) == {j2} and owned("j2") == ["p2"]
    assert change(pod_obj("p2", ("Job", "j1", True))) == {j1, j2}  # adopted by j1
    assert (owned("j1"), owned("j2")) == (["p1", "p2"], [])
    assert change(pod_obj("p2")) == {j1} and owned("j1") == ["p1"]  # released
    assert change(pod_obj("p2", ("Job", "j2", True))) == {j2} and owned("j2") == ["p2"]
    assert change(pod_obj("p2", ("ReplicaSet", "j2", True))) == {j2} and owned("j2") == []  # another kind's now
    assert change(pod_obj("p1", ("Job", "j1", True)), EventType.DELETED) == {j1} and index.keys_of(job_obj("j1")) == []
    assert change(pod_obj("other", ("Job", "j1", False)), EventType.ADDED) == set()
    assert change({"kind": "ConfigMap", "metadata": {"name": "j1", "uid": "uid-j1"}}, EventType.ADDED) == set()
    assert change(job_obj("j2"), EventType.DELETED) == {j2} and index.owner_keys() == [j1]
    assert change(pod_obj("p3", ("Job", "j2", True)), EventType.ADDED) == set()  # its owner is gone
    assert change(job_obj("never-seen"), EventType.DELETED) == {key_of(job_obj("never-seen"))}


def test_the_owner_route_hands_a_change_only_to_the_kinds_controlling_the_object_before_or_after():
    """The Job, DaemonSet, Placement and Deployment controllers hear of pods through one route: a
    change reaches the controllers of the kind controlling the pod now, and of the kind that did
    before it (released, adopted, deleted), known from the cache for what was there before the route;
    a bare pod's change, or a reference that does not control, reaches none. A reload forgets what
    is gone; the last hook removed takes the route out of the cache."""
    from corral.controllers.queued import OwnerRoute
    from corral.store.base import Event, EventType

    cache = Records(pod_obj("early", ("Job", "j1", True)))
    cache.on_prefix_event, cache.on_reload = {}, []
    pods = by_kind("Pod").store_prefix
    heard: list[tuple[str, str]] = []

    def hook(kind: str):
        return lambda event: heard.append((kind, event.key.rsplit("/", 1)[1]))

    route = OwnerRoute.of(cache, pods)
    assert OwnerRoute.of(cache, pods) is route and cache.on_prefix_event[pods] == [route]
    job, ds = hook("Job"), hook("DaemonSet")
    route.hooks.update(Job=[job], DaemonSet=[ds])

    def change(obj: dict, kind: EventType = EventType.MODIFIED) -> list[tuple[str, str]]:
        heard.clear()
        route(Event(kind, record(obj)))
        return sorted(heard)

    assert change(pod_obj("bare"), EventType.ADDED) == []
    assert change(pod_obj("loose", ("Job", "j1", False)), EventType.ADDED) == []
    assert change(pod_obj("early")) == [("Job", "early")]  # released: its Job hears it, once
    assert change(pod_obj("early")) == []
    assert change(pod_obj("p", ("Job", "j1", True)), EventType.ADDED) == [("Job", "p")]
    assert change(pod_obj("p", ("Job", "j1", True))) == [("Job", "p")]
    assert change(pod_obj("p", ("DaemonSet", "d", True))) == [("DaemonSet", "p"), ("Job", "p")]
    assert change(pod_obj("p", ("ReplicaSet", "r", True))) == [("DaemonSet", "p")]  # no hook of that kind
    assert change(pod_obj("q", ("DaemonSet", "d", True)), EventType.ADDED) == [("DaemonSet", "q")]
    assert change(pod_obj("q", ("DaemonSet", "d", True)), EventType.DELETED) == [("DaemonSet", "q")]
    assert change(pod_obj("q")) == []
    assert change(pod_obj("r", ("Job", "j1", True)), EventType.ADDED) == [("Job", "r")]
    cache.on_reload[0]()  # the cache reloaded without it (deleted meanwhile)
    assert change(pod_obj("r", ("Job", "j1", True)), EventType.DELETED) == []
    route.remove(job)
    assert cache.on_prefix_event[pods] == [route]
    route.remove(ds)
    assert (cache.on_prefix_event[pods], cache.on_reload) == ([], [])


class Owners(QueuedController):
    """Routes by its OwnedIndex (the default keys_for and initial_keys); records an event per sync."""

    name = "owners"

    def __init__(self, api, component: str = "") -> None:
        self.component = component
        super().__init__(api)
        from corral.controllers.queued import OwnedIndex
        self.index = OwnedIndex(api.cache, by_kind("Job"), by_kind("Pod"))
        self.synced: list[tuple[str, float]] = []

    async def sync(self, key: str) -> None:
        self.synced.append((key, time.monotonic()))
        self.events.record((await self.api.current(by_kind("Job"), "default", key.rsplit("/", 1)[1])).obj,
                           "Normal", "Synced", key)


@pytest.mark.parametrize("component, source", [("", "owners"), ("job-controller", "job-controller")])
async def test_a_controller_with_an_owned_index_syncs_the_owner_of_each_change_and_names_itself(
        tmp_path, component, source):
    """Started with a Job in the store, it syncs it; a pod that Job controls, created later, brings
    it back. Its events name it as their source (its component, else its name), as kubectl shows
    them; its workers' tasks carry its name, and its events' writer the name of their source."""
    jobs, pods = by_kind("Job"), by_kind("Pod")
    opts = WriteOptions(warn=False)
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        job = (await server.api.create(jobs, "default", {"apiVersion": "batch/v1", "kind": "Job",
                                                          "metadata": {"name": "work"}, "spec": {"template": {
                                                              "spec": {"restartPolicy": "Never", "containers": [
                                                                  {"name": "c", "image": "busybox"}]}}}}, opts))
        uid = json.loads(job.body)["metadata"]["uid"]
        await server.api.cache.wait_consistent()
        controller = Owners(server.api, component)
        controller.start()
        try:
            assert {t.get_name() for t in asyncio.all_tasks()} >= {"owners-0", "owners-1", f"{source}-events"}
            await synced(controller, jobs.key("default", "work"), 1)
            await server.api.create(pods, "default", {"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": "work-1", "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "work",
                                                       "uid": uid, "controller": True}]},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, opts)
            await synced(controller, jobs.key("default", "work"), 2)
            await controller.events.drain()
        finally:
            await controller.stop()
        await server.api.cache.wait_consistent()
        events = [r.obj for r in server.api.cache.items(by_kind("Event").store_prefix)]
    assert {(e["source"]["component"], e["reportingComponent"]) for e in events} == {(source, source)}


async def test_a_controller_stopped_before_it_started_stops_cleanly(tmp_path):
    """A leader whose controllers failed to start part-way stops them all, the ones never started too."""
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        await Owners(server.api).stop()
