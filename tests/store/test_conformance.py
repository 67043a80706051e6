"""The store contract, checked against every backend: SQLite and a real etcd the tests start."""

from __future__ import annotations

import asyncio
import random
import uuid

import msgspec
import pytest

from corral.store import (DEFAULT_MAX_VALUE_BYTES, Compacted, Conflict, EventType, Fenced, KeyExists, KeyNotFound,
                          TooLarge, open_store)


@pytest.fixture(params=["sqlite", "etcd"])
def opener(request, tmp_path):
    """Opens the backend under test; calling it again opens the same state anew."""
    if request.param == "sqlite":
        return lambda: open_store(f"sqlite://{tmp_path}/state.db")
    url = request.getfixturevalue("etcd").url
    root = f"/test-{uuid.uuid4().hex[:12]}"  # one etcd for the module; each test its own keys
    return lambda: open_store(url, root=root)


@pytest.fixture
async def store(opener):
    s = await opener()
    yield s
    await s.close()


def obj(name: str, **extra) -> dict:
    return {"metadata": {"name": name}, **extra}


async def collect(store, prefix: str, after: int, count: int, timeout: float = 5.0):
    events = []

    async def run():
        async for batch in store.watch(prefix, after):
            events.extend(batch)
            if len(events) >= count:
                return

    await asyncio.wait_for(run(), timeout)
    return events


async def test_every_write_gets_a_revision_past_every_earlier_one_and_it_is_the_resource_version(store):
    a = await store.create("/core/pods/default/a", obj("a"))
    b = await store.create("/core/pods/default/b", obj("b"))
    c = await store.update("/core/pods/default/a", obj("a", spec={"x": 1}), a.revision)
    assert a.revision < b.revision < c.revision <= store.revision
    assert c.obj["metadata"]["resourceVersion"] == str(c.revision)
    got = await store.get("/core/pods/default/a")
    assert got.revision == c.revision and got.obj["spec"] == {"x": 1}
    assert store.revision_before(0) == store.revision
    # Compacted to two writes back, history holds the last two writes (after that revision) and none before.
    assert a.revision <= store.revision_before(2) < b.revision


async def test_creating_an_existing_key_fails_and_writes_nothing(store):
    await store.create("/k/a", obj("a"))
    rev = store.revision
    with pytest.raises(KeyExists) as refused:
        await store.create("/k/a", obj("a"))
    assert refused.value.key == "/k/a" and str(refused.value) == "key /k/a already exists"
    assert store.revision == rev


async def test_update_with_a_stale_revision_is_a_conflict(store):
    a = await store.create("/k/a", obj("a"))
    b = await store.update("/k/a", obj("a", v=1), a.revision)
    with pytest.raises(Conflict) as refused:
        await store.update("/k/a", obj("a", v=2), a.revision)
    assert (refused.value.key, refused.value.expected, refused.value.actual) == ("/k/a", a.revision, b.revision)
    assert str(refused.value) == f"key /k/a is at revision {b.revision}, not {a.revision}"
    got = await store.get("/k/a")
    assert (got.key, got.revision, got.obj["v"]) == ("/k/a", b.revision, 1)


async def test_an_update_of_a_missing_key_with_any_revision_creates_nothing(store):
    for revision in (1, 2, 999, 1000, 10**9):  # small ones too: no write has them, and none may match
        with pytest.raises(KeyNotFound) as refused:
            await store.update("/k/gone", obj("gone"), revision)
        assert refused.value.key == "/k/gone"
        assert await store.get("/k/gone") is None


async def test_an_update_without_a_revision_needs_the_key_to_exist(store):
    with pytest.raises(KeyNotFound) as refused:
        await store.update("/k/a", obj("a"), 0)
    assert refused.value.key == "/k/a" and str(refused.value) == "key /k/a not found"
    assert await store.get("/k/a") is None
    a = await store.create("/k/a", obj("a"))
    b = await store.update("/k/a", obj("a", v=1), 0)
    assert (b.key, b.obj["v"]) == ("/k/a", 1) and b.revision > a.revision


async def test_what_is_stored_names_its_own_revision_whatever_the_writer_sent(store):
    # A stale resourceVersion in the written object, or no metadata at all: the record read back
    # carries its revision, and the rest of the object exactly as written.
    written = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "resourceVersion": "999"},
               "spec": {"template": {"metadata": {"labels": {"x": "1"}}}}}
    a = await store.create("/k/a", dict(written, metadata=dict(written["metadata"])))
    got = await store.get("/k/a")
    expected = dict(written, metadata={"name": "a", "resourceVersion": str(a.revision)})
    assert got.obj == expected and a.obj == expected and msgspec.json.decode(a.value) == expected
    bare = await store.create("/k/bare", {"kind": "Thing", "data": 1})
    assert (await store.get("/k/bare")).obj == {"kind": "Thing", "data": 1,
                                                "metadata": {"resourceVersion": str(bare.revision)}}
    assert msgspec.json.decode(bare.value) == bare.obj


async def test_of_concurrent_writers_from_one_revision_exactly_one_wins(store):
    a = await store.create("/k/a", obj("a"))
    results = await asyncio.gather(
        *(store.update("/k/a", obj("a", writer=i), a.revision) for i in range(20)),
        return_exceptions=True,
    )
    winners = [r for r in results if not isinstance(r, Exception)]
    assert len(winners) == 1
    assert all(isinstance(r, Conflict) for r in results if isinstance(r, Exception))


async def test_delete_returns_the_last_state_and_missing_keys_are_not_found(store):
    a = await store.create("/k/a", obj("a", v=7))
    gone = await store.delete("/k/a")
    assert gone.revision > a.revision and gone.obj["v"] == 7
    assert await store.get("/k/a") is None
    assert gone.key == "/k/a" and msgspec.json.decode(gone.value)["metadata"]["resourceVersion"] == str(gone.revision)
    with pytest.raises(KeyNotFound) as refused:
        await store.delete("/k/a")
    assert refused.value.key == "/k/a"
    with pytest.raises(KeyNotFound) as refused:
        await store.update("/k/a", obj("a"), gone.revision)
    assert refused.value.key == "/k/a"
    again = await store.create("/k/a", obj("a", v=8))
    assert again.obj["v"] == 8


async def test_delete_with_a_stale_revision_is_a_conflict(store):
    a = await store.create("/k/a", obj("a"))
    b = await store.update("/k/a", obj("a", v=1), a.revision)
    with pytest.raises(Conflict) as refused:
        await store.delete("/k/a", a.revision)
    assert (refused.value.key, refused.value.expected, refused.value.actual) == ("/k/a", a.revision, b.revision)
    assert (await store.get("/k/a")).revision == b.revision


async def test_list_is_in_key_order_under_a_prefix_and_pages_at_one_revision(store):
    for i in range(25):
        await store.create(f"/core/pods/ns/p{i:02d}", obj(f"p{i:02d}"))
    await store.create("/core/nodes/n1", obj("n1"))
    first = await store.list("/core/pods/", limit=10)
    assert [r.key for r in first.items] == [f"/core/pods/ns/p{i:02d}" for i in range(10)]
    assert first.more
    # Changes after the first page do not show in later pages of the same list.
    await store.delete("/core/pods/ns/p15")
    await store.create("/core/pods/ns/p99", obj("p99"))
    keys = [r.key for r in first.items]
    page = first
    while page.more:
        page = await store.list("/core/pods/", revision=first.revision, limit=10, start_after=keys[-1])
        keys += [r.key for r in page.items]
    assert keys == [f"/core/pods/ns/p{i:02d}" for i in range(25)]
    now = await store.list("/core/pods/")
    assert "/core/pods/ns/p15" not in [r.key for r in now.items]
    assert "/core/pods/ns/p99" in [r.key for r in now.items]


async def test_pages_end_exactly_and_keep_keys_that_extend_the_last_key_seen(store):
    for key in ("/k/p1", "/k/p1A", "/k/p10", "/k/p2"):
        await store.create(key, obj(key))
    await store.create("/l/after", obj("after"))  # sorts after the prefix: never listed
    keys, page = [], await store.list("/k/", limit=1)
    keys += [r.key for r in page.items]
    while page.more:
        page = await store.list("/k/", revision=page.revision, limit=1, start_after=keys[-1])
        keys += [r.key for r in page.items]
    assert keys == ["/k/p1", "/k/p10", "/k/p1A", "/k/p2"]
    whole = await store.list("/k/", limit=4)  # exactly the limit: nothing more to fetch
    assert [r.key for r in whole.items] == keys and not whole.more


async def test_watch_from_a_past_revision_replays_history_then_follows_live(store):
    start = store.revision
    a = await store.create("/w/a", obj("a"))
    await store.update("/w/a", obj("a", v=1), a.revision)
    await store.create("/other/x", obj("x"))
    await store.create("/x/after", obj("after"))  # both sides of the prefix: not watched
    gone = await store.delete("/w/a")
    task = asyncio.create_task(collect(store, "/w/", start, 4))
    await asyncio.sleep(0.05)
    await store.create("/w/b", obj("b"))
    events = await task
    assert [(e.type, e.key) for e in events] == [
        (EventType.ADDED, "/w/a"), (EventType.MODIFIED, "/w/a"),
        (EventType.DELETED, "/w/a"), (EventType.ADDED, "/w/b"),
    ]
    # A deletion hands over the last state, at the deletion's revision.
    assert events[2].record.obj == {"metadata": {"name": "a", "resourceVersion": str(gone.revision)}, "v": 1}


async def test_watch_under_concurrent_writers_has_no_gap_and_no_duplicate(store):
    start = store.revision
    n_writers, per_writer = 8, 60
    watchers = [asyncio.create_task(collect(store, "/c/", start, n_writers * per_writer, 20))
                for _ in range(3)]

    written = []

    async def writer(w: int) -> None:
        for i in range(per_writer):
            key = f"/c/w{w}-{i % 5}"
            current = await store.get(key)
            try:
                if current is None:
                    written.append(await store.create(key, obj(key)))
                else:
                    written.append(await store.update(key, obj(key, i=i), current.revision))
            except (Conflict, KeyExists):  # pragma: no cover - keys are per writer
                raise
            await asyncio.sleep(random.random() / 1000)

    await asyncio.gather(*(writer(w) for w in range(n_writers)))
    # A late watcher from the start sees exactly the same sequence from history.
    late = await collect(store, "/c/", start, n_writers * per_writer)
    expected = sorted((r.revision, r.key, r.value) for r in written)
    for events in [await t for t in watchers] + [late]:
        revs = [e.revision for e in events]
        assert revs == sorted(set(revs)), "out of order or duplicated"
        assert [(e.revision, e.key, e.record.value) for e in events] == expected, "a gap, or not what was written"


async def test_compaction_keeps_current_state_and_makes_old_revisions_fail_distinctly(store):
    a = await store.create("/k/a", obj("a"))
    b = await store.create("/k/b", obj("b"))
    for i in range(5):
        a = await store.update("/k/a", obj("a", v=i), a.revision)
    await store.delete("/k/b")
    mark = store.revision
    await store.compact(mark)
    assert store.compacted_revision == mark
    with pytest.raises(Compacted):
        async with asyncio.timeout(10):  # must fail at once, not wait for events
            async for _ in store.watch("/k/", b.revision):
                pass
    with pytest.raises(Compacted):
        await store.list("/k/", revision=b.revision)
    # The boundary, exactly: one revision before the compaction point is gone; the point itself is readable.
    with pytest.raises(Compacted) as refused:
        await store.list("/k/", revision=mark - 1)
    assert (refused.value.requested, refused.value.compacted) == (mark - 1, mark)
    assert str(refused.value) == f"revision {mark - 1} has been compacted (oldest available is {mark + 1})"
    with pytest.raises(Compacted) as refused:
        async with asyncio.timeout(10):
            async for _ in store.watch("/k/", mark - 1):
                pass
    assert (refused.value.requested, refused.value.compacted) == (mark - 1, mark)
    assert [r.key for r in (await store.list("/k/", revision=mark)).items] == ["/k/a"]
    listed = await store.list("/k/")
    assert [(r.key, r.obj.get("v")) for r in listed.items] == [("/k/a", 4)]
    # Watching from the compaction point itself still works, replaying what came after it.
    a = await store.update("/k/a", obj("a", v=8), a.revision)
    task = asyncio.create_task(collect(store, "/k/", mark, 2))
    await asyncio.sleep(0.05)
    await store.update("/k/a", obj("a", v=9), a.revision)
    assert [(e.type, e.record.obj["v"]) for e in await task] == [(EventType.MODIFIED, 8), (EventType.MODIFIED, 9)]


async def test_state_and_revisions_survive_reopening(opener):
    s = await opener()
    recs = [await s.create(f"/k/{i}", obj(str(i))) for i in range(10)]
    await s.delete("/k/9")
    last = s.revision
    await s.close()
    s = await opener()
    try:
        assert s.revision >= last
        listed = await s.list("/k/")
        assert [(r.key, r.revision) for r in listed.items] == sorted(
            (r.key, r.revision) for r in recs[:9]
        )
        nxt = await s.create("/k/new", obj("new"))
        assert nxt.revision > last
        again = await s.create("/k/9", obj("9"))  # deleted before the store was closed: free again
        assert again.revision > nxt.revision
    finally:
        await s.close()




async def test_a_fenced_update_lands_only_while_the_fence_key_is_where_the_writer_left_it(store):
    lease = await store.create("/coordination.k8s.io/leases/corral-system/leader", obj("leader"))
    pod = await store.create("/core/pods/default/p", obj("p"))
    fence = (lease.key, lease.revision)
    bound = await store.update(pod.key, obj("p", spec={"nodeName": "n1"}), pod.revision, fence=fence)
    assert bound.obj["spec"]["nodeName"] == "n1"

    taken = await store.update(lease.key, obj("leader", spec={"holderIdentity": "other"}), lease.revision)
    with pytest.raises(Fenced) as refused:
        await store.update(pod.key, obj("p", spec={"nodeName": "n2"}), bound.revision, fence=fence)
    assert refused.value.actual == taken.revision
    assert (await store.get(pod.key)).obj["spec"]["nodeName"] == "n1"  # nothing written

    await store.delete(lease.key)
    with pytest.raises(Fenced) as refused:
        await store.update(pod.key, obj("p", spec={"nodeName": "n3"}), bound.revision, fence=(lease.key, taken.revision))
    assert (refused.value.fence_key, refused.value.expected, refused.value.actual) == (lease.key, taken.revision, 0)
    assert str(refused.value) == f"fence {lease.key} is at revision 0, not {taken.revision}: the lease was lost"


async def test_update_many_writes_each_independently_and_answers_each_in_order(store):
    a = await store.create("/core/pods/default/a", obj("a"))
    b = await store.create("/core/pods/default/b", obj("b"))
    moved = await store.update(b.key, obj("b", v=1), b.revision)  # b's revision is now stale
    outcomes = await store.update_many([
        (a.key, obj("a", spec={"nodeName": "n1"}), a.revision),
        (b.key, obj("b", spec={"nodeName": "n1"}), b.revision),
        ("/core/pods/default/gone", obj("gone"), a.revision),
    ])
    assert len(outcomes) == 3
    assert outcomes[0].key == a.key and outcomes[0].obj["spec"] == {"nodeName": "n1"}
    assert outcomes[0].obj["metadata"]["resourceVersion"] == str(outcomes[0].revision) and outcomes[0].revision > a.revision
    assert isinstance(outcomes[1], Conflict) and outcomes[1].actual == moved.revision
    assert isinstance(outcomes[2], KeyNotFound) and outcomes[2].key == "/core/pods/default/gone"
    # The one that landed is stored and watched; the two refused changed nothing.
    assert (await store.get(a.key)).obj["spec"] == {"nodeName": "n1"}
    assert (await store.get(b.key)).obj == {"metadata": {"name": "b", "resourceVersion": str(moved.revision)}, "v": 1}
    assert await store.get("/core/pods/default/gone") is None
    assert [(e.key, e.revision) for e in await collect(store, "/core/pods/", moved.revision, 1)] == [
        (a.key, outcomes[0].revision)]
    assert await store.update_many([]) == []


async def test_update_many_under_a_fence_lands_nothing_once_the_fence_moved(store):
    lease = await store.create("/coordination.k8s.io/leases/corral-system/leader", obj("leader"))
    pods = [await store.create(f"/core/pods/default/p{i}", obj(f"p{i}")) for i in range(3)]
    fence = (lease.key, lease.revision)
    await store.update(lease.key, obj("leader", spec={"holderIdentity": "other"}), lease.revision)
    outcomes = await store.update_many([(p.key, obj(p.key, spec={"nodeName": "n1"}), p.revision) for p in pods],
                                       fence=fence)
    assert all(isinstance(o, Fenced) for o in outcomes)
    assert [(await store.get(p.key)).obj.get("spec") for p in pods] == [None] * 3


async def test_current_revision_includes_every_acknowledged_write(store):
    before = await store.current_revision()
    a = await store.create("/core/pods/default/a", obj("a"))
    assert before < a.revision <= await store.current_revision()


async def test_a_watch_from_a_revision_not_reached_yet_starts_after_it(store):
    start = store.revision
    task = asyncio.create_task(collect(store, "/f/", start + 1, 1))
    await asyncio.sleep(0.05)
    await store.create("/f/at-the-revision", obj("a"))  # start + 1: not after it
    later = await store.create("/f/after-it", obj("b"))
    assert [(e.key, e.revision) for e in await task] == [("/f/after-it", later.revision)]


def test_a_prefix_ends_just_past_its_last_character_and_no_prefix_at_the_top():
    from corral.store.base import prefix_end

    assert prefix_end("/core/pods/") == "/core/pods0"
    assert prefix_end("/k/p1") == "/k/p2"
    assert prefix_end("") == "\U0010ffff"


async def test_an_object_over_the_size_limit_is_refused_and_nothing_is_written(store):
    assert store.max_value_bytes == DEFAULT_MAX_VALUE_BYTES == 1536 * 1024  # etcd's own default
    store.max_value_bytes = 4096
    small = await store.create("/k/a", obj("a", data="x" * 100))
    with pytest.raises(TooLarge) as refused:
        await store.create("/k/b", obj("b", data="x" * 5000))
    assert refused.value.limit == 4096 and refused.value.size > 4096
    size_of_b = refused.value.size
    assert str(refused.value) == f"the object /k/b would take {refused.value.size} bytes; the store takes at most 4096"
    with pytest.raises(TooLarge) as refused:
        await store.update("/k/a", obj("a", data="x" * 5000), small.revision)
    assert refused.value.key == "/k/a"
    assert await store.get("/k/b") is None
    assert (await store.get("/k/a")).revision == small.revision and store.revision_before(1) < small.revision
    await store.delete("/k/a")  # a delete is never refused for size
    store.max_value_bytes = size_of_b  # exactly at the limit: taken
    assert (await store.create("/k/b", obj("b", data="x" * 5000))).obj["data"] == "x" * 5000
