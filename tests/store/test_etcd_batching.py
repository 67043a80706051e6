"""etcd's batched writes: writes waiting at the same moment go as one transaction, and each still has
a revision of its own, the same whether it is read back, listed or watched."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from corral.store import Compacted, Conflict, EventType, KeyExists, KeyNotFound, TooLarge, open_store
from corral.store import etcd as etcd_backend
from corral.store.etcd import SUB


@pytest.fixture
async def store(etcd):
    s = await open_store(etcd.url, root=f"/b-{uuid.uuid4().hex[:12]}")
    yield s
    await s.close()


def obj(name: str, **extra) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, **extra}


def count_transactions(store, monkeypatch) -> list[int]:
    """The number of writes in each transaction the store sends from here on."""
    sent: list[int] = []
    real = store._txn

    async def counting(compare, success):
        sent.append(len(success))
        return await real(compare, success)

    monkeypatch.setattr(store, "_txn", counting)
    return sent


async def watch_until(store, prefix: str, after: int, count: int) -> list:
    events = []
    async with asyncio.timeout(10):
        async for batch in store.watch(prefix, after):
            events.extend(batch)
            if len(events) >= count:
                return events
    return events


async def test_writes_made_together_go_in_one_transaction_each_with_its_own_revision(store, monkeypatch):
    start = store.revision
    sent = count_transactions(store, monkeypatch)
    written = await asyncio.gather(*(store.create(f"/p/{i:02}", obj(f"p{i}", i=i)) for i in range(40)))
    assert sent == [40]  # one transaction, one etcd revision
    revisions = [r.revision for r in written]
    etcd_revision = revisions[0] // SUB
    assert revisions == [etcd_revision * SUB + place for place in range(40)]
    assert start < revisions[0] and revisions[-1] <= store.revision
    # Each record names its revision; read back, listed and watched it is the same one.
    for record in written:
        assert record.obj["metadata"]["resourceVersion"] == str(record.revision)
    for i in (0, 1, 39):
        got = await store.get(f"/p/{i:02}")
        assert (got.revision, got.value, got.obj["i"]) == (written[i].revision, written[i].value, i)
    listed = await store.list("/p/")
    assert [(r.key, r.revision, r.value) for r in listed.items] == [(r.key, r.revision, r.value) for r in written]
    assert listed.revision == etcd_revision * SUB + SUB - 1  # every write of it
    events = await watch_until(store, "/p/", start, 40)
    assert [(e.type, e.key, e.revision, e.record.value) for e in events] == [
        (EventType.ADDED, r.key, r.revision, r.value) for r in written]


async def test_a_write_whose_compare_fails_fails_alone_and_the_others_of_its_transaction_land(store, monkeypatch):
    taken = await store.create("/q/taken", obj("taken"))
    old = await store.create("/q/moved", obj("moved"))
    moved = await store.update("/q/moved", obj("moved", v=1), old.revision)
    sent = count_transactions(store, monkeypatch)
    answers = await asyncio.gather(
        store.create("/q/a", obj("a")),
        store.create("/q/taken", obj("again")),  # exists
        store.update("/q/moved", obj("moved", v=2), old.revision),  # stale
        store.update("/q/missing", obj("missing"), 0),  # no such key
        store.create("/q/b", obj("b")),
        return_exceptions=True)
    assert sent[0] == 5 and sent[1:] == [1] * 5  # the transaction, then each write alone
    a, exists, stale, missing, b = answers
    assert isinstance(exists, KeyExists) and exists.key == "/q/taken"
    assert isinstance(stale, Conflict) and (stale.expected, stale.actual) == (old.revision, moved.revision)
    assert isinstance(missing, KeyNotFound)
    assert (await store.get("/q/a")).revision == a.revision and (await store.get("/q/b")).revision == b.revision
    assert (await store.get("/q/a")).obj["metadata"]["name"] == "a" and (await store.get("/q/b")).obj == b.obj
    assert (await store.get("/q/taken")).revision == taken.revision
    assert (await store.get("/q/moved")).obj["v"] == 1


async def test_a_write_that_fails_in_transit_when_sent_alone_fails_alone(store, monkeypatch):
    """After a compare failed, each write goes again on its own: one of them failing in transit
    is told to its writer; the writers after it still hear their own answers."""
    from aetcd.exceptions import ConnectionFailedError

    await store.create("/r/taken", obj("taken"))
    real = store._txn

    async def lost_for_b(compare, success):
        if len(success) == 1 and success[0][0] == store._k("/r/b"):
            raise ConnectionFailedError("lost on its way")
        return await real(compare, success)

    monkeypatch.setattr(store, "_txn", lost_for_b)
    a, b, taken, c = await asyncio.wait_for(asyncio.gather(
        store.create("/r/a", obj("a")), store.create("/r/b", obj("b")), store.create("/r/taken", obj("again")),
        store.create("/r/c", obj("c")), return_exceptions=True), 30)
    assert isinstance(b, ConnectionFailedError) and isinstance(taken, KeyExists)
    assert (await store.get("/r/a")).revision == a.revision and (await store.get("/r/c")).revision == c.revision


async def test_a_watch_from_a_revision_inside_a_transaction_starts_right_after_it(store):
    written = await asyncio.gather(*(store.create(f"/w/{i}", obj(f"w{i}")) for i in range(5)))
    assert len({r.revision // SUB for r in written}) == 1
    events = await watch_until(store, "/w/", written[1].revision, 3)
    assert [e.revision for e in events] == [r.revision for r in written[2:]]
    # A list at such a revision holds the whole transaction, and says so.
    listed = await store.list("/w/", revision=written[1].revision)
    assert len(listed.items) == 5 and listed.revision == written[0].revision - written[0].revision % SUB + SUB - 1


async def test_a_value_written_in_a_later_place_updates_and_deletes_with_its_own_revisions(store):
    first, second = await asyncio.gather(store.create("/d/a", obj("a")), store.create("/d/b", obj("b", v=1)))
    assert second.revision == first.revision + 1
    updated = await store.update("/d/b", obj("b", v=2), second.revision)
    assert updated.revision // SUB > second.revision // SUB and updated.obj["metadata"]["resourceVersion"] == str(
        updated.revision)
    gone = await store.delete("/d/b", updated.revision)
    assert gone.obj == {**obj("b", v=2), "metadata": {"name": "b", "resourceVersion": str(gone.revision)}}
    events = await watch_until(store, "/d/", first.revision - 1, 4)
    assert [(e.type, e.revision, e.record.obj["metadata"]["resourceVersion"]) for e in events] == [
        (EventType.ADDED, first.revision, str(first.revision)),
        (EventType.ADDED, second.revision, str(second.revision)),
        (EventType.MODIFIED, updated.revision, str(updated.revision)),
        (EventType.DELETED, gone.revision, str(gone.revision))]
    with pytest.raises(Conflict) as refused:
        await store.update("/d/a", obj("a", v=1), first.revision - SUB)
    assert refused.value.actual == first.revision
    third, fourth = await asyncio.gather(store.create("/d/c", obj("c")), store.create("/d/d", obj("d")))
    assert fourth.revision % SUB == 1
    assert (await store.delete("/d/d", fourth.revision)).revision > fourth.revision  # its exact revision holds
    with pytest.raises(Conflict):
        await store.delete("/d/c", third.revision - SUB)


async def test_limits_split_transactions_one_key_at_most_once_each_and_a_cancelled_write_is_not_sent(
        store, monkeypatch):
    sent = count_transactions(store, monkeypatch)
    made = await asyncio.gather(*(store.create(f"/m/{i:03}", obj(f"m{i}")) for i in range(etcd_backend.MAX_BATCH + 5)))
    assert sorted(sent) == [5, etcd_backend.MAX_BATCH]
    # Read back, each keeps the revision its write answered, places of three digits (100 on) too.
    assert [(await store.get(r.key)).revision for r in made] == [r.revision for r in made]
    assert [r.revision for r in (await store.list("/m/")).items] == [r.revision for r in made]
    sent.clear()
    lease = await store.create("/l/lease", obj("lease"))
    pods = await asyncio.gather(*(store.create(f"/f/{i:03}", obj(f"f{i}")) for i in range(70)))
    sent.clear()
    await asyncio.gather(*(store.update(p.key, obj(p.key, v=1), p.revision, fence=(lease.key, lease.revision))
                           for p in pods))
    assert sorted(sent) == [6, etcd_backend.MAX_BATCH // 2]  # two compares each: etcd counts them too
    sent.clear()
    monkeypatch.setattr(etcd_backend, "MAX_BATCH_BYTES", 1000)
    await asyncio.gather(*(store.create(f"/big/{i}", obj(f"big{i}", blob="x" * 600)) for i in range(3)))
    assert sent == [1, 1, 1]
    sent.clear()
    await asyncio.gather(*(store.create(f"/mid/{i}", obj(f"mid{i}", blob="x" * 250)) for i in range(4)))
    assert sent == [3, 1]  # ~300 bytes each: three fit in 1000, the fourth does not
    sent.clear()
    exact = [obj(f"ex{i}", blob="x" * 300) for i in range(2)]
    monkeypatch.setattr(etcd_backend, "MAX_BATCH_BYTES", sum(len(etcd_backend._stored(o)) for o in exact))
    await asyncio.gather(*(store.create(f"/ex/{i}", o) for i, o in enumerate(exact)))
    assert sent == [2]  # exactly the limit: one transaction
    a = await store.create("/s/a", obj("a"))
    sent.clear()
    twice = await asyncio.gather(store.update("/s/a", obj("a", v=1), 0), store.update("/s/a", obj("a", v=2), 0),
                                 store.create("/s/b", obj("b")))
    assert sent == [2, 1]  # etcd refuses one key twice in a transaction: the second waits for the first
    assert a.revision < twice[0].revision < twice[1].revision and (await store.get("/s/a")).obj["v"] == 2
    sent.clear()
    cancelled = asyncio.ensure_future(store.create("/s/cancelled", obj("c")))
    await asyncio.sleep(0)  # waiting to be sent
    cancelled.cancel()
    kept = await store.create("/s/kept", obj("k"))
    assert sent == [1] and kept is not None and await store.get("/s/cancelled") is None


async def test_history_kept_is_counted_in_etcd_revisions_each_one_write_or_more(store):
    for i in range(3):
        await store.create(f"/h/{i}", obj(f"h{i}"))
    top = store.revision
    assert top % SUB == SUB - 1 and store.revision_before(0) == top
    assert store.revision_before(2) == top - 2 * SUB
    assert store.revision_before(top // SUB - 1) == 2 * SUB - 1  # etcd's first revision and its own write kept
    assert store.revision_before(top // SUB) == 0 and store.revision_before(top) == 0


async def test_an_etcd_taking_fewer_operations_per_transaction_gets_smaller_batches_and_every_write_lands(
        tmp_path, caplog):
    from corral.testing.etcd import EtcdProcess

    proc = EtcdProcess(str(tmp_path / "etcd"), extra_args=("--max-txn-ops", "16")).start()
    try:
        store = await open_store(proc.url)
        try:
            written = await asyncio.gather(*(store.create(f"/t/{i:02}", obj(f"t{i}")) for i in range(60)))
            assert store.max_batch == 30  # the 60 refused together: half of them from now on
            more = await asyncio.gather(*(store.create(f"/t/more-{i:02}", obj(f"m{i}")) for i in range(40)))
            assert store.max_batch == 15  # 30 refused too: the next 15 are taken
            listed = await store.list("/t/")
            assert sorted(r.revision for r in listed.items) == sorted(r.revision for r in written + more)
            assert "lower than 128" in caplog.text
        finally:
            await store.close()
    finally:
        proc.stop()


async def test_an_etcd_taking_one_operation_per_transaction_gets_every_write_alone(tmp_path):
    from corral.testing.etcd import EtcdProcess

    proc = EtcdProcess(str(tmp_path / "etcd"), extra_args=("--max-txn-ops", "1")).start()
    try:
        store = await open_store(proc.url)
        other = await open_store(proc.url)
        try:
            two = await asyncio.gather(*(store.create(f"/one/{i}", obj(f"o{i}")) for i in range(2)))
            assert store.max_batch == 1
            three = await asyncio.gather(*(other.create(f"/one/x{i}", obj(f"x{i}")) for i in range(3)))
            assert other.max_batch == 1  # 3 refused: 3 // 2
            listed = await store.list("/one/")
            assert sorted(r.revision for r in listed.items) == sorted(r.revision for r in two + three)
        finally:
            await store.close()
            await other.close()
    finally:
        proc.stop()


async def test_a_transaction_retried_after_it_went_through_is_recognised_write_by_write(store, monkeypatch):
    """The first attempt of a batched transaction lands but its answer is lost (a member dies); the
    retry's compares then fail, and each write alone fails too: each writer finds its own value, as
    sent with its place in the transaction, and gets its revision."""
    real = store._txn
    calls: list[int] = []
    lose = [True]

    async def lost_answer(compare, success):
        calls.append(len(success))
        ok, revision, retried = await real(compare, success)
        if lose.pop() if lose else False:  # it went through; the caller hears of a retry that found it done
            assert ok and len(success) > 1
            return False, revision, True
        return ok, revision, retried

    monkeypatch.setattr(store, "_txn", lost_answer)
    written = await asyncio.gather(*(store.create(f"/r/{i}", obj(f"r{i}", i=i)) for i in range(4)))
    assert calls == [4, 1, 1, 1, 1]
    etcd_revision = written[0].revision // SUB
    assert [r.revision for r in written] == [etcd_revision * SUB + place for place in range(4)]
    for i, record in enumerate(written):
        got = await store.get(f"/r/{i}")
        assert (got.revision, got.value, got.obj["i"]) == (record.revision, record.value, i)
    # A stranger's value under one of those keys is not taken for ours.
    stranger = await store.update("/r/1", obj("r1", i="stranger"), written[1].revision)
    async def retried_into_a_stranger(compare, success):  # the batch "retried": its compares fail
        ok, revision, retried = await real(compare, success)
        return (ok, revision, True) if len(success) > 1 else (ok, revision, retried)

    monkeypatch.setattr(store, "_txn", retried_into_a_stranger)
    mine, other = await asyncio.gather(store.create("/r/1", obj("r1", i=1)), store.create("/r/9", obj("r9")),
                                       return_exceptions=True)
    assert isinstance(mine, KeyExists) and (await store.get("/r/1")).revision == stranger.revision
    assert (await store.get("/r/9")).revision == other.revision


async def test_what_etcd_holds_keeps_a_place_only_after_the_first_and_nested_metadata_is_left_alone(store):
    def deployment(name: str) -> dict:  # a template's metadata inside: the top-level one is the record's
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                "spec": {"template": {"metadata": {"labels": {"app": name}}, "spec": {}}}}

    first, second = await asyncio.gather(store.create("/n/a", deployment("a")), store.create("/n/b", deployment("b")))
    assert second.revision == first.revision + 1
    raw_first = (await store._client.get(store._k("/n/a"))).value
    raw_second = (await store._client.get(store._k("/n/b"))).value
    assert b"resourceVersion" not in raw_first  # what etcdctl shows: a write alone or first keeps none
    assert raw_second.startswith(b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"resourceVersion":"1",')
    got = await store.get("/n/b")
    assert got.revision == second.revision and got.obj["spec"]["template"]["metadata"] == {"labels": {"app": "b"}}
    assert got.obj["metadata"] == {"name": "b", "resourceVersion": str(second.revision)}


async def test_several_writes_of_another_writer_in_one_transaction_are_numbered_by_their_order(store):
    """etcdctl's ``txn`` or ``del --prefix`` writes several keys at one etcd revision without kept
    places (and may keep what looks like a resourceVersion): a watch numbers them by their order."""
    from aetcd import rpc

    start = store.revision
    values = [b'{"metadata":{"name":"x"}}', b'{"metadata":{"resourceVersion":"1234","name":"y"}}',
              b'{"metadata":{"resourceVersion":"abc","name":"z"}}', b'{"name":"no metadata"}']
    ops = [rpc.RequestOp(request_put=rpc.PutRequest(key=store._k(f"/x/{i}"), value=v)) for i, v in enumerate(values)]
    put = await store._client.kvstub.Txn(rpc.TxnRequest(compare=[], success=ops, failure=[]))
    gone = await store._client.delete_prefix(store._k("/x/"))
    written, deleted = put.header.revision, gone.header.revision
    events = await watch_until(store, "/x/", start, 8)
    assert [(e.type, e.key, e.revision) for e in events] == [
        (EventType.ADDED, "/x/0", written * SUB), (EventType.ADDED, "/x/1", written * SUB + 1),
        (EventType.ADDED, "/x/2", written * SUB + 2), (EventType.ADDED, "/x/3", written * SUB + 3),
        (EventType.DELETED, "/x/0", deleted * SUB), (EventType.DELETED, "/x/1", deleted * SUB + 1),
        (EventType.DELETED, "/x/2", deleted * SUB + 2), (EventType.DELETED, "/x/3", deleted * SUB + 3)]
    assert [e.record.obj["metadata"]["resourceVersion"] for e in events] == [str(e.revision) for e in events]
    assert [e.record.obj["metadata"].get("name", e.record.obj.get("name")) for e in events[4:]] == [
        "x", "y", "z", "no metadata"]  # each delete carries the last state
    # A watch from inside them starts right after.
    later = await watch_until(store, "/x/", written * SUB + 1, 6)
    assert [e.revision for e in later] == [written * SUB + 2, written * SUB + 3, deleted * SUB, deleted * SUB + 1,
                                           deleted * SUB + 2, deleted * SUB + 3]


async def test_a_transaction_of_several_roots_shows_the_others_as_progress_and_this_ones_writes(pair):
    from aetcd import rpc

    store, other = pair
    start = await store.current_revision()
    watch = store.watch("/", start, progress=True)
    first = asyncio.ensure_future(anext(watch))
    await asyncio.sleep(0.2)
    ops = [rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=b'{"metadata":{"name":"v"}}'))
           for k in (other._k("/o/1"), store._k("/o/mine"), other._k("/o/2"))]
    put = await store._client.kvstub.Txn(rpc.TxnRequest(compare=[], success=ops, failure=[]))
    batch = await asyncio.wait_for(first, 10)
    top = put.header.revision * SUB + SUB - 1
    assert [(e.type, e.key, e.revision) for e in batch] == [
        (EventType.PROGRESS, "", top), (EventType.ADDED, "/o/mine", put.header.revision * SUB + 1),
        (EventType.PROGRESS, "", top)]
    assert batch[0].record.value == batch[2].record.value == b""
    await watch.aclose()


async def test_a_watch_from_before_another_servers_compaction_is_told_where_history_begins(pair):
    store, other = pair
    old = await store.create("/c/a", obj("a"))
    await store.update("/c/a", obj("a", v=1), old.revision)
    mark = await other.current_revision()  # ``other`` compacts; ``store`` has not heard of it
    await other.compact(mark)
    with pytest.raises(Compacted) as refused:
        async with asyncio.timeout(10):
            async for _ in store.watch("/c/", old.revision - 1):
                pass
    assert (refused.value.requested, refused.value.compacted) == (old.revision - 1, mark - mark % SUB - 1)
    with pytest.raises(Compacted) as refused:  # etcd's own answer: this store did not compact
        await store.list("/c/", revision=old.revision)
    assert (refused.value.requested, refused.value.compacted) == (old.revision, 0)


async def test_batched_writes_into_a_full_etcd_each_hear_that_it_is_full(tmp_path, caplog):
    import gc

    from corral.store import StoreFull
    from corral.testing.etcd import EtcdProcess

    proc = EtcdProcess(str(tmp_path / "etcd"), extra_args=("--quota-backend-bytes", str(2 * 2**20))).start()
    try:
        store = await open_store(proc.url)
        try:
            with pytest.raises(StoreFull):
                for i in range(100):
                    await store.create(f"/big/{i}", obj(f"big{i}", blob="x" * 100_000))
            refused = await asyncio.gather(*(store.create(f"/more/{i}", obj(f"m{i}")) for i in range(5)),
                                           return_exceptions=True)
            assert all(isinstance(r, StoreFull) for r in refused), refused
            # The refusal is not mistaken for too many operations (later transactions keep their
            # size), and is told to its writers only (no task left with an error nobody reads).
            assert store.max_batch == etcd_backend.MAX_BATCH and "lower than" not in caplog.text
            gc.collect()
            await asyncio.sleep(0)
            assert "exception was never retrieved" not in caplog.text
        finally:
            await store.close()
    finally:
        proc.stop()


async def test_what_the_writer_sent_as_resource_version_is_not_stored_and_metadata_always_leads(store):
    sent = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "resourceVersion": "77"},
            "spec": {"template": {"metadata": {"labels": {"app": "a"}}}}}
    backwards = {"spec": {"template": {"metadata": {"labels": {"app": "b"}}}}, "kind": "Deployment",
                 "metadata": {"name": "b", "resourceVersion": "78"}, "apiVersion": "apps/v1"}
    bare = {"spec": {"template": {"metadata": {"labels": {"app": "c"}}}}, "metadata": {"name": "c"}}
    a, b = await store.create("/o/a", sent), await store.create("/o/b", backwards)
    c = await store.create("/o/c", bare)
    assert (await store._client.get(store._k("/o/c"))).value == \
        b'{"metadata":{"name":"c"},"spec":{"template":{"metadata":{"labels":{"app":"c"}}}}}'
    assert c.obj["metadata"]["resourceVersion"] == str(c.revision)
    raw_a, raw_b = (await store._client.get(store._k("/o/a"))).value, (await store._client.get(store._k("/o/b"))).value
    assert raw_a == b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a"},' \
                    b'"spec":{"template":{"metadata":{"labels":{"app":"a"}}}}}'
    assert raw_b == b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"b"},' \
                    b'"spec":{"template":{"metadata":{"labels":{"app":"b"}}}}}'
    for record in (a, b, await store.get("/o/a"), await store.get("/o/b")):
        assert record.obj["metadata"]["resourceVersion"] == str(record.revision)
        assert "resourceVersion" not in record.obj["spec"]["template"]["metadata"]
    # A write refused keeps the writer's object as it was, with or without a resourceVersion.
    store.max_value_bytes = 100
    with pytest.raises(TooLarge):
        await store.update("/o/a", sent, a.revision)
    assert sent["metadata"]["resourceVersion"] == str(a.revision)
    fresh = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "data": {"x": "y" * 200}}
    with pytest.raises(TooLarge):
        await store.create("/o/d", fresh)
    assert fresh["metadata"] == {"name": "d"}


async def test_a_keys_next_write_goes_only_once_the_one_before_has_landed_whatever_else_is_on_its_way(
        store, monkeypatch):
    real = store._txn
    log: list[tuple[str, tuple]] = []

    async def slow(compare, success):  # each transaction stays on its way a while
        keys = tuple(sorted(k.decode().rsplit("/", 1)[-1] for k, _ in success))
        log.append(("sent", keys))
        await asyncio.sleep(0.05)
        try:
            return await real(compare, success)
        finally:
            log.append(("landed", keys))

    monkeypatch.setattr(store, "_txn", slow)
    first = asyncio.ensure_future(store.create("/k/a", obj("a")))
    await asyncio.sleep(0.01)  # a's transaction is on its way
    other = asyncio.ensure_future(store.create("/k/b", obj("b")))
    await asyncio.sleep(0.01)  # and b's, beside it
    again = asyncio.ensure_future(store.update("/k/a", obj("a", v=1), 0))
    await asyncio.gather(first, other, again)
    assert log.index(("sent", ("a",)), log.index(("landed", ("a",)))) > log.index(("landed", ("a",)))
    assert log[:2] == [("sent", ("a",)), ("sent", ("b",))]
    assert (await store.get("/k/a")).obj["v"] == 1


async def test_at_most_four_transactions_are_on_their_way_and_many_writes_of_one_key_all_land(store, monkeypatch):
    real = store._txn
    flying, most = [0], [0]

    async def counted(compare, success):
        flying[0] += 1
        most[0] = max(most[0], flying[0])
        try:
            await asyncio.sleep(0.01)
            return await real(compare, success)
        finally:
            flying[0] -= 1

    monkeypatch.setattr(store, "_txn", counted)
    await asyncio.gather(*(store.create(f"/f/{i:03}", obj(f"f{i}")) for i in range(5 * etcd_backend.MAX_BATCH + 1)))
    assert most[0] == etcd_backend.MAX_IN_FLIGHT == 4
    # More writes of one key wait than a transaction holds: each goes after the one before.
    await store.create("/one/k", obj("k"))
    written = await asyncio.gather(*(store.update("/one/k", obj("k", i=i), 0) for i in range(etcd_backend.MAX_BATCH + 5)))
    assert [r.revision for r in written] == sorted(r.revision for r in written)
    assert (await store.get("/one/k")).obj["i"] == etcd_backend.MAX_BATCH + 4


async def test_the_watch_hands_on_the_stores_own_writes_as_written_and_decodes_anothers(store, etcd):
    after = store.revision
    mine = await asyncio.gather(*(store.create(f"/h/{i}", obj(f"h{i}", i=i)) for i in range(3)))
    updated = await store.update("/h/0", {**mine[0].obj, "spec": {"x": 1}}, mine[0].revision)
    # Another writer (another server, etcdctl) puts a value of its own.
    other = await open_store(etcd.url, root=store.root)
    try:
        theirs = await other.create("/h/9", obj("h9"))
    finally:
        await other.close()
    events = await watch_until(store, "/h/", after, 5)
    assert [e.record for e in events[:4]] == [*mine, updated]
    assert all(e.record is r for e, r in zip(events, [*mine, updated]))  # the writer's own, not decoded again
    decoded = events[4].record
    assert decoded is not theirs and decoded.obj == theirs.obj  # decoded from the event ...
    assert decoded == theirs  # ... to the same key, revision, value and object
    assert not store._written  # each handed on once: nothing kept
    assert store._watched == theirs.revision // SUB  # and what the watch has passed is not kept from now on


async def test_deletes_carry_their_last_state_without_etcd_sending_the_previous_value_of_every_write(
        store, etcd, monkeypatch):
    from aetcd import rpc

    created = rpc.WatchCreateRequest
    asked: list[bool] = []
    monkeypatch.setattr(rpc, "WatchCreateRequest", lambda **kw: asked.append(kw.get("prev_kv", False))
                        or created(**kw))
    after = store.revision
    a, b = await asyncio.gather(store.create("/g/a", obj("a", v=1)), store.create("/g/b", obj("b", v=2)))
    updated = await store.update("/g/a", {**a.obj, "v": 3}, a.revision)
    mine = await store.delete("/g/a")
    other = await open_store(etcd.url, root=store.root)  # another server deletes the other one
    try:
        theirs = await other.delete("/g/b")
    finally:
        await other.close()
    reads = []
    real_range = store._client.kvstub.Range
    monkeypatch.setattr(store._client.kvstub, "Range", lambda request, **kw: reads.append(request) or real_range(
        request, **kw))
    events = await watch_until(store, "/g/", after, 5)
    assert asked == [False]  # etcd reads no previous value for the update
    assert [(e.type, e.revision) for e in events] == [
        (EventType.ADDED, a.revision), (EventType.ADDED, b.revision), (EventType.MODIFIED, updated.revision),
        (EventType.DELETED, mine.revision), (EventType.DELETED, theirs.revision)]
    assert events[3].record is mine  # this store's own delete: handed on with the state it removed
    assert events[4].record.obj == {**obj("b", v=2), "metadata": {"name": "b", "resourceVersion": str(
        theirs.revision)}}  # another's: the last state, read at the revision before
    assert [(r.key, r.revision) for r in reads] == [(store._k("/g/b"), theirs.revision // SUB - 1)]
    assert not store._written
    # A watcher that holds every object itself (the watch cache) takes another's deletes unread.
    reads.clear()
    again = await asyncio.wait_for(anext(store.watch("/g/", mine.revision, last_states=False)), 10)
    assert [(e.type, e.key, e.revision, e.record.value) for e in again] == [
        (EventType.DELETED, "/g/b", theirs.revision, b"")] and reads == []


async def test_a_write_the_watch_delivers_before_its_answer_comes_is_handed_on_as_written(store, monkeypatch):
    """etcd's watch often delivers a transaction's writes before the transaction's answer reaches
    the writer: those are handed on with the writer's object too, not decoded again."""
    real_txn = store._txn

    async def late(compare, success):
        answer = await real_txn(compare, success)
        await asyncio.sleep(0.3)  # the answer comes well after the watch has the writes
        return answer

    after = store.revision
    watching = asyncio.create_task(watch_until(store, "/late/", after, 6))
    await asyncio.sleep(0.1)
    monkeypatch.setattr(store, "_txn", late)
    decoded = []
    record_of = store._record_of
    monkeypatch.setattr(store, "_record_of", lambda kv, place=0: decoded.append(kv.key) or record_of(kv, place))
    objs = [obj(f"l{i}", i=i) for i in range(4)]
    written = await asyncio.gather(*(store.create(f"/late/{i}", o) for i, o in enumerate(objs)))
    updated_obj = {**written[1].obj, "spec": {"x": 1}}
    updated = await store.update("/late/1", updated_obj, written[1].revision)
    other = await store.create("/late/other", obj("other"))
    events = await watching
    assert [e.record for e in events] == [*written, updated, other]
    assert [e.record.obj for e in events[:5]] == [*objs, updated_obj]
    assert all(e.record._obj is o for e, o in zip(events, [*objs, updated_obj]))  # as written: not decoded
    assert decoded == [] and not store._sending and not store._written


async def test_own_writes_no_watch_takes_are_kept_up_to_a_bound(store, monkeypatch):
    monkeypatch.setattr(etcd_backend, "MAX_HANDED_ON", 4)
    written = [await store.create(f"/k/{i}", obj(f"k{i}")) for i in range(10)]
    assert list(store._written.values()) == written[-4:]  # the oldest went
    # A write whose revision a watch delivered already is not kept (the watch will not come back for it).
    store._watched = store.revision // SUB + 1
    await store.update("/k/9", written[9].obj, written[9].revision)
    assert list(store._written.values()) == written[-4:]
    # Nor are the writes after the first of one transaction (they share its etcd revision).
    store._watched = store.revision // SUB + 1
    await asyncio.gather(*(store.update(f"/k/{i}", written[i].obj, written[i].revision) for i in (7, 8)))
    assert list(store._written.values()) == written[-4:]
