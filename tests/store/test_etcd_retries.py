"""The etcd store's writes when a reply is lost in transit: the write reached etcd, the client saw an
error and retried. A create, update or delete must then report what happened (success, with the
revision it got), not a conflict with itself."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
from aetcd.exceptions import ConnectionFailedError

from corral.store import Conflict, KeyExists, open_store


@pytest.fixture
async def store(etcd):
    s = await open_store(etcd.url, root=f"/test-{uuid.uuid4().hex[:12]}")
    yield s
    await s.close()


def lose_next_reply(store, monkeypatch) -> list[int]:
    """The next transaction reaches etcd, but its reply is lost; returns the list of calls made."""
    stub = store._client.kvstub
    real, calls = stub.Txn, []

    async def txn(*args, **kwargs):
        reply = await real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionFailedError("the reply was lost")
        return reply

    monkeypatch.setattr(stub, "Txn", txn)
    return calls


def obj(name: str, **extra) -> dict:
    return {"metadata": {"name": name, "uid": uuid.uuid4().hex}, **extra}


async def test_a_create_whose_reply_was_lost_reports_its_own_success(store, monkeypatch):
    calls = lose_next_reply(store, monkeypatch)
    record = await store.create("/core/pods/default/a", obj("a"))
    assert len(calls) == 2  # retried, refused as existing, recognised as ours
    stored = await store.get("/core/pods/default/a")
    assert (record.revision, record.value) == (stored.revision, stored.value)
    assert record.obj["metadata"]["resourceVersion"] == str(stored.revision)


async def test_a_create_retried_into_a_strangers_object_is_refused(store, monkeypatch):
    await store.create("/core/pods/default/a", obj("a"))
    lose_next_reply(store, monkeypatch)
    with pytest.raises(KeyExists):
        await store.create("/core/pods/default/a", obj("a"))  # another uid: not ours


async def test_an_update_whose_reply_was_lost_reports_its_own_success(store, monkeypatch):
    first = await store.create("/core/pods/default/a", obj("a"))
    calls = lose_next_reply(store, monkeypatch)
    changed = {**first.obj, "spec": {"x": 1}}
    record = await store.update("/core/pods/default/a", changed, first.revision)
    assert len(calls) == 2
    stored = await store.get("/core/pods/default/a")
    assert (record.revision, record.value) == (stored.revision, stored.value)
    assert stored.revision > first.revision


async def test_an_update_retried_after_someone_elses_change_is_a_conflict(store, monkeypatch):
    first = await store.create("/core/pods/default/a", obj("a"))
    await store.update("/core/pods/default/a", {**first.obj, "spec": {"x": 2}}, first.revision)
    lose_next_reply(store, monkeypatch)
    with pytest.raises(Conflict):
        await store.update("/core/pods/default/a", {**first.obj, "spec": {"x": 1}}, first.revision)


async def test_a_delete_whose_reply_was_lost_returns_the_last_state(store, monkeypatch):
    first = await store.create("/core/pods/default/a", obj("a", spec={"x": 1}))
    calls = lose_next_reply(store, monkeypatch)
    record = await store.delete("/core/pods/default/a", first.revision)
    assert len(calls) == 2  # the retry was refused, and the key is gone: our delete went through
    assert record.key == "/core/pods/default/a" and record.revision > first.revision
    assert record.obj["spec"] == {"x": 1} and record.obj["metadata"]["resourceVersion"] == str(record.revision)
    assert await store.get("/core/pods/default/a") is None


def rpc_error(code_name: str, details: str):
    from aetcd import rpc
    from grpc.aio import Metadata

    return rpc.AioRpcError(getattr(rpc.StatusCode, code_name), Metadata(), Metadata(), details=details)


async def test_a_call_failing_in_transit_goes_to_the_next_member_backing_off_up_to_a_second_until_its_deadline(
        monkeypatch):
    """A unit test on a fake clock (no etcd): the waits between tries double from 50 ms to at most a
    second, so a leader election is ridden out without hammering the members, and past
    RETRY_SECONDS the error says what etcd said."""
    from corral.store import Unavailable
    from corral.store import etcd as etcd_backend

    clock, slept = [1000.0], []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(etcd_backend, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    monkeypatch.setattr(etcd_backend, "asyncio", SimpleNamespace(sleep=sleep))
    store = etcd_backend.EtcdStore([("10.0.0.1", 2379), ("10.0.0.2", 2379)])
    store._members = ["member-1", "member-2"]  # what the calls are given; the fake call makes no call
    tried: list[str] = []

    async def leader_changes(member: str) -> str:
        tried.append(member)
        if len(tried) <= 3:
            raise rpc_error("UNAVAILABLE", "etcdserver: leader changed")
        return f"answered by {member}"

    assert await store._retrying(leader_changes) == ("answered by member-2", True)
    assert tried == ["member-1", "member-2", "member-1", "member-2"] and slept == [0.05, 0.1, 0.2]

    async def at_once(member: str) -> str:
        return f"answered by {member}"

    slept.clear()
    assert await store._retrying(at_once) == ("answered by member-2", False) and slept == []

    async def never(member: str) -> str:
        raise rpc_error("DEADLINE_EXCEEDED", "etcdserver: request timed out")

    started = clock[0]
    with pytest.raises(Unavailable) as gone:
        await store._retrying(never)
    assert slept == [0.05, 0.1, 0.2, 0.4, 0.8] + [1.0] * 8  # the next wait would pass the 10 s
    assert clock[0] - started == pytest.approx(9.55)
    assert str(gone.value) == ("etcd at [('10.0.0.1', 2379), ('10.0.0.2', 2379)] did not answer: "
                               "etcdserver: request timed out")

    async def refused(member: str) -> str:
        raise rpc_error("PERMISSION_DENIED", "etcdserver: permission denied")

    slept.clear()
    with pytest.raises(Exception) as denied:
        await store._retrying(refused)
    assert denied.value.details() == "etcdserver: permission denied" and slept == []  # not retried
