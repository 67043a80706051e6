"""The store contract every backend implements (SQLite and etcd).

- Keys are ``/{group}/{resource}/{namespace}/{name}`` strings; values are JSON objects.
- Every write gets a global revision of its own, greater than every earlier write's (SQLite counts
  them one by one; etcd's are not consecutive), which becomes the object's
  ``metadata.resourceVersion``; the value a backend hands back always carries it.
- Writes are compare-and-swap on the revision the caller last saw.
- ``watch(prefix, from_revision)`` delivers every change after ``from_revision`` in revision order,
  with no gap and no duplicate; a revision older than the compaction point raises
  :class:`Compacted`, which the API turns into HTTP 410 Gone.
- An acknowledged write survives ``kill -9`` of the process.

The conformance suite in ``tests/store`` holds every backend to this.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Any, AsyncIterator, Protocol

import msgspec

__all__ = [
    "EventType",
    "Record",
    "Event",
    "ListResult",
    "Store",
    "StoreError",
    "StoreFull",
    "KeyExists",
    "KeyNotFound",
    "Conflict",
    "Compacted",
    "Fenced",
    "Unavailable",
    "prefix_end",
]

_decode = msgspec.json.Decoder().decode


class EventType(str, enum.Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    # Only with ``watch(..., progress=True)``: nothing under the prefix changed up to this revision
    # (a write elsewhere in a store shared with others); the record has no key and no value.
    PROGRESS = "PROGRESS"


class Record(msgspec.Struct, gc=False):
    """One object as stored: its key, revision and JSON (with resourceVersion == revision).

    ``obj`` is the decoded value, filled in lazily; treat it as read-only, since it may be shared.
    Not tracked by Python's cyclic collector (``gc=False``: a record refers to no object that refers
    back to it): the watch cache holds hundreds of thousands of them, which the collector would
    otherwise scan again and again.
    """

    key: str
    revision: int
    value: bytes
    _obj: dict[str, Any] | None = None

    @property
    def obj(self) -> dict[str, Any]:
        if self._obj is None:
            self._obj = _decode(self.value)
        return self._obj


@dataclass(slots=True)
class Event:
    """A change: for DELETED, ``record`` is the last state, with the deletion's revision."""

    type: EventType
    record: Record

    @property
    def revision(self) -> int:
        return self.record.revision

    @property
    def key(self) -> str:
        return self.record.key


@dataclass(frozen=True, slots=True)
class ListResult:
    items: list[Record]
    revision: int  # the revision the list was read at
    more: bool  # True when ``limit`` cut the list; continue after ``items[-1].key``


DEFAULT_MAX_VALUE_BYTES = 1536 * 1024  # etcd's default request limit (1.5 MiB), for both backends


class StoreError(Exception):
    """Base of the store's errors."""


class KeyExists(StoreError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key {key} already exists")
        self.key = key


class KeyNotFound(StoreError):
    def __init__(self, key: str) -> None:
        super().__init__(f"key {key} not found")
        self.key = key


class Conflict(StoreError):
    """The object changed since the revision the caller expected."""

    def __init__(self, key: str, expected: int, actual: int) -> None:
        super().__init__(f"key {key} is at revision {actual}, not {expected}")
        self.key, self.expected, self.actual = key, expected, actual


class Compacted(StoreError):
    """The requested revision is older than the oldest one still kept."""

    def __init__(self, requested: int, compacted: int) -> None:
        super().__init__(
            f"revision {requested} has been compacted (oldest available is {compacted + 1})"
        )
        self.requested, self.compacted = requested, compacted


class Fenced(StoreError):
    """A fenced write found its fence key moved: the writer no longer holds the lease it acted under."""

    def __init__(self, fence_key: str, expected: int, actual: int) -> None:
        super().__init__(f"fence {fence_key} is at revision {actual}, not {expected}: the lease was lost")
        self.fence_key, self.expected, self.actual = fence_key, expected, actual


class TooLarge(StoreError):
    """The value would be larger than the store takes (``max_value_bytes``, as etcd's
    ``--max-request-bytes``); nothing was written."""

    def __init__(self, key: str, size: int, limit: int) -> None:
        super().__init__(f"the object {key} would take {size} bytes; the store takes at most {limit}")
        self.key, self.size, self.limit = key, size, limit


class StoreFull(StoreError):
    """The store is at its space quota (``quota_bytes``; etcd's ``--quota-backend-bytes``):
    creates and updates are refused until deletions and compaction free space; nothing was written."""

    def __init__(self, used: int, quota: int) -> None:
        detail = f"{used} of {quota} bytes used" if quota else "etcd's --quota-backend-bytes reached"
        super().__init__(f"the store is full ({detail})")
        self.used, self.quota = used, quota


class StoreLocked(StoreError, ValueError):
    """Another process serves this SQLite file (a ValueError too: the server's command line turns
    it into one line)."""

    def __init__(self, path: str, holder: str) -> None:
        super().__init__(f"another corral server (pid {holder}) is using {path}: one SQLite store serves one "
                         "server (two would each number revisions on their own); stop that one first, or run "
                         "several servers on etcd (see the README's \"Running three servers\")")
        self.path, self.holder = path, holder


class Unavailable(StoreError):
    """The backend could not be reached (an etcd cluster without quorum, say); the caller may retry.

    A write that fails this way may or may not have been applied."""


def prefix_end(prefix: str) -> str:
    """The smallest string greater than every string that starts with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1) if prefix else "\U0010ffff"


class Store(Protocol):
    """What the API server needs from a backend. All methods are safe to call concurrently."""

    @property
    def revision(self) -> int:
        """The newest revision whose events have been delivered to watchers in this process."""

    @property
    def compacted_revision(self) -> int: ...

    def revision_before(self, writes: int) -> int:
        """A revision at least ``writes`` writes older than :attr:`revision` (0 at the oldest): what
        to compact to, to keep that much history. Revisions need not be consecutive (etcd's batched
        writes share one etcd revision; see :mod:`corral.store.etcd`)."""

    def full(self) -> StoreFull | None:
        """What a write would be refused with now for want of space (the alarm on ``/readyz``)."""

    async def current_revision(self) -> int:
        """The newest revision of the whole store, including writes made by other processes sharing
        it (one round trip for etcd). A read that waits for this revision reads every write that was
        acknowledged before it started, whichever server acknowledged it."""

    async def create(self, key: str, obj: dict[str, Any]) -> Record:
        """Store a new object; raise :class:`KeyExists` if the key holds a live object.

        ``obj`` is owned by the store from here on (it sets ``metadata.resourceVersion`` on it).
        """

    async def update(self, key: str, obj: dict[str, Any], expected_revision: int, *,
                     fence: tuple[str, int] | None = None) -> Record:
        """Replace an object if it is still at ``expected_revision``; else :class:`Conflict`.

        ``fence=(key, revision)``: also only if that key is still at that revision, checked in the same
        transaction; else :class:`Fenced` (a leader's writes, fenced by its Lease)."""

    async def update_many(self, writes: list[tuple[str, dict[str, Any], int]], *,
                          fence: tuple[str, int] | None = None) -> list[Record | StoreError]:
        """:meth:`update` for each ``(key, obj, expected_revision)``, independently: each write's
        :class:`Record`, or the :class:`StoreError` it failed with, in order (one write's conflict
        does not hold back the others). Cheaper than as many calls of :meth:`update` where the backend
        takes writes in batches (the scheduler's bindings)."""

    async def delete(self, key: str, expected_revision: int | None = None) -> Record:
        """Delete; returns the last state at the deletion's revision. :class:`KeyNotFound`."""

    async def get(self, key: str) -> Record | None: ...

    async def list(
        self, prefix: str, *, revision: int = 0, limit: int = 0, start_after: str = ""
    ) -> ListResult:
        """Objects under ``prefix`` as of ``revision`` (0: now), in key order, paged."""

    def watch(self, prefix: str, from_revision: int, *, progress: bool = False,
              last_states: bool = True) -> AsyncIterator[list[Event]]:
        """Batches of events after ``from_revision``, in order; raises :class:`Compacted`.

        ``progress=True`` on a watch of ``"/"``: also PROGRESS events for revisions the backend spent
        on keys that are not this store's (an etcd shared with others), so a follower can tell it has
        seen everything up to :meth:`current_revision`. The watch cache needs this; SQLite has no such
        revisions.

        ``last_states=False``: a DELETED event may carry an empty value instead of the last state, for
        a watcher that holds every object itself (the watch cache). etcd then need not read the last
        state of another writer's delete, one round trip each, which held a burst of deletes back."""

    async def compact(self, revision: int) -> None:
        """Forget history at and before ``revision`` (current state is always kept)."""

    async def close(self) -> None: ...


async def update_each(store: Store, writes: list[tuple[str, dict[str, Any], int]], *,
                      fence: tuple[str, int] | None = None) -> list[Record | StoreError]:
    """:meth:`Store.update_many` as concurrent calls of :meth:`Store.update` (a backend whose writes
    gain nothing from being handed over together)."""
    outcomes = await asyncio.gather(*(store.update(key, obj, expected, fence=fence) for key, obj, expected in writes),
                                    return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, StoreError):
            raise outcome
    return outcomes
