"""The etcd backend of the store contract (see :mod:`corral.store.base`), through aetcd.

- Keys live under a root prefix (``/corral`` by default), so one etcd can serve several clusters or
  test runs; the store's revisions are etcd's.
- Values are stored without ``metadata.resourceVersion``; a record read back gets it from the key's
  ``mod_revision`` (as Kubernetes' etcd3 storage does), so the contract holds: the value a record
  carries always names its own revision.
- Writes are etcd transactions comparing the key's ``create_revision`` (create) or ``mod_revision``
  (update, delete).
- Lists at a revision use etcd's range with ``revision`` and ``limit``; watches start at
  ``from_revision + 1`` with ``prev_kv`` so a DELETED event carries the last state.
- A revision etcd has compacted away raises :class:`Compacted` (→ HTTP 410).
"""

from __future__ import annotations

from typing import Any, AsyncIterator

import msgspec

from corral.store.base import (
    Compacted,
    Conflict,
    Event,
    EventType,
    KeyExists,
    KeyNotFound,
    ListResult,
    Record,
    prefix_end,
)

__all__ = ["EtcdStore", "parse_endpoints"]

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode
MAX_MESSAGE = 256 * 1024 * 1024  # large lists come back in one gRPC message


def parse_endpoints(url: str) -> list[tuple[str, int]]:
    """``etcd://h1:2379,h2:2379`` → [(h1, 2379), (h2, 2379)]."""
    rest = url[len("etcd://"):] if url.startswith("etcd://") else url
    out = []
    for part in rest.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"etcd endpoint must be HOST:PORT, got {part.strip()!r} in {url!r}")
        out.append((host, int(port)))
    if not out:
        raise ValueError(f"no etcd endpoint in {url!r}")
    return out


def _with_revision(value: bytes, revision: int) -> tuple[bytes, dict[str, Any]]:
    obj = _decode(value)
    obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
    return _encode(obj), obj


def _without_revision(obj: dict[str, Any]) -> bytes:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
    return _encode(obj)


class EtcdStore:
    def __init__(self, endpoints: list[tuple[str, int]], *, root: str = "/corral") -> None:
        self.endpoints = endpoints
        self.root = root.rstrip("/")
        self._client = None
        self._revision = 0
        self._compacted = 0

    @classmethod
    async def open(cls, url: str, *, root: str = "/corral") -> "EtcdStore":
        store = cls(parse_endpoints(url), root=root)
        await store._connect()
        return store

    async def _connect(self) -> None:
        import aetcd

        last: Exception | None = None
        for host, port in self.endpoints:  # the first member that answers
            client = aetcd.Client(host=host, port=port, timeout=30, options={
                "grpc.max_receive_message_length": MAX_MESSAGE, "grpc.max_send_message_length": MAX_MESSAGE})
            try:
                await client.connect()
                await client.status()
                self._client = client
                self._revision = await self._current_revision()
                return
            except Exception as exc:  # try the next member
                last = exc
                await client.close()
        raise ConnectionError(f"no etcd member answered at {self.endpoints}: {last}")

    async def _current_revision(self) -> int:
        from aetcd import rpc

        response = await self._client.kvstub.Range(rpc.RangeRequest(key=self._k("/"), range_end=self._k(prefix_end("/")),
                                                                    count_only=True), timeout=30)
        return int(response.header.revision)

    def _k(self, key: str) -> bytes:
        return (self.root + key).encode()

    def _unk(self, key: bytes) -> str:
        return key.decode()[len(self.root):]

    @property
    def revision(self) -> int:
        return self._revision

    @property
    def compacted_revision(self) -> int:
        return self._compacted

    def _seen(self, revision: int) -> None:
        if revision > self._revision:
            self._revision = revision

    # --- writes --------------------------------------------------------------------------------------

    async def _txn(self, compare: list, success: list) -> tuple[bool, int]:
        """One etcd transaction; (succeeded, the store revision it left: the write's own)."""
        from aetcd import rpc

        c = self._client
        request = rpc.TxnRequest(compare=[x.build_message() for x in compare],
                                 success=c._ops_to_requests(success), failure=[])
        response = await c.kvstub.Txn(request, timeout=30, metadata=c.metadata)
        revision = int(response.header.revision)
        if response.succeeded:
            self._seen(revision)
        return bool(response.succeeded), revision

    def _record(self, key: str, obj: dict[str, Any], revision: int) -> Record:
        obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
        return Record(key, revision, _encode(obj), obj)

    async def create(self, key: str, obj: dict[str, Any]) -> Record:
        t, k = self._client.transactions, self._k(key)
        ok, revision = await self._txn([t.create(k) == 0], [t.put(k, _without_revision(obj))])
        if not ok:
            raise KeyExists(key)
        return self._record(key, obj, revision)

    async def update(self, key: str, obj: dict[str, Any], expected_revision: int) -> Record:
        t, k = self._client.transactions, self._k(key)
        guard = (t.mod(k) == expected_revision) if expected_revision else (t.version(k) > 0)
        ok, revision = await self._txn([guard], [t.put(k, _without_revision(obj))])
        if not ok:
            current = await self._client.get(k)
            if current is None:
                raise KeyNotFound(key)
            raise Conflict(key, expected_revision, int(current.mod_revision))
        return self._record(key, obj, revision)

    async def delete(self, key: str, expected_revision: int | None = None) -> Record:
        t, k = self._client.transactions, self._k(key)
        for _ in range(8):
            current = await self._client.get(k)
            if current is None:
                raise KeyNotFound(key)
            if expected_revision and int(current.mod_revision) != expected_revision:
                raise Conflict(key, expected_revision, int(current.mod_revision))
            ok, revision = await self._txn([t.mod(k) == int(current.mod_revision)], [t.delete(k)])
            if ok:  # the last state, at the deletion's revision
                value, obj = _with_revision(current.value, revision)
                return Record(key, revision, value, obj)
        raise Conflict(key, expected_revision or 0, -1)

    async def compact(self, revision: int) -> None:
        from aetcd.exceptions import RevisionCompactedError

        try:
            await self._client.compact(revision, physical=True)
        except RevisionCompactedError:
            pass
        self._compacted = max(self._compacted, revision)

    # --- reads -------------------------------------------------------------------------------------------

    async def get(self, key: str) -> Record | None:
        got = await self._client.get(self._k(key))
        if got is None:
            return None
        revision = int(got.mod_revision)
        value, obj = _with_revision(got.value, revision)
        return Record(key, revision, value, obj)

    async def list(self, prefix: str, *, revision: int = 0, limit: int = 0, start_after: str = "") -> ListResult:
        from aetcd import rpc
        from aetcd.exceptions import RevisionCompactedError

        start = self._k(start_after) + b"\x00" if start_after > prefix else self._k(prefix)
        request = rpc.RangeRequest(key=start, range_end=self._k(prefix_end(prefix)), revision=revision,
                                   limit=limit + 1 if limit else 0, sort_order=rpc.RangeRequest.ASCEND,
                                   sort_target=rpc.RangeRequest.KEY)
        try:
            response = await self._client.kvstub.Range(request, timeout=60)
        except Exception as exc:
            if isinstance(exc, RevisionCompactedError) or "compacted" in str(exc):
                raise Compacted(revision, self._compacted) from None
            raise
        at = revision or int(response.header.revision)
        self._seen(at)
        kvs = list(response.kvs)
        more = bool(limit) and len(kvs) > limit
        items = []
        for kv in kvs[:limit] if more else kvs:
            value, obj = _with_revision(kv.value, int(kv.mod_revision))
            items.append(Record(self._unk(kv.key), int(kv.mod_revision), value, obj))
        return ListResult(items, at, more)

    async def watch(self, prefix: str, from_revision: int) -> AsyncIterator[list[Event]]:
        from aetcd.exceptions import RevisionCompactedError

        try:
            watch = await self._client.watch(self._k(prefix), range_end=self._k(prefix_end(prefix)),
                                             start_revision=from_revision + 1, prev_kv=True)
        except RevisionCompactedError as exc:
            raise Compacted(from_revision, exc.compacted_revision) from None
        try:
            async for ev in watch:
                kv = ev.kv
                revision = int(kv.mod_revision)
                key = self._unk(kv.key)
                if ev.kind == "DELETE":
                    prev = ev.prev_kv
                    value, obj = _with_revision(prev.value if prev is not None else b"{}", revision)
                    etype = EventType.DELETED
                else:
                    value, obj = _with_revision(kv.value, revision)
                    etype = EventType.ADDED if int(kv.version) == 1 else EventType.MODIFIED
                self._seen(revision)
                yield [Event(etype, Record(key, revision, value, obj))]
        except RevisionCompactedError as exc:
            raise Compacted(from_revision, exc.compacted_revision) from None
        finally:
            await watch.cancel()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
