"""What only the etcd backend has: endpoint parsing, values other writers put under its root, PROGRESS
events for a shared etcd, and a delete that keeps losing races."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from corral.store import Conflict, EventType, KeyNotFound, open_store
from corral.store.etcd import SUB, parse_endpoints


def test_endpoints_are_host_port_pairs_with_or_without_the_scheme():
    assert parse_endpoints("etcd://127.0.0.1:2379, etcd-2.internal:2380") == [("127.0.0.1", 2379),
                                                                                ("etcd-2.internal", 2380)]
    assert parse_endpoints("10.0.0.1:2379") == [("10.0.0.1", 2379)]
    assert parse_endpoints("etcd://[::1]:2379") == [("[::1]", 2379)]  # the port is after the last colon


@pytest.mark.parametrize("url, part", [("etcd://h1", "h1"), ("etcd://h1:", "h1:"), ("etcd://:2379", ":2379"),
                                       ("etcd://h1:2379,", ""), ("etcd://h1:port", "h1:port"), ("", "")])
def test_a_malformed_endpoint_is_refused_with_the_part_and_the_url_named(url, part):
    with pytest.raises(ValueError) as refused:
        parse_endpoints(url)
    assert str(refused.value) == f"etcd endpoint must be HOST:PORT, got {part!r} in {url!r}"


async def test_values_another_writer_put_under_the_root_read_back_with_their_revision(pair):
    store, _ = pair
    put = await store._client.put(store._k("/k/raw"), b'{"a":1}')
    await store._client.put(store._k("/k/empty"), b"")
    raw, empty = await store.get("/k/raw"), await store.get("/k/empty")
    assert raw.obj == {"a": 1, "metadata": {"resourceVersion": str(raw.revision)}}
    assert empty.obj == {"metadata": {"resourceVersion": str(empty.revision)}}
    assert raw.revision == put.header.revision * SUB  # a write alone: the first place of its etcd revision


async def next_batch(watch) -> list:
    return await asyncio.wait_for(anext(watch), 10)


async def test_a_watch_of_everything_with_progress_sees_other_roots_writes_as_progress_only(pair):
    store, other = pair
    start = await store.current_revision()
    with_progress = store.watch("/", start, progress=True)
    without = store.watch("/", start)
    first = asyncio.ensure_future(next_batch(with_progress))
    plain = asyncio.ensure_future(next_batch(without))
    await asyncio.sleep(0.2)  # both watches are open before the writes
    foreign = await other.create("/core/pods/default/x", {"metadata": {"name": "x"}})
    mine = await store.create("/core/pods/default/a", {"metadata": {"name": "a"}})
    progress = await first
    # The foreign write's etcd revision, all of it: nothing of this store's is there.
    assert [(e.type, e.key, e.revision, e.record.value) for e in progress] == [
        (EventType.PROGRESS, "", foreign.revision + SUB - 1, b"")]
    # A write of its own, then the progress to the end of its etcd revision.
    mine_then_progress = await next_batch(with_progress)
    assert [(e.type, e.key, e.revision) for e in mine_then_progress] == [
        (EventType.ADDED, "/core/pods/default/a", mine.revision), (EventType.PROGRESS, "", mine.revision + SUB - 1)]
    assert mine_then_progress[1].record.value == b""
    # Without progress, the other root's write is not there at all.
    assert [(e.type, e.key, e.revision) for e in await plain] == [
        (EventType.ADDED, "/core/pods/default/a", mine.revision)]
    await with_progress.aclose()
    await without.aclose()


async def test_a_delete_that_keeps_losing_races_gives_up_with_a_conflict_and_one_that_loses_the_key_is_not_found(
        pair, monkeypatch):
    store, _ = pair
    a = await store.create("/k/a", {"metadata": {"name": "a"}})
    tries: list[int] = []

    async def losing_txn(compare, success):  # someone else always writes in between
        tries.append(1)
        return False, store.revision, False

    monkeypatch.setattr(store, "_txn", losing_txn)
    with pytest.raises(Conflict) as refused:
        await store.delete("/k/a")
    assert len(tries) == 8
    assert (refused.value.key, refused.value.expected, refused.value.actual) == ("/k/a", 0, -1)
    with pytest.raises(Conflict) as refused:
        await store.delete("/k/a", a.revision)
    assert (refused.value.key, refused.value.expected, refused.value.actual) == ("/k/a", a.revision, -1)

    async def deleted_meanwhile(compare, success):  # the other writer deleted it: not our delete
        await store._client.delete(store._k("/k/a"))
        return False, store.revision, False

    monkeypatch.setattr(store, "_txn", deleted_meanwhile)
    with pytest.raises(KeyNotFound):
        await store.delete("/k/a")


async def test_keys_live_under_the_root_corral_by_default_and_a_trailing_slash_changes_nothing(etcd):
    store = await open_store(etcd.url)
    slashed = await open_store(etcd.url, root=f"/r-{uuid.uuid4().hex[:8]}/")
    try:
        key = f"/k/{uuid.uuid4().hex[:8]}"
        await store.create(key, {"metadata": {"name": "a"}})
        assert await store._client.get(f"/corral{key}".encode()) is not None
        await store.delete(key)
        await slashed.create("/k/b", {"metadata": {"name": "b"}})
        assert await slashed._client.get(f"{slashed.root}/k/b".encode()) is not None
        assert not slashed.root.endswith("/") and (await slashed.get("/k/b")).key == "/k/b"
    finally:
        await store.close()
        await slashed.close()


async def test_etcds_space_quota_is_a_store_full_error_and_an_alarm_until_a_write_goes_through(tmp_path):
    """etcd refuses writes past its --quota-backend-bytes (its NOSPACE alarm): the store says so as
    StoreFull, which the server answers 507 and shows on /readyz, instead of an opaque failure."""
    from corral.store import StoreFull
    from corral.testing.etcd import EtcdProcess

    proc = EtcdProcess(str(tmp_path / "etcd"), extra_args=("--quota-backend-bytes", str(2 * 2**20))).start()
    try:
        store = await open_store(proc.url)
        try:
            assert store.full() is None
            with pytest.raises(StoreFull, match=r"^the store is full \(etcd's --quota-backend-bytes reached\)$"):
                for i in range(100):  # 100 × 100 KB: far past the 2 MiB quota
                    await store.create(f"/core/pods/default/p{i}", {"metadata": {"name": f"p{i}"}, "blob": "x" * 100_000})
            assert isinstance(store.full(), StoreFull)
            assert (await store.get("/core/pods/default/p0")) is not None  # reads go on
            # What an operator does (etcd's runbook): free space, compact, defragment, disarm.
            for i in range(100):
                try:
                    await store.delete(f"/core/pods/default/p{i}")
                except KeyNotFound:
                    break
            await store.compact(store.revision)
            client = store._client
            await client.defragment()
            alarms = [alarm async for alarm in client.list_alarms()]
            assert alarms  # etcd's own NOSPACE alarm, which the store reported
            for alarm in alarms:
                await client.disarm_alarm(alarm.member_id)
            await store.create("/core/pods/default/after", {"metadata": {"name": "after"}})
            assert store.full() is None  # the write that went through clears it
        finally:
            await store.close()
    finally:
        proc.stop()


def test_what_a_grpc_error_says_is_its_details_and_another_error_says_nothing():
    from corral.store.etcd import _details

    class RpcError(Exception):
        def details(self):
            return "etcdserver: too many operations in txn request"

    assert _details(RpcError()) == "etcdserver: too many operations in txn request"
    assert _details(ValueError("not from gRPC")) == ""
    assert _details(type("NotCallable", (Exception,), {"details": "a field"})()) == ""


async def test_a_delete_that_finds_the_key_written_again_after_it_read_it_deletes_the_newer_version(pair, monkeypatch):
    store, _ = pair
    old = await store.create("/k/race", {"metadata": {"name": "race"}, "v": 1})
    stale = await store._client.get(store._k("/k/race"))
    real_get = store._get
    reads = []

    async def read_then_someone_writes(k):
        reads.append(k)
        if len(reads) == 1:  # the first read sees v=1; then another writer writes v=2
            await store.update("/k/race", {"metadata": {"name": "race"}, "v": 2}, old.revision)
            return stale
        return await real_get(k)

    monkeypatch.setattr(store, "_get", read_then_someone_writes)
    gone = await store.delete("/k/race")
    assert len(reads) == 2 and gone.obj["v"] == 2  # the compare failed on v=1; v=2 is what was deleted


async def test_a_watch_whose_member_dies_fails_and_the_next_watch_goes_to_another_member(tmp_path):
    """The watch cache starts its watch again from the last revision it saw: that must reach a live
    member, even when no other call has failed over meanwhile."""
    from corral.testing.etcd import EtcdCluster

    cluster = EtcdCluster(str(tmp_path / "etcd")).start()
    store = await open_store(cluster.url)
    try:
        first = await store.create("/k/a", {"metadata": {"name": "a"}})
        second = await store.create("/k/b", {"metadata": {"name": "b"}})
        watch = store.watch("/k/", first.revision)
        assert [e.revision for e in await asyncio.wait_for(watch.__anext__(), 20)] == [second.revision]
        in_use = store._at
        cluster.members[in_use].kill()
        with pytest.raises(Exception) as failed:
            await asyncio.wait_for(watch.__anext__(), 20)
        assert not isinstance(failed.value, (asyncio.TimeoutError, StopAsyncIteration)), failed.value
        again = store.watch("/k/", first.revision)
        assert [e.revision for e in await asyncio.wait_for(again.__anext__(), 20)] == [second.revision]
        await again.aclose()
    finally:
        await store.close()
        cluster.stop()


def test_a_failing_member_hands_calls_to_each_other_member_in_turn_and_a_late_failure_moves_nothing():
    """Members failing one after another: every member is tried once before any twice (the live
    one is found within as many failures as there are members). A call that failed on a member the
    store has already left behind (another call moved on first) must not skip the next one."""
    from corral.store.etcd import EtcdStore

    store = EtcdStore([("127.0.0.1", 2379 + i) for i in range(4)])
    store._members = members = ["m0", "m1", "m2", "m3"]  # stand-ins: only their identity counts here
    tried = [store._client]
    for _ in range(3):
        store._move_on(store._client)
        tried.append(store._client)
    assert sorted(tried) == members
    now = store._client
    store._move_on(tried[-2])  # a late report about a member left behind
    assert store._client == now


async def test_a_member_that_stops_answering_is_left_for_the_next_after_a_few_seconds(tmp_path):
    """A member that hangs (here stopped with SIGSTOP; a machine swapping, a network that drops
    packets) must not hang the store's writes: each call has its deadline, then goes elsewhere."""
    import os
    import signal

    from corral.testing.etcd import EtcdCluster

    cluster = EtcdCluster(str(tmp_path / "etcd")).start()
    store = await open_store(cluster.url)
    frozen = None
    try:
        await store.create("/k/before", {"metadata": {"name": "before"}})
        in_use = store._at
        frozen = cluster.members[in_use].proc.pid
        os.kill(frozen, signal.SIGSTOP)
        assert (await asyncio.wait_for(store.get("/k/before"), 30)).obj["metadata"]["name"] == "before"  # a read too
        store._at = in_use  # and the revision asked of the same member
        assert await asyncio.wait_for(store.current_revision(), 30) >= store.revision
        store._at = in_use  # and a write sent to it: its deadline (3 s) comes well before gRPC's keepalive (15 s)
        after = await asyncio.wait_for(store.create("/k/after", {"metadata": {"name": "after"}}), 10)
        assert store._at != in_use and (await store.get("/k/after")).revision == after.revision
    finally:
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)
        await store.close()
        cluster.stop()


async def _watch_ends_after_its_member_hangs(tmp_path, extra_args: tuple[str, ...] = ()) -> float:
    """A watch that received one event, then idle for 3 s; its member then stopped (SIGSTOP) so
    that it answers nothing, not even gRPC's pings. The seconds until the watch ended, which it must
    with a transient error (so that its watcher starts again elsewhere)."""
    import os
    import signal

    from corral.store.etcd import _transient
    from corral.testing.etcd import EtcdProcess

    proc = EtcdProcess(str(tmp_path / "etcd"), extra_args=extra_args).start()
    store = await open_store(proc.url)
    frozen = False
    try:
        events = store.watch("/k/", store.revision)
        first = asyncio.ensure_future(events.__anext__())
        made = await store.create("/k/a", {"metadata": {"name": "a"}})
        assert [e.record.revision for e in await asyncio.wait_for(first, 10)] == [made.revision]
        waiting = asyncio.ensure_future(events.__anext__())
        await asyncio.sleep(3)  # idle: nothing sent either way but gRPC's pings
        assert not waiting.done()  # the member answers them: the watch goes on
        os.kill(proc.proc.pid, signal.SIGSTOP)
        frozen, stopped = True, asyncio.get_running_loop().time()
        with pytest.raises(Exception) as ended:
            await asyncio.wait_for(waiting, 25)
        assert _transient(ended.value), repr(ended.value)  # not the 25 s timeout: the connection was let go
        return asyncio.get_running_loop().time() - stopped
    finally:
        if frozen:
            os.kill(proc.proc.pid, signal.SIGCONT)
        await store.close()
        proc.stop()


async def test_a_watch_on_a_member_that_stops_answering_ends_within_grpcs_keepalive_so_it_starts_again_elsewhere(
        tmp_path):
    """A hung member (SIGSTOP here; a partitioned network alike) sends no error and its connection
    stays open: only gRPC's keepalive pings (every 10 s, 5 s to answer) show it gone. Then the watch
    ends with a transient error and its watcher starts again on the next member; without them it
    would wait for events forever."""
    took = await _watch_ends_after_its_member_hangs(tmp_path)
    assert took < 17, f"{took:.1f} s: the next ping comes within 10 s and has 5 s to be answered"


async def test_an_etcd_listening_on_another_loopback_address_than_localhost_is_reached(tmp_path):
    from corral.testing.etcd import EtcdProcess

    proc = EtcdProcess(str(tmp_path / "etcd"), host="127.0.0.2").start()
    try:
        store = await open_store(proc.url)
        try:
            assert proc.url.startswith("etcd://127.0.0.2:")
            made = await store.create("/k/a", {"metadata": {"name": "a"}})
            assert (await store.get("/k/a")).revision == made.revision
        finally:
            await store.close()
    finally:
        proc.stop()


async def test_a_writer_cancelled_while_its_transaction_is_on_its_way_leaves_the_others_answered(etcd):
    """A client that goes away mid-request cancels its write's wait: the writes sent with it in the
    same transaction are still answered."""
    store = await open_store(etcd.url, root=f"/test-{uuid.uuid4().hex[:12]}")
    try:
        writes = [asyncio.create_task(store.create(f"/k/{i}", {"metadata": {"name": f"n{i}"}})) for i in range(4)]
        for _ in range(50):
            await asyncio.sleep(0)
            if store._in_flight:
                break
        assert store._in_flight and not writes[0].done()  # the transaction is on its way
        writes[0].cancel()
        made = await asyncio.wait_for(asyncio.gather(*writes[1:]), 10)
        assert [r.obj["metadata"]["name"] for r in made] == ["n1", "n2", "n3"]
        assert writes[0].cancelled()
    finally:
        await store.close()


async def test_a_list_larger_than_grpcs_default_message_comes_back_whole(etcd):
    """gRPC refuses answers over 4 MiB unless told otherwise: a list of many large objects is one answer."""
    store = await open_store(etcd.url, root=f"/test-{uuid.uuid4().hex[:12]}")
    try:
        blob = "x" * (1024 * 1024)
        for i in range(6):
            await store.create(f"/big/{i}", {"metadata": {"name": f"b{i}"}, "blob": blob})
        listed = await store.list("/big/")
        assert [r.obj["metadata"]["name"] for r in listed.items] == [f"b{i}" for i in range(6)]
    finally:
        await store.close()


async def test_an_etcd_that_no_longer_answers_is_named_with_what_went_wrong(tmp_path, monkeypatch):
    from corral.store import Unavailable
    from corral.store import etcd as etcd_backend
    from corral.testing.etcd import EtcdProcess

    monkeypatch.setattr(etcd_backend, "RETRY_SECONDS", 1.0)
    proc = EtcdProcess(str(tmp_path / "etcd")).start()
    store = await open_store(proc.url)
    try:
        proc.stop()
        with pytest.raises(Unavailable) as gone:
            await store.get("/k/a")
        message = str(gone.value)
        prefix = f"etcd at [('127.0.0.1', {proc.client_port})] did not answer: "
        assert message.startswith(prefix) and message[len(prefix):] not in ("", "None"), message
    finally:
        await store.close()


async def test_a_watch_idle_for_many_pings_still_ends_soon_after_its_member_stops_answering(tmp_path, monkeypatch):
    """A watch sends nothing while it waits for events, for minutes at a time: gRPC must keep pinging
    its member all that while, or a member that hangs after a quiet spell leaves the watch waiting
    forever. Pings every 0.3 s here (etcd told to allow them), so 3 s of quiet is ten pings."""
    from corral.store import etcd as etcd_store

    monkeypatch.setattr(etcd_store, "KEEPALIVE_MS", 300)
    monkeypatch.setattr(etcd_store, "PING_TIMEOUT_MS", 1_000)
    took = await _watch_ends_after_its_member_hangs(tmp_path, ("--grpc-keepalive-min-time", "100ms"))
    assert took < 4, f"{took:.1f} s: the next ping comes within 0.3 s and has 1 s to be answered"


async def test_a_member_back_after_a_long_outage_is_used_again_within_two_seconds(tmp_path):
    """While a member is away gRPC dials it again and again, waiting longer each time: at most 2 s,
    so a write soon after it is back reaches it (gRPC's own limit is two minutes)."""
    import time

    from corral.testing.etcd import EtcdProcess

    proc = EtcdProcess(str(tmp_path / "etcd")).start()
    store = await open_store(proc.url)
    try:
        await store.create("/k/a", {"metadata": {"name": "a"}})
        proc.kill()
        with pytest.raises(Exception):  # gRPC dials on and on while the write retries
            await store.create("/k/b", {"metadata": {"name": "b"}})
        proc.start()
        back = time.monotonic()
        await asyncio.sleep(0.5)
        made = await store.create("/k/c", {"metadata": {"name": "c"}})
        took = time.monotonic() - back
        assert made.key == "/k/c"
        assert took < 4, f"{took:.1f} s after the member was back"
    finally:
        await store.close()
        proc.stop()


async def test_a_member_that_refuses_connections_is_dialled_again_soon_and_then_less_often():
    """A member that has just gone (restarting, say) is dialled again after 0.2 s, then after ever
    longer waits (gRPC's own first wait is a full second). Here a socket that closes each connection
    it is offered stands for the member, and counts them."""
    import socket
    import time

    from corral.testing.process import free_port

    port = free_port()
    listener = socket.create_server(("127.0.0.1", port))
    listener.setblocking(False)
    loop = asyncio.get_running_loop()
    dials: list[float] = []

    async def refuse_all() -> None:
        while True:
            conn, _ = await loop.sock_accept(listener)
            dials.append(time.monotonic())
            conn.close()

    refusing = asyncio.ensure_future(refuse_all())
    opening = asyncio.ensure_future(open_store(f"etcd://127.0.0.1:{port}"))
    try:
        await asyncio.sleep(1.6)
        assert not opening.done()  # still trying
        gaps = [b - a for a, b in zip(dials, dials[1:])]
        assert len(dials) >= 3 and gaps[0] < 0.5, gaps  # 0.2 s, then 0.32 s (each give or take a fifth)
    finally:
        opening.cancel()
        refusing.cancel()
        listener.close()
