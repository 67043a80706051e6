"""The embedded store: one SQLite file in WAL mode holding a kine-style log.

Design (after k3s' kine):

- One table, ``log``, whose primary key is the revision. Every create, update and delete appends a
  row; the newest row of a key is its current state (``deleted = 1`` rows are tombstones).
- Compare-and-swap: a row records the revision it replaces (``prev_rev``), and a unique index on
  ``(key, prev_rev)`` makes two writers that both start from the same revision collide.
- A list at revision R takes, per key, the newest row at or below R; a watch from revision R reads
  the rows after R, then follows new commits live.
- Compaction deletes rows that were superseded at or before the compaction revision, and
  tombstones; what remains answers every list and watch at a revision after it.

Writes are group-committed: callers enqueue operations, one writer thread applies everything that
is waiting in a single transaction and commits once (with ``synchronous=FULL`` the commit is fsync'd),
then acknowledges each caller. An acknowledged write is therefore on disk and survives ``kill -9``.
Committed events are handed to in-process watchers before callers are acknowledged, so a watcher
never lags behind a reply the caller has already seen.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import fcntl
import os
import queue
import sqlite3
import threading
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

import msgspec

from corral.store.base import (
    Compacted,
    Conflict,
    Event,
    EventType,
    Fenced,
    KeyExists,
    KeyNotFound,
    ListResult,
    DEFAULT_MAX_VALUE_BYTES,
    Record,
    StoreError,
    StoreFull,
    StoreLocked,
    TooLarge,
    prefix_end,
)

__all__ = ["SQLiteStore"]

# SQLite's page cache is per connection and, once filled, stays for the connection's life. Every
# reading thread had its own connection with a 64 MiB cache (the default executor's six threads,
# the event loop's and the writer's): up to 512 MiB that filled slowly as the log moved through
# the file, which a soak saw as RSS climbing for an hour. The writer's cache holds the log's hot
# index pages; reads are rare (the watch cache answers lists and watches) and run on a pool of
# their own, so the whole store keeps at most WRITER + (READ_THREADS + 1) * READER KiB of pages.
_WRITER_CACHE_KIB = 16384
_READER_CACHE_KIB = 4096
_READ_THREADS = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS log (
    rev        INTEGER PRIMARY KEY,
    key        TEXT    NOT NULL,
    created    INTEGER NOT NULL,
    deleted    INTEGER NOT NULL,
    create_rev INTEGER NOT NULL,
    prev_rev   INTEGER NOT NULL,
    value      BLOB    NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS log_key_prev ON log (key, prev_rev);
CREATE INDEX IF NOT EXISTS log_key_rev ON log (key, rev);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""

_LATEST = "SELECT rev, deleted, create_rev, value FROM log WHERE key = ? ORDER BY rev DESC LIMIT 1"  # reads
_MAX_BATCH = 2000
# A batch's rows go in with multi-row INSERTs of up to _INSERT_ROWS rows each. Each statement
# releases and retakes the interpreter's lock once (executemany did so per row), and every
# retake waits for the event loop to let go: fewer statements, fewer hand-offs of the loop.
_INSERT_ROWS = 64
_USED_BYTES = ("SELECT (p.page_count - f.freelist_count) * s.page_size "
               "FROM pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s")
# Measuring the pages in use is a statement too, so it is not done after every commit: only after a
# compaction and after a commit that may have brought the store to its quota. A row adds at most its
# value, its key thrice (the table and two indexes) and a page split per level of each of the three
# B-trees: _ROW_GROWTH bounds the rest generously.
_ROW_GROWTH = 64 * 1024


def _insert(rows: int) -> str:
    return ("INSERT INTO log (rev, key, created, deleted, create_rev, prev_rev, value) VALUES "
            + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * rows))


_INSERT_FULL = _insert(_INSERT_ROWS)


@dataclass(slots=True)
class _Op:
    kind: str  # "create" | "update" | "delete" | "compact"
    key: str
    obj: dict[str, Any] | None
    expected: int
    future: asyncio.Future | _Slot
    fence: tuple[str, int] | None = None


class _Many:
    """One future for several writes (:meth:`SQLiteStore.update_many`): each write's outcome, a
    :class:`Record` or the :class:`StoreError` it failed with, in order, once the last is known."""

    __slots__ = ("future", "outcomes", "left")

    def __init__(self, future: asyncio.Future, count: int) -> None:
        self.future, self.outcomes, self.left = future, [None] * count, count

    def settle(self, index: int, outcome: Any) -> None:
        self.outcomes[index] = outcome
        self.left -= 1
        if not self.left and not self.future.done():
            self.future.set_result(self.outcomes)


class _Slot:
    """One write's place in a :class:`_Many`, answering the writer thread as a future would."""

    __slots__ = ("many", "index", "settled")

    def __init__(self, many: _Many, index: int) -> None:
        self.many, self.index, self.settled = many, index, False

    def done(self) -> bool:
        return self.settled

    def set_result(self, record: Record) -> None:
        self.settled = True
        self.many.settle(self.index, record)

    def set_exception(self, error: BaseException) -> None:
        self.settled = True
        self.many.settle(self.index, error)


@dataclass(slots=True, eq=False)
class _Watcher:
    prefix: str
    pending: collections.deque = field(default_factory=collections.deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)

    def push(self, events: list[Event]) -> None:
        mine = [e for e in events if e.record.key.startswith(self.prefix)]
        if mine:
            self.pending.append(mine)
            self.wakeup.set()


def _used_bytes(conn: sqlite3.Connection) -> int:
    """Bytes of the database in use: its pages less the free ones (what compaction freed is reused)."""
    (used,) = conn.execute(_USED_BYTES).fetchone()  # one statement: one hand-off of the lock
    return used


SYNCHRONOUS_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")


class SQLiteStore:
    """The SQLite backend of the store contract (see :mod:`corral.store.base`)."""

    def __init__(self, path: str, *, synchronous: str = "FULL") -> None:
        if not isinstance(synchronous, str) or synchronous.upper() not in SYNCHRONOUS_MODES:
            # SQLite ignores a PRAGMA value it does not know: a typo must not pass for a setting.
            raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS_MODES)}, got {synchronous!r}")
        self.path = path
        self._synchronous = synchronous.upper()
        self.max_value_bytes = DEFAULT_MAX_VALUE_BYTES  # a larger object is refused (TooLarge); 0: no limit
        self.quota_bytes = 0  # past this many bytes in use, creates and updates are refused (StoreFull); 0: none
        self.used_bytes = 0  # the database's pages in use (not free), as last measured (see _ROW_GROWTH)
        self._unmeasured = 0  # what the rows written since then may at most have added to it
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ops: queue.SimpleQueue[_Op | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []  # every reading connection, closed with the store
        self._read_pool = concurrent.futures.ThreadPoolExecutor(_READ_THREADS, thread_name_prefix="corral-sqlite-read")
        self._revision = 0  # delivered to watchers (event-loop thread)
        self._write_revision = 0  # assigned by the writer thread
        self._compacted = 0
        self._watchers: set[_Watcher] = set()
        self._closed = False
        # The writer thread's view of every key's newest row: (revision, deleted, create revision).
        # It is the only writer, so this is authoritative; the unique (key, prev_rev) index still
        # refuses a conflicting write from anywhere else.
        self._latest: dict[str, tuple[int, bool, int]] = {}
        self._lock_fd = -1  # PATH.lock, held (flock) while this process serves the file

    # --- lifecycle -------------------------------------------------------------------------------------

    @classmethod
    async def open(cls, path: str, *, synchronous: str = "FULL") -> "SQLiteStore":
        store = cls(path, synchronous=synchronous)
        try:
            await store._start()
        except BaseException:  # not a database, say: let go of its lock, so that it can be opened once repaired
            await store.close()
            raise
        return store

    async def _start(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), mode=0o700, exist_ok=True)
        # The store holds every secret of the cluster (the CA key among them): only its owner
        # reads it. SQLite gives the -wal and -shm files the database file's mode.
        os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
        os.chmod(self.path, 0o600)
        self._lock()
        self._loop = asyncio.get_running_loop()
        conn = self._connect()
        try:
            conn.executescript(_SCHEMA)
            self.used_bytes = _used_bytes(conn)
            (max_rev,) = conn.execute("SELECT COALESCE(MAX(rev), 0) FROM log").fetchone()
            row = conn.execute("SELECT value FROM meta WHERE name = 'compact_rev'").fetchone()
            self._compacted = row[0] if row else 0
            self._revision = self._write_revision = max(max_rev, self._compacted)
            self._load_latest(conn)
        finally:
            conn.close()
        self._writer = threading.Thread(target=self._write_loop, name="corral-sqlite-writer", daemon=True)
        self._writer.start()

    def _lock(self) -> None:
        """One process per database file: this one is its only writer (revisions are assigned in
        memory), so a second server on the same file would fork its history. Refused with
        :class:`StoreLocked` naming the process that holds it; the kernel releases the lock when
        that process ends, however it ends."""
        fd = os.open(self.path + ".lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise StoreLocked(self.path, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _load_latest(self, conn: sqlite3.Connection) -> None:
        self._latest = {
            key: (rev, bool(deleted), create_rev)
            for key, rev, deleted, create_rev in conn.execute(
                "SELECT key, rev, deleted, create_rev FROM log WHERE rev IN (SELECT MAX(rev) FROM log GROUP BY key)")
        }

    def _connect(self, cache_kib: int = _WRITER_CACHE_KIB) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute(f"PRAGMA cache_size=-{cache_kib}")
        conn.execute("PRAGMA busy_timeout=30000")
        return conn

    def _reader(self) -> sqlite3.Connection:
        """This thread's reading connection: the event loop's (point reads) or a read pool thread's."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect(_READER_CACHE_KIB)
            self._readers.append(conn)
        return conn

    async def _read(self, fn, *args):
        return await self._loop.run_in_executor(self._read_pool, fn, *args)  # type: ignore[union-attr]

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._ops.put(None)
        if self._writer is not None:
            await asyncio.to_thread(self._writer.join)
        self._read_pool.shutdown(wait=True)
        for conn in self._readers:
            conn.close()
        self._readers.clear()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
        for w in list(self._watchers):
            w.pending.append(None)
            w.wakeup.set()

    # --- properties --------------------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        return self._revision

    @property
    def compacted_revision(self) -> int:
        return self._compacted

    def revision_before(self, writes: int) -> int:
        return max(0, self._revision - writes)

    def full(self) -> StoreFull | None:
        if self.quota_bytes and self.used_bytes >= self.quota_bytes:
            return StoreFull(self.used_bytes, self.quota_bytes)
        return None

    async def current_revision(self) -> int:
        return self._revision  # this process is the only writer

    # --- writes ------------------------------------------------------------------------------------------

    def _submit(self, kind: str, key: str, obj: dict[str, Any] | None, expected: int,
                fence: tuple[str, int] | None = None) -> asyncio.Future:
        if self._closed:
            raise StoreError("the store is closed")
        future = self._loop.create_future()  # type: ignore[union-attr]
        self._ops.put(_Op(kind, key, obj, expected, future, fence))
        return future

    async def create(self, key: str, obj: dict[str, Any]) -> Record:
        return await self._submit("create", key, obj, 0)

    async def update(self, key: str, obj: dict[str, Any], expected_revision: int, *,
                     fence: tuple[str, int] | None = None) -> Record:
        return await self._submit("update", key, obj, expected_revision, fence)

    async def update_many(self, writes: list[tuple[str, dict[str, Any], int]], *,
                          fence: tuple[str, int] | None = None) -> list[Record | StoreError]:
        # Queued together, they go into the writer's next batch together; one future answers them all.
        if self._closed:
            raise StoreError("the store is closed")
        many = _Many(self._loop.create_future(), len(writes))  # type: ignore[union-attr]
        put = self._ops.put
        for index, (key, obj, expected) in enumerate(writes):
            put(_Op("update", key, obj, expected, _Slot(many, index), fence))
        return await many.future if writes else []

    async def delete(self, key: str, expected_revision: int | None = None) -> Record:
        return await self._submit("delete", key, None, expected_revision or 0)

    async def compact(self, revision: int) -> None:
        await self._submit("compact", "", None, revision)

    def _write_loop(self) -> None:
        conn = self._connect()
        encode = msgspec.json.Encoder().encode
        decode = msgspec.json.Decoder().decode
        while True:
            op = self._ops.get()
            if op is None:
                break
            batch = [op]
            stop = False
            while len(batch) < _MAX_BATCH:
                try:
                    nxt = self._ops.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                batch.append(nxt)
            self._run_batch(conn, batch, encode, decode)
            if stop:
                break
        conn.close()

    def _run_batch(self, conn: sqlite3.Connection, batch: list[_Op], encode, decode) -> None:
        """Apply a batch in one transaction: checks against the in-memory latest rows,
        multi-row INSERTs for the new rows, one commit. On failure nothing of it is kept."""
        results: list[tuple[asyncio.Future, Any, BaseException | None]] = []
        events: list[Event] = []
        rows: list[tuple] = []
        pending: dict[int, bytes] = {}  # values written in this batch, not yet inserted
        start = self._write_revision
        rev = start
        compacted: int | None = None
        # A statement is a transaction of its own: a batch whose rows go in with one INSERT needs
        # no BEGIN and COMMIT around it. Each statement hands the interpreter's lock to the event
        # loop and waits to take it back (the loop takes it at every TLS record it reads or writes),
        # so the fewer statements a batch takes, the less the loop and this thread wait on each other.
        # A batch that compacts, or whose rows take several INSERTs, is one explicit transaction.
        transaction = len(batch) > _INSERT_ROWS or any(op.kind == "compact" for op in batch)
        try:
            if transaction:
                conn.execute("BEGIN IMMEDIATE")
            for op in batch:
                try:
                    if op.kind == "compact":
                        compacted = self._compact(conn, op.expected)
                        results.append((op.future, None, None))
                        continue
                    event, row = self._apply(conn, op, rev + 1, encode, decode, pending)
                except StoreError as exc:
                    results.append((op.future, None, exc))
                    continue
                rev += 1
                rows.append(row)
                pending[rev] = row[-1]
                events.append(event)
                results.append((op.future, event.record, None))
            for i in range(0, len(rows), _INSERT_ROWS):
                chunk = rows[i:i + _INSERT_ROWS]
                conn.execute(_INSERT_FULL if len(chunk) == _INSERT_ROWS else _insert(len(chunk)),
                             [v for row in chunk for v in row])
            if transaction:
                conn.execute("COMMIT")
            if compacted is not None or rows and self._may_be_full(rows):
                self.used_bytes, self._unmeasured = _used_bytes(conn), 0
        except Exception as exc:  # the whole transaction failed: nothing of it was written
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            self._write_revision = start
            self._load_latest(conn)  # undo this batch's changes to the in-memory view
            # The unique indexes refuse a row only when a program other than this server wrote the
            # file (past its lock): the rows this server remembers are no longer the newest.
            failure = StoreError(f"write failed: {exc} (the database file was written by another program "
                                 "than this server; stop it and restart the server)"
                                 if isinstance(exc, sqlite3.IntegrityError) else f"write failed: {exc}")
            results = [(op.future, None, failure) for op in batch]
            events, compacted = [], None
        else:
            self._write_revision = rev
        self._loop.call_soon_threadsafe(self._committed, results, events, compacted)  # type: ignore[union-attr]

    def _may_be_full(self, rows: list[tuple]) -> bool:
        """Count what ``rows`` may have added to the pages in use since they were last measured: True
        when the store may have reached its quota (then they are measured again)."""
        self._unmeasured += sum(len(row[1]) * 3 + len(row[-1]) for row in rows) + _ROW_GROWTH * len(rows)
        return bool(self.quota_bytes) and self.used_bytes + self._unmeasured >= self.quota_bytes

    def _apply(self, conn: sqlite3.Connection, op: _Op, rev: int, encode, decode,
               pending: dict[int, bytes]) -> tuple[Event, tuple]:
        if op.fence is not None:
            fence_key, fence_rev = op.fence
            held = self._latest.get(fence_key)
            if held is None or held[1] or held[0] != fence_rev:
                raise Fenced(fence_key, fence_rev, held[0] if held is not None and not held[1] else 0)
        latest = self._latest.get(op.key)
        live = latest is not None and not latest[1]
        if op.kind == "create":
            if live:
                raise KeyExists(op.key)
            obj, prev, create_rev, etype = op.obj, (latest[0] if latest else 0), rev, EventType.ADDED
        else:
            if not live:
                raise KeyNotFound(op.key)
            if op.expected and latest[0] != op.expected:  # type: ignore[index]
                raise Conflict(op.key, op.expected, latest[0])  # type: ignore[index]
            prev, create_rev = latest[0], latest[2]  # type: ignore[index]
            if op.kind == "update":
                obj, etype = op.obj, EventType.MODIFIED
            else:
                value = pending.get(prev)
                if value is None:
                    (value,) = conn.execute("SELECT value FROM log WHERE rev = ?", (prev,)).fetchone()
                obj, etype = decode(value), EventType.DELETED
        obj.setdefault("metadata", {})["resourceVersion"] = str(rev)  # type: ignore[union-attr]
        value = encode(obj)
        deleted = op.kind == "delete"
        if not deleted and self.max_value_bytes and len(value) > self.max_value_bytes:
            raise TooLarge(op.key, len(value), self.max_value_bytes)
        if not deleted and self.quota_bytes and self.used_bytes >= self.quota_bytes:
            # As etcd: the write that crosses the quota is taken, the ones after it are not;
            # deletions still are (they free space once compacted).
            raise StoreFull(self.used_bytes, self.quota_bytes)
        self._latest[op.key] = (rev, deleted, create_rev)
        row = (rev, op.key, int(op.kind == "create"), int(deleted), create_rev, prev, value)
        return Event(etype, Record(op.key, rev, value, obj)), row

    def _compact(self, conn: sqlite3.Connection, revision: int) -> int:
        revision = min(revision, self._write_revision)
        if revision <= self._compacted:
            return self._compacted
        conn.execute(
            "DELETE FROM log WHERE rev <= ?1 AND (deleted = 1 OR rev IN "
            "(SELECT prev_rev FROM log WHERE rev <= ?1 AND prev_rev > 0))",
            (revision,),
        )
        conn.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('compact_rev', ?)", (revision,))
        # Tombstones at or before the compaction point are gone from the log: forget them here too.
        for key in [k for k, (r, deleted, _) in self._latest.items() if deleted and r <= revision]:
            del self._latest[key]
        return revision

    def _committed(self, results, events: list[Event], compacted: int | None) -> None:
        """On the event loop: publish the batch to watchers, then acknowledge the writers."""
        if events:
            self._revision = events[-1].revision
            for w in self._watchers:
                w.push(events)
        if compacted is not None:
            self._compacted = max(self._compacted, compacted)
        for future, value, error in results:
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(value)

    # --- reads -------------------------------------------------------------------------------------------

    async def get(self, key: str) -> Record | None:
        row = self._reader().execute(_LATEST, (key,)).fetchone()
        if row is None or row[1]:
            return None
        return Record(key, row[0], row[3])

    async def list(
        self, prefix: str, *, revision: int = 0, limit: int = 0, start_after: str = ""
    ) -> ListResult:
        revision = revision or self._revision
        return await self._read(self._list, prefix, revision, limit, start_after)

    @staticmethod
    def _check_not_compacted(conn: sqlite3.Connection, revision: int) -> None:
        """Inside a read transaction: refuse a revision the log no longer holds."""
        row = conn.execute("SELECT value FROM meta WHERE name = 'compact_rev'").fetchone()
        if row and revision < row[0]:
            raise Compacted(revision, row[0])

    def _list(self, prefix: str, revision: int, limit: int, start_after: str) -> ListResult:
        conn = self._reader()
        conn.execute("BEGIN")
        try:
            self._check_not_compacted(conn, revision)
            lower, op = (start_after, ">") if start_after > prefix else (prefix, ">=")
            rows = conn.execute(
                "SELECT l.key, l.rev, l.value FROM log l JOIN ("
                f"  SELECT MAX(rev) AS rev FROM log WHERE key {op} ? AND key < ? AND rev <= ? GROUP BY key"
                ") m ON l.rev = m.rev WHERE l.deleted = 0 ORDER BY l.key"
                + (" LIMIT ?" if limit else ""),
                (lower, prefix_end(prefix), revision, *((limit + 1,) if limit else ())),
            ).fetchall()
        finally:
            conn.execute("COMMIT")
        more = bool(limit) and len(rows) > limit
        items = [Record(k, r, v) for k, r, v in (rows[:limit] if more else rows)]
        return ListResult(items, revision, more)

    def _history(self, prefix: str, after: int, upto: int) -> list[Event]:
        conn = self._reader()
        conn.execute("BEGIN")
        try:
            self._check_not_compacted(conn, after)
            rows = conn.execute(
                "SELECT rev, key, created, deleted, value FROM log "
                "WHERE rev > ? AND rev <= ? AND key >= ? AND key < ? ORDER BY rev",
                (after, upto, prefix, prefix_end(prefix)),
            ).fetchall()
        finally:
            conn.execute("COMMIT")
        events = []
        for rev, key, created, deleted, value in rows:
            etype = EventType.DELETED if deleted else EventType.ADDED if created else EventType.MODIFIED
            events.append(Event(etype, Record(key, rev, value)))
        return events

    async def watch(self, prefix: str, from_revision: int, *, progress: bool = False,
                    last_states: bool = True) -> AsyncIterator[list[Event]]:
        if from_revision < self._compacted:
            raise Compacted(from_revision, self._compacted)
        watcher = _Watcher(prefix)
        # Registered before the history read: live events after `upto` queue up meanwhile.
        self._watchers.add(watcher)
        try:
            upto = self._revision
            if from_revision < upto:
                history = await self._read(self._history, prefix, from_revision, upto)
                if history:
                    yield history
            while True:
                while not watcher.pending:
                    watcher.wakeup.clear()
                    await watcher.wakeup.wait()
                batch = watcher.pending.popleft()
                if batch is None:
                    return
                batch = [e for e in batch if e.revision > from_revision]
                if batch:
                    yield batch
        finally:
            self._watchers.discard(watcher)
