"""What only the SQLite backend promises: writes submitted together share one commit, in order."""

from __future__ import annotations

import asyncio

import pytest

from corral.store import EventType, open_store
from tests.store.test_conformance import collect, obj


@pytest.fixture
async def store(tmp_path):
    s = await open_store(f"sqlite://{tmp_path}/state.db")
    yield s
    await s.close()


async def test_writes_to_one_key_that_share_a_commit_apply_in_order(store):
    # Submitted together, these land in one group commit: each must see the one before it.
    created, deleted, again = await asyncio.gather(
        store.create("/k/same", obj("same", v=1)), store.delete("/k/same"), store.create("/k/same", obj("same", v=2)))
    assert created.revision < deleted.revision < again.revision
    assert deleted.obj["v"] == 1
    assert (await store.get("/k/same")).obj["v"] == 2
    history = await collect(store, "/k/same", created.revision - 1, 3)
    assert [e.type for e in history] == [EventType.ADDED, EventType.DELETED, EventType.ADDED]


async def test_revisions_continue_after_everything_was_compacted_and_the_file_reopened(tmp_path):
    path = f"sqlite://{tmp_path}/state.db"
    s = await open_store(path)
    for i in range(5):
        await s.create(f"/k/{i}", obj(str(i)))
    await s.delete("/k/4")
    await s.compact(s.revision)
    last = s.revision
    await s.close()
    s = await open_store(path)
    try:
        assert s.revision == last and s.compacted_revision == last
        assert (await s.create("/k/new", obj("new"))).revision == last + 1
    finally:
        await s.close()


async def test_compaction_leaves_one_row_per_live_key_and_is_remembered(tmp_path):
    import sqlite3

    from corral.store import Compacted

    path = f"sqlite://{tmp_path}/state.db"
    s = await open_store(path)
    a = await s.create("/k/a", obj("a"))
    for i in range(3):
        a = await s.update("/k/a", obj("a", v=i), a.revision)
    await s.create("/k/b", obj("b"))
    await s.delete("/k/b")
    middle = s.revision
    await s.create("/k/c", obj("c"))
    await s.compact(middle)
    await s.compact(middle - 2)  # behind the compaction point: nothing changes
    assert s.compacted_revision == middle
    await s.close()
    with sqlite3.connect(f"{tmp_path}/state.db") as db:
        rows = db.execute("SELECT key, rev FROM log ORDER BY rev").fetchall()
    assert rows == [("/k/a", a.revision), ("/k/c", middle + 1)]
    s = await open_store(path)
    try:
        assert s.compacted_revision == middle
        with pytest.raises(Compacted):
            await s.list("/k/", revision=middle - 1)
        assert [r.key for r in (await s.list("/k/", revision=middle)).items] == ["/k/a"]
    finally:
        await s.close()


async def test_a_closed_store_refuses_writes_with_a_clear_error(tmp_path):
    from corral.store import StoreError

    store = await open_store(f"sqlite://{tmp_path}/closed.db")
    await store.create("/k/a", obj("a"))
    await store.close()
    with pytest.raises(StoreError) as refused:
        await store.create("/k/b", obj("b"))
    assert str(refused.value) == "the store is closed"


async def test_a_store_url_may_be_a_plain_or_home_relative_path_and_other_schemes_are_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    for url, path in (("~/home.db", tmp_path / "home.db"), (str(tmp_path / "plain.db"), tmp_path / "plain.db"),
                      (f"sqlite://{tmp_path}/url.db", tmp_path / "url.db")):
        store = await open_store(url)
        await store.create("/k/a", obj("a"))
        await store.close()
        assert path.is_file(), url
    with pytest.raises(ValueError) as refused:
        await open_store("postgres://db:5432/corral")
    assert str(refused.value) == "unsupported store 'postgres': use sqlite:///path or etcd://host:port"
    assert not (tmp_path / "postgres:").exists()


async def test_one_database_file_serves_one_process_at_a_time(tmp_path):
    """A second store on the same file (a second server on one data directory) would number
    revisions on its own and fork the history: refused, naming the holder, until the first closes."""
    import os

    from corral.store import StoreLocked

    path = str(tmp_path / "one.db")
    from corral.store.sqlite import SQLiteStore

    first = await SQLiteStore.open(path)
    try:
        with pytest.raises(StoreLocked) as refused:
            await SQLiteStore.open(path)
        assert str(refused.value) == (
            f"another corral server (pid {os.getpid()}) is using {path}: one SQLite store serves one server (two "
            "would each number revisions on their own); stop that one first, or run several servers on etcd (see "
            "the README's \"Running three servers\")")
        await first.create("/core/pods/default/a", {"metadata": {"name": "a"}})
    finally:
        await first.close()
    second = await SQLiteStore.open(path)  # released when the first closed (or its process ended)
    try:
        assert (await second.get("/core/pods/default/a")) is not None
    finally:
        await second.close()


async def test_open_store_takes_every_url_form_and_refuses_what_it_cannot_open(tmp_path, monkeypatch):
    for url in (f"sqlite://{tmp_path}/abs.db", str(tmp_path / "plain.db")):
        s = await open_store(url)
        await s.create("/k/a", obj("a"))
        await s.close()
    monkeypatch.setenv("HOME", str(tmp_path))
    s = await open_store("~/home.db")  # ~ is the user's home, as in a shell
    await s.close()
    assert {"abs.db", "plain.db", "home.db"} <= {p.name for p in tmp_path.iterdir()}
    with pytest.raises(ValueError, match="^unsupported store 'mysql': use sqlite:///path or etcd://host:port$"):
        await open_store("mysql://user@host/db?fallback=redis://cache")
    with pytest.raises(ValueError, match=r"^--etcd-cafile, --etcd-certfile and --etcd-keyfile need an etcd store "
                                         r"\(--store etcd://\.\.\.\)$"):
        await open_store(f"sqlite://{tmp_path}/x.db", etcd_tls=object())


async def test_a_synchronous_setting_sqlite_would_ignore_is_refused(tmp_path):
    with pytest.raises(ValueError, match="synchronous must be one of OFF, NORMAL, FULL, EXTRA, got 'FULLY'"):
        await open_store(f"sqlite://{tmp_path}/s.db", synchronous="FULLY")
    s = await open_store(f"sqlite://{tmp_path}/s.db", synchronous="normal")  # any case, as SQLite takes it
    await s.close()


async def test_the_store_is_full_from_the_moment_its_pages_in_use_reach_the_quota(tmp_path):
    from corral.store import StoreFull

    store = await open_store(f"sqlite://{tmp_path}/full.db")
    try:
        await store.create("/k/a", obj("a"))
        used = store.used_bytes
        store.quota_bytes = used + 1
        assert store.full() is None
        store.quota_bytes = used
        full = store.full()
        assert (full.used, full.quota, str(full)) == (used, used, f"the store is full ({used} of {used} bytes used)")
        with pytest.raises(StoreFull):
            await store.create("/k/b", obj("b"))
        store.quota_bytes = 0  # no quota
        assert store.full() is None
    finally:
        await store.close()


def _pages_in_use(path: str) -> int:
    """What the store's quota counts, measured from another connection (every committed page)."""
    import sqlite3

    from corral.store.sqlite import _USED_BYTES

    with sqlite3.connect(path) as db:
        return db.execute(_USED_BYTES).fetchone()[0]


@pytest.mark.parametrize("size, room", [(8192, 256 * 1024), (200 * 1024, 3 * 2**20)],
                         ids=["small objects", "objects larger than a page split could add"])
async def test_a_write_is_refused_exactly_once_the_pages_in_use_reach_the_quota(tmp_path, size, room):
    """The pages in use are not measured after every commit; the store must still take each write
    while there is room (the one that crosses the quota included, as etcd) and refuse every one
    after, as if it had measured every time."""
    from corral.store import StoreFull

    path = str(tmp_path / "quota.db")
    store = await open_store(path)
    try:
        await store.create("/k/first", obj("first"))
        store.quota_bytes = _pages_in_use(path) + room
        for i in range(200):
            before = _pages_in_use(path)
            try:
                await store.create(f"/k/{i}", obj(str(i), data="x" * size))
            except StoreFull:
                assert before >= store.quota_bytes, f"write {i} refused with {before} of {store.quota_bytes} bytes used"
                break
            assert before < store.quota_bytes, f"write {i} taken with {before} of {store.quota_bytes} bytes used"
        else:
            pytest.fail(f"200 writes of {size} bytes never filled {room} bytes")
        assert i > 10  # most of the room was used
    finally:
        await store.close()


async def _writer_held_on(store, blocker, write) -> asyncio.Future:
    """Hold the store's writer on ``write`` (``blocker``, another connection, takes the database's
    write lock): every write sent after it waits in the queue and goes into one batch once the
    blocker lets go. The held write's future."""
    blocker.execute("BEGIN IMMEDIATE")
    held = asyncio.ensure_future(write)
    async with asyncio.timeout(10):
        while not store._ops.empty():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the writer is in its INSERT, waiting for the lock
    return held


@pytest.mark.parametrize("writes", [3, 150], ids=["a batch written by one statement",
                                                  "a batch written by several statements in a transaction"])
async def test_a_batch_whose_write_fails_leaves_nothing_of_itself_and_the_store_goes_on(tmp_path, writes):
    """A write SQLite refuses (a full disk, an I/O error; here a trigger) fails every write of its
    batch, and none of them is kept, whether the batch took one INSERT or several."""
    import sqlite3

    from corral.store import StoreError

    path = str(tmp_path / "fail.db")
    store = await open_store(path)
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        before = (await store.create("/k/plug", obj("plug"))).revision
        # An error of SQLite's own (as a full disk or an I/O error would give): integer overflow.
        blocker.execute("CREATE TRIGGER poison BEFORE INSERT ON log WHEN NEW.key = '/k/poison' "
                        "BEGIN SELECT abs(-9223372036854775808); END")
        held = await _writer_held_on(store, blocker, store.update("/k/plug", obj("plug", v=1), before))
        batch = [asyncio.ensure_future(store.create(f"/k/{i}", obj(str(i)))) for i in range(writes - 1)]
        batch.append(asyncio.ensure_future(store.create("/k/poison", obj("poison"))))
        await asyncio.sleep(0.05)
        blocker.execute("ROLLBACK")
        assert (await held).revision == before + 1
        results = await asyncio.gather(*batch, return_exceptions=True)
        assert all(type(r) is StoreError and str(r) == "write failed: integer overflow" for r in results), results[:3]
        assert [r.key for r in (await store.list("/k/")).items] == ["/k/plug"]
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT COUNT(*) FROM log").fetchone()[0] == 2
        assert (await store.create("/k/after", obj("after"))).revision == before + 2
    finally:
        blocker.close()
        await store.close()


@pytest.mark.parametrize("writes, size", [(1, 20_000), (300, 40)], ids=["one large write", "a batch of many small writes"])
async def test_what_a_commit_may_have_added_to_the_pages_in_use_is_never_underestimated(tmp_path, writes, size):
    """The quota is checked against the pages in use as last measured plus what the commits since may
    at most have added; that count must bound what they did add, however a batch is made up, or a
    full store would take writes."""
    import sqlite3

    path = str(tmp_path / "count.db")
    store = await open_store(path)
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        await store.create("/k/plug", obj("plug"))
        measured, counted = _pages_in_use(path), store._unmeasured
        blocker.execute("BEGIN IMMEDIATE")  # every write below waits, then goes in one batch
        batch = [asyncio.ensure_future(store.create(f"/k/{i}", obj(str(i), data="x" * size))) for i in range(writes)]
        await asyncio.sleep(0.05)
        blocker.execute("ROLLBACK")
        await asyncio.gather(*batch)
        grown = _pages_in_use(path) - measured
        assert grown > 0 and store._unmeasured - counted >= grown  # no quota: counted, never measured again
    finally:
        blocker.close()
        await store.close()


async def test_many_lists_at_once_open_no_more_reading_connections_than_the_read_pool_has(store):
    """Each reading connection keeps its own page cache: the store's memory is bounded by the
    writer's, the event loop's and one per read thread, however many lists run at once."""
    from corral.store.sqlite import _READ_THREADS

    await store.create("/k/one", obj("one"))
    await store.get("/k/one")  # the event loop's own, for point reads
    results = await asyncio.gather(*(store.list("/k/") for _ in range(40)))
    assert all(len(r.items) == 1 for r in results)
    assert len(store._readers) <= _READ_THREADS + 1


async def test_the_stores_files_are_its_owners_alone_and_the_lock_file_names_the_process_serving_it(tmp_path):
    """The store holds every secret of the cluster (the CA key among them): a directory it makes for
    itself, the database and its lock file are readable by their owner alone, whatever the umask; the
    lock file beside the database says which process serves it."""
    import os
    import stat

    from corral.store.sqlite import SQLiteStore

    path = tmp_path / "made" / "state.db"
    umask = os.umask(0o022)
    try:
        store = await SQLiteStore.open(str(path))
    finally:
        os.umask(umask)
    try:
        def mode(p) -> int:
            return stat.S_IMODE(os.stat(p).st_mode)

        assert (mode(path.parent), mode(path), mode(f"{path}.lock")) == (0o700, 0o600, 0o600)
        assert (path.parent / "state.db.lock").read_text() == f"{os.getpid()}\n"
        assert store.revision == store.compacted_revision == 0  # a new store: nothing written, nothing compacted
        assert (await store.create("/core/pods/default/a", obj("a"))).revision == 1
    finally:
        await store.close()


def test_a_program_that_never_closes_its_store_still_exits(tmp_path):
    """The writer thread must not keep the interpreter alive: a script that opens a store and ends
    without closing it exits (what it wrote is committed already)."""
    import subprocess
    import sys

    from corral.testing.process import child_env

    code = ("import asyncio\nfrom corral.store.sqlite import SQLiteStore\n"
            "async def main():\n"
            f"    store = await SQLiteStore.open({str(tmp_path / 'state.db')!r})\n"
            "    await store.create('/core/pods/default/a', {'metadata': {'name': 'a'}})\n"
            "asyncio.run(main())\nprint('ended')\n")
    # child_env: the script imports the corral this test runs (under mutation testing, the mutated copy)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=child_env())
    assert (done.returncode, done.stdout) == (0, "ended\n"), done.stderr


async def test_a_store_closed_before_it_was_opened_closes_nothing_else(tmp_path):
    """close() on a store whose start never ran (or never got to its lock) holds no lock file to
    close: it must leave the process's descriptors alone (standard output is descriptor 1)."""
    import os

    from corral.store.sqlite import SQLiteStore

    store = SQLiteStore(str(tmp_path / "never.db"))
    await store.close()
    os.fstat(1)  # still open
    assert not (tmp_path / "never.db.lock").exists()


async def test_writes_sent_with_a_compaction_are_all_answered(store):
    """A compaction and writes waiting at the same moment go in one batch: every write after the
    compaction is applied and answered too."""
    for i in range(3):
        await store.create(f"/k/{i}", obj(str(i)))
    created = await asyncio.wait_for(asyncio.gather(
        store.compact(store.revision), *(store.create(f"/k/new-{i}", obj(f"new-{i}")) for i in range(3))), 10)
    assert [r.revision for r in created[1:]] == [4, 5, 6]
    assert store.compacted_revision == 3


async def test_a_compaction_that_fails_midway_removes_nothing(store, monkeypatch):
    """Compaction deletes old rows and records how far it went in one transaction: if it fails after
    deleting, the rows come back with the rollback and the recorded revision stays."""
    import sqlite3

    record = await store.create("/k/a", obj("a"))
    for i in range(3):
        record = await store.update("/k/a", obj("a", n=i), record.revision)
    real = store._compact

    def fails_after_deleting(conn, revision):
        real(conn, revision)
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "_compact", fails_after_deleting)
    with pytest.raises(Exception, match="write failed: disk I/O error"):
        await store.compact(record.revision)
    monkeypatch.undo()
    assert store.compacted_revision == 0
    conn = store._reader()
    assert conn.execute("SELECT COUNT(*) FROM log").fetchone()[0] == 4  # the create and its three updates


async def test_a_file_that_is_not_a_database_is_refused_and_opens_once_repaired(tmp_path):
    """A store that fails to open lets go of its file's lock: the same process opens it once repaired."""
    import sqlite3

    from corral.store.sqlite import SQLiteStore

    path = tmp_path / "broken.db"
    path.write_bytes(b"not a database, " * 512)
    with pytest.raises(sqlite3.DatabaseError, match="file is not a database"):
        await SQLiteStore.open(str(path))
    path.unlink()
    store = await SQLiteStore.open(str(path))
    try:
        assert (await store.create("/k/a", obj("a"))).revision == 1
    finally:
        await store.close()


async def test_a_write_refused_because_another_program_wrote_the_file_says_so_and_keeps_nothing(tmp_path):
    """Only this server writes its file (the lock keeps other servers out); a program that writes it
    anyway takes the row this server was about to write. That write and the others of its batch fail
    with an error that says what happened, and none of them is kept."""
    import sqlite3

    from corral.store import Conflict, StoreError

    path = str(tmp_path / "foreign.db")
    store = await open_store(path)
    try:
        made = await store.create("/k/a", obj("a"))
        with sqlite3.connect(path) as other:  # the next revision, a change of /k/a, written past the lock
            other.execute("INSERT INTO log (rev, key, created, deleted, create_rev, prev_rev, value) "
                          "VALUES (2, '/k/a', 0, 0, 1, 1, x'7b7d')")
        results = await asyncio.gather(store.update("/k/a", obj("a", v=2), made.revision),
                                       store.create("/k/b", obj("b")), return_exceptions=True)
        for refused in results:
            assert type(refused) is StoreError and not isinstance(refused, Conflict), refused
            assert str(refused).startswith("write failed: UNIQUE constraint failed: log.")
            assert str(refused).endswith("(the database file was written by another program than this server; "
                                         "stop it and restart the server)")
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT rev, key FROM log ORDER BY rev").fetchall() == [(1, "/k/a"), (2, "/k/a")]
    finally:
        await store.close()


async def test_a_writer_that_gives_up_leaves_the_others_of_its_batch_answered(tmp_path):
    """A client that goes away while its write waits for the commit (its request cancelled) does not
    keep the writes committed with it from being answered."""
    import sqlite3

    path = str(tmp_path / "gone.db")
    store = await open_store(path)
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        held = await _writer_held_on(store, blocker, store.create("/k/held", obj("held")))
        gone = asyncio.ensure_future(store.create("/k/gone", obj("gone")))
        after = asyncio.ensure_future(store.create("/k/after", obj("after")))
        await asyncio.sleep(0.05)
        gone.cancel()
        await asyncio.sleep(0)
        blocker.execute("ROLLBACK")
        await asyncio.wait_for(held, 10)
        assert (await asyncio.wait_for(after, 10)).key == "/k/after"
        assert gone.cancelled()
    finally:
        blocker.close()
        await store.close()
