"""The etcd backend of the store contract (see :mod:`corral.store.base`), through aetcd.

- Keys live under a root prefix (``/corral`` by default), so one etcd can serve several clusters or
  test runs; the store's revisions are etcd's, numbered as below.
- Creates and updates waiting at the same moment go to etcd together, as one transaction (up to
  ``MAX_BATCH`` writes and compares and ``MAX_BATCH_BYTES``, ``MAX_IN_FLIGHT`` transactions at a time;
  an etcd whose ``--max-txn-ops`` is lower is met by halving the batches until it takes them): one gRPC
  call, one raft entry and one watch response for many writes instead of one each. The transaction
  carries every write's own compare (``create_revision`` for a create, ``mod_revision`` for an
  update); when any of them fails, each write of it goes again alone, so a conflict is reported to
  its writer only. Deletes go alone.
- Revisions: the writes of one transaction share its etcd revision, so the store numbers them
  ``etcd revision × SUB + place in the transaction`` (a write alone: ``× SUB + 0``; the store's own
  revision and a list's: ``× SUB + SUB - 1``, every write of that etcd revision). Every write still
  has a revision of its own, greater than every earlier one; they are no longer consecutive.
- Values are stored without ``metadata.resourceVersion``, except that a write placed after the first
  in its transaction keeps its place there (``"resourceVersion":"3"``, the first field of
  ``metadata``); a record read back gets its revision from the key's ``mod_revision`` and that place
  (as Kubernetes' etcd3 storage does from ``mod_revision``), so the contract holds: the value a record
  carries always names its own revision.
- Lists at a revision use etcd's range with ``revision`` and ``limit`` (at a revision inside a
  transaction's writes, etcd keeps no state between them: the list holds all of them, and its
  revision says so); watches start at the etcd revision holding ``from_revision`` and skip what
  ``from_revision`` already includes. The store's own writes and deletes are handed on as their
  writers got them (the object already decoded), not decoded again from the event; a DELETED event
  of another writer's gets its last state read at the etcd revision before it, unless the watcher
  holds every object itself (``last_states=False``: the watch cache). (Not ``prev_kv``: etcd
  would then read and send the previous value of every update as well, which cost a quarter of the
  throughput of SchedulingBasic on etcd.)
- A revision etcd has compacted away raises :class:`Compacted` (→ HTTP 410).
- Each endpoint gets its own gRPC channel, and calls go to one member at a time: a call that fails
  in transit (the member gone, hung, or in the middle of a leader election) moves the store on to
  the next member and is retried for up to ``RETRY_SECONDS``; a retried write that then finds its
  own value already written (the first attempt went through after all) counts as done. Past the
  deadline the error is :class:`Unavailable` (→ HTTP 503). One channel per member, not one gRPC
  channel over every address, because a TLS channel checks every member's certificate against one
  name, and each member's certificate names its own address.
- With :class:`EtcdTLS` the channels are TLS, verified against the given CA, and present a client
  certificate when given one (etcd's ``--client-cert-auth``).
- ``update(..., fence=(key, revision))`` adds a compare on the fence key's ``mod_revision`` to the
  same transaction: the leader's bindings are refused once its Lease has moved on.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

import msgspec

from corral.aio import without_grpc_fork_handlers
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
    TooLarge,
    Unavailable,
    prefix_end,
    update_each,
)

T = TypeVar("T")
log = logging.getLogger(__name__)

__all__ = ["EtcdStore", "EtcdTLS", "parse_endpoints"]

without_grpc_fork_handlers()  # before any import of grpc below

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode
MAX_MESSAGE = 256 * 1024 * 1024  # large lists come back in one gRPC message
RETRY_SECONDS = 10.0  # an etcd leader election takes ~1 s; a member restart a few
# A single call's deadline. When the etcd leader dies, a request it had taken hangs until etcd's own
# timeout (7 s); cut short and retried, it reaches the new leader in about a second instead.
CALL_SECONDS = 3.0
# gRPC's connection to each member (see _connect). A hung member (a partitioned network) sends no
# error: a ping every KEEPALIVE_MS finds it, a ping unanswered for PING_TIMEOUT_MS ends its calls.
# A member that went away is dialled again after 200 ms, then at most every 2 s (gRPC's own default
# reaches two minutes: a restarted member would be left unused for that long).
KEEPALIVE_MS = 10_000
PING_TIMEOUT_MS = 5_000
FIRST_REDIAL_MS = 200
MAX_REDIAL_MS = 2_000
SUB = 1000  # store revisions per etcd revision (see above); more than etcd's --max-txn-ops (128)
MAX_BATCH = 128  # writes, and compares, in one transaction: etcd's --max-txn-ops (128 by default)
MAX_BATCH_BYTES = 1024 * 1024  # their values together (etcd's --max-request-bytes is 1.5 MiB by default)
MAX_IN_FLIGHT = 4  # transactions of batched writes on their way at once
MAX_HANDED_ON = 16_384  # own writes kept for the watch to hand on as written, not decoded again


def parse_endpoints(url: str) -> list[tuple[str, int]]:
    """``etcd://h1:2379,h2:2379`` → [(h1, 2379), (h2, 2379)]."""
    rest = url[len("etcd://"):] if url.startswith("etcd://") else url
    out = []
    for part in rest.split(","):
        host, _, port = part.strip().rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"etcd endpoint must be HOST:PORT, got {part.strip()!r} in {url!r}")
        out.append((host, int(port)))
    return out  # never empty: splitting gives at least one part, and an empty part is refused above


@dataclass(frozen=True)
class EtcdTLS:
    """How to reach a TLS etcd: the CA its members' certificates are signed by, and the client
    certificate and key to present (both or neither). Paths, read when the store opens."""

    ca_file: str
    cert_file: str = ""
    key_file: str = ""

    def __post_init__(self) -> None:
        if bool(self.cert_file) != bool(self.key_file):
            raise ValueError("--etcd-certfile and --etcd-keyfile go together: give both or neither")

    def credentials(self):
        import grpc

        def read(path: str, what: str) -> bytes:
            try:
                with open(path, "rb") as f:
                    return f.read()
            except OSError as exc:
                raise ValueError(f"cannot read the etcd {what} {path}: {exc.strerror or exc}") from None

        ca = read(self.ca_file, "CA certificate")
        if b"-----BEGIN CERTIFICATE-----" not in ca:
            raise ValueError(f"the etcd CA certificate {self.ca_file} holds no PEM certificate")
        cert = read(self.cert_file, "client certificate") if self.cert_file else None
        key = read(self.key_file, "client key") if self.key_file else None
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def _client(host: str, port: int, *, credentials, options: dict[str, Any]):
    """An aetcd client for one member; over TLS when ``credentials`` are given. aetcd 1.0 only opens
    plaintext channels, so the TLS client opens its own channel and stubs as aetcd's ``connect``
    does (user/password authentication, which corral does not use, left out)."""
    import aetcd

    if credentials is None:
        return aetcd.Client(host=host, port=port, timeout=CALL_SECONDS, options=options)

    import grpc
    from aetcd import rpc, watcher

    class TLSClient(aetcd.Client):
        async def connect(self) -> None:
            if self._connected.is_set():
                return
            self.channel = grpc.aio.secure_channel(f"{self._host}:{self._port}", credentials,
                                                   options=list(self._options.items()))
            self.kvstub = rpc.KVStub(self.channel)
            self.clusterstub = rpc.ClusterStub(self.channel)
            self.leasestub = rpc.LeaseStub(self.channel)
            self.maintenancestub = rpc.MaintenanceStub(self.channel)
            self._watcher = watcher.Watcher(rpc.WatchStub(self.channel), timeout=self._timeout, metadata=None)
            self._connected.set()

    return TLSClient(host=host, port=port, timeout=CALL_SECONDS, options=options)


def _transient(exc: BaseException) -> bool:
    """An error worth retrying: no member reachable, a leader being elected, a call timed out."""
    from aetcd import exceptions as aexc, rpc

    if isinstance(exc, (aexc.ConnectionFailedError, aexc.ConnectionTimeoutError)):
        return True
    return isinstance(exc, rpc.AioRpcError) and exc.code() in (rpc.StatusCode.UNAVAILABLE,
                                                               rpc.StatusCode.DEADLINE_EXCEEDED)


def _details(exc: BaseException) -> str:
    """What a gRPC error says (etcd's own message), else nothing."""
    return str(exc.details()) if callable(getattr(exc, "details", None)) else ""


_METADATA = b'"metadata":{'
_PLACE = b'"resourceVersion":"'
_PLACE_DIGITS = len(str(SUB - 1))  # a kept place is 0 … SUB - 1


def _top(etcd_revision: int) -> int:
    """The store revision that includes every write of ``etcd_revision``."""
    return etcd_revision * SUB + SUB - 1


def _stamped(value: bytes, etcd_revision: int, place: int) -> tuple[int, bytes]:
    """The store revision of a value etcd holds at ``etcd_revision`` (from the place in its transaction
    the value keeps, else ``place``), and the value carrying it as resourceVersion."""
    at = value.find(_METADATA)
    if at < 0:
        revision = etcd_revision * SUB + place
        return revision, _with_revision(value, revision)
    at += len(_METADATA)
    if value.startswith(_PLACE, at):
        start = at + len(_PLACE)
        digits = value[start:value.find(b'"', start)]
        if digits.isdigit() and len(digits) <= _PLACE_DIGITS:
            place = int(digits)
    revision = etcd_revision * SUB + place
    return revision, _splice(value, at, revision)


def _placed(value: bytes, place: int) -> bytes:
    """``value`` (from :func:`_stored`) keeping its place in a transaction (none kept for the first)."""
    return _with_revision(value, place) if place else value


def _with_revision(value: bytes, revision: int) -> bytes:
    """The stored JSON with ``metadata.resourceVersion`` set (replacing a kept place), spliced into
    the bytes. No decode, no encode: this runs for every event and every read."""
    at = value.find(_METADATA)
    if at < 0:  # no metadata at all (not written by corral)
        obj = _decode(value) if value else {}
        obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
        return _encode(obj)
    return _splice(value, at + len(_METADATA), revision)


def _splice(value: bytes, at: int, revision: int) -> bytes:
    """``value`` with ``"resourceVersion":"revision"`` at ``at``, just inside its top-level metadata,
    in place of a kept place if it has one."""
    field = b'"resourceVersion":"%d"' % revision
    if value.startswith(_PLACE, at):
        return value[:at] + field + value[value.find(b'"', at + len(_PLACE)) + 1:]
    return value[:at] + field + (b"" if value[at:at + 1] == b"}" else b",") + value[at:]


def _as_written(key: str, obj: dict[str, Any], value: bytes, revision: int) -> Record:
    """The record of a write of this store's at ``revision``: ``obj`` as its writer gave it (its
    resourceVersion set), ``value`` as sent with the revision spliced in."""
    obj.setdefault("metadata", {})["resourceVersion"] = str(revision)
    return Record(key, revision, _with_revision(value, revision), obj)


def _at(rpc: Any, k: bytes, etcd_revision: int) -> Any:
    """The compare: ``k`` was last written at ``etcd_revision``."""
    return rpc.Compare(key=k, result=rpc.Compare.EQUAL, target=rpc.Compare.MOD, mod_revision=etcd_revision)


def _stored(obj: dict[str, Any]) -> bytes:
    """What etcd holds: the object without ``resourceVersion``, ``metadata`` after apiVersion and kind."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and _metadata_leads(obj):  # as the API makes objects: encoded as they are
        revision = meta.pop("resourceVersion", _NONE)
        try:
            return _encode(obj)
        finally:
            if revision is not _NONE:
                meta["resourceVersion"] = revision
    meta = {k: v for k, v in meta.items() if k != "resourceVersion"} if isinstance(meta, dict) else {}
    ordered = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    ordered["metadata"] = meta
    for k, v in obj.items():
        if k not in ordered:
            ordered[k] = v
    return _encode(ordered)


_NONE = object()


def _metadata_leads(obj: dict[str, Any]) -> bool:
    """Whether ``metadata`` comes before every key but apiVersion and kind."""
    for key in obj:
        if key == "metadata":
            return True
        if key != "apiVersion" and key != "kind":
            return False
    return False


class EtcdStore:
    def __init__(self, endpoints: list[tuple[str, int]], *, root: str = "/corral", tls: EtcdTLS | None = None) -> None:
        self.endpoints = endpoints
        self.root = root.rstrip("/")
        self.tls = tls
        self.max_value_bytes = DEFAULT_MAX_VALUE_BYTES  # a larger object is refused (TooLarge); 0: no limit
        self._full: StoreFull | None = None
        self._members: list[Any] = []  # one aetcd client per endpoint
        self._at = 0  # the member calls go to
        self._revision = 0
        self._compacted = 0
        # Writes waiting to go in a transaction: (key, value, compares, future of _write's answer).
        self._pending: collections.deque = collections.deque()
        self.max_batch = MAX_BATCH
        self._kicked = False
        self._in_flight: dict[asyncio.Task, set[bytes]] = {}  # transactions on their way, and their keys
        self._flying: set[bytes] = set()  # every key of those
        # This store's own writes that no watch has delivered yet, by (key, etcd revision): the watch
        # hands each on as its writer got it (its object decoded already) instead of decoding it again.
        self._written: dict[tuple[bytes, int], Record] = {}
        # The writes in transactions on their way, by key (one each): (the value as sent, its place,
        # key, object). etcd's watch often delivers a write before its answer comes back.
        self._sending: dict[bytes, tuple[bytes, int, str, dict[str, Any]]] = {}
        self._watched = 0  # the last etcd revision a watch delivered

    @classmethod
    async def open(cls, url: str, *, root: str = "/corral", tls: EtcdTLS | None = None) -> "EtcdStore":
        store = cls(parse_endpoints(url), root=root, tls=tls)
        await store._connect()
        return store

    @property
    def _client(self):
        """The member calls go to now (None once closed)."""
        return self._members[self._at] if self._members else None

    async def _connect(self) -> None:
        credentials = self.tls.credentials() if self.tls is not None else None
        options = {"grpc.max_receive_message_length": MAX_MESSAGE, "grpc.max_send_message_length": MAX_MESSAGE,
                   # PING_TIMEOUT_MS applies to keepalive's pings and to those gRPC sends on its own.
                   # A watch sends nothing while it waits: unless told otherwise gRPC stops pinging
                   # after two pings without data, and a watch on a hung member took up to a minute to end.
                   "grpc.keepalive_time_ms": KEEPALIVE_MS, "grpc.http2.ping_timeout_ms": PING_TIMEOUT_MS,
                   "grpc.http2.max_pings_without_data": 0,
                   "grpc.initial_reconnect_backoff_ms": FIRST_REDIAL_MS, "grpc.max_reconnect_backoff_ms": MAX_REDIAL_MS}
        self._members = [_client(host, port, credentials=credentials, options=options)
                         for host, port in self.endpoints]
        try:
            for member in self._members:
                await member.connect()  # makes the channel; nothing is sent yet
            self._revision = await self.current_revision()
        except Exception as exc:
            await self.close()
            raise ConnectionError(f"no etcd member answered at {self.endpoints}: {exc}") from None

    def _move_on(self, failed: Any) -> None:
        """A call to ``failed`` failed in transit: later calls go to the next member (unless another
        call already moved on)."""
        if self._members and self._members[self._at] is failed:
            self._at = (self._at + 1) % len(self._members)

    async def _retrying(self, call: Callable[[Any], Awaitable[T]]) -> tuple[T, bool]:
        """``call(member)``, retried on the next member while it fails in transit; (its result,
        whether it was retried)."""
        deadline = time.monotonic() + RETRY_SECONDS
        delay, retried = 0.05, False
        while True:
            member = self._client
            try:
                return await call(member), retried
            except Exception as exc:
                if not _transient(exc):
                    raise
                self._move_on(member)
                if time.monotonic() + delay > deadline:
                    detail = _details(exc) or exc
                    raise Unavailable(f"etcd at {self.endpoints} did not answer: {detail}") from None
            await asyncio.sleep(delay)
            delay, retried = min(delay * 2, 1.0), True

    async def current_revision(self) -> int:
        """etcd's revision now: a count-only range over one key (any range's header carries it)."""
        from aetcd import rpc

        request = rpc.RangeRequest(key=self._k("/"), count_only=True)
        response, _ = await self._retrying(lambda c: c.kvstub.Range(request, timeout=CALL_SECONDS))
        revision = _top(int(response.header.revision))
        self._seen(revision)
        return revision

    async def _get(self, k: bytes):
        got, _ = await self._retrying(lambda c: c.get(k))
        return got

    def _record_of(self, kv: Any, place: int = 0) -> Record:
        """A key-value etcd handed back (a range's, a get's, a watch event's) as a record; ``place``:
        its place among the writes of its etcd revision when the value keeps none (a value another
        writer put, several in one transaction: known only from a watch)."""
        revision, value = _stamped(kv.value, int(kv.mod_revision), place)
        return Record(self._unk(kv.key), revision, value)

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

    def revision_before(self, writes: int) -> int:
        """Each etcd revision holds one write or more."""
        return _top(self._revision // SUB - writes) if self._revision // SUB > writes else 0

    def full(self) -> StoreFull | None:
        """etcd's NOSPACE alarm as the last write met it (cleared by the next write that goes through,
        once an operator has compacted, defragmented and disarmed it: ``etcdctl alarm disarm``)."""
        return self._full

    def _seen(self, revision: int) -> None:
        if revision > self._revision:
            self._revision = revision

    # --- writes --------------------------------------------------------------------------------------

    async def _txn(self, compare: list, writes: list[tuple[bytes, bytes | None]]) -> tuple[bool, int, bool]:
        """One etcd transaction: ``rpc.Compare`` messages, then ``writes`` (key, value), a value of None
        deleting its key; (succeeded, the etcd revision it left: the write's own, retried)."""
        from aetcd import rpc

        request = rpc.TxnRequest(compare=compare)
        success = request.success
        for k, value in writes:  # added in place: a RequestOp made apart and copied in costs 5× as much
            if value is None:
                success.add().request_delete_range.key = k
            else:
                put = success.add().request_put
                put.key = k
                put.value = value
        try:
            response, retried = await self._retrying(lambda c: c.kvstub.Txn(request, timeout=CALL_SECONDS))
        except Exception as exc:
            details = _details(exc)
            if "database space exceeded" in str(details):  # etcd's NOSPACE alarm
                self._full = StoreFull(0, 0)
                raise self._full from None
            raise
        self._full = None
        revision = int(response.header.revision)
        if response.succeeded:
            self._seen(_top(revision))
        return bool(response.succeeded), revision, retried

    def _write(self, k: bytes, value: bytes, compare: list, key: str, obj: dict[str, Any]) -> asyncio.Future:
        """A put of ``obj`` under ``compare``, sent with the other writes waiting at the same moment; a
        future of (succeeded, its store revision, whether it was retried, the value as sent: with its
        kept place)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending.append((k, value, compare, future, (key, obj)))
        if not self._kicked:  # every write made before the loop turns joins the same transaction
            self._kicked = True
            loop.call_soon(self._kick)
        return future

    def _kick(self) -> None:
        """Send what is waiting, in transactions of distinct keys, while fewer than MAX_IN_FLIGHT are
        on their way (the next goes when one comes back)."""
        self._kicked = False
        while self._pending and len(self._in_flight) < MAX_IN_FLIGHT:
            batch, keys, size, compares, later = [], set(), 0, 0, []
            while self._pending and len(batch) < self.max_batch:
                write = self._pending.popleft()
                if write[3].done():  # its writer was cancelled before it was sent: not written
                    continue
                # etcd refuses one key twice in a transaction; and a key's next write goes once the
                # one before has landed, not beside it
                if write[0] in keys or write[0] in self._flying or batch and (
                        size + len(write[1]) > MAX_BATCH_BYTES or compares + len(write[2]) > self.max_batch):
                    later.append(write)
                    if len(later) > self.max_batch:
                        break
                    continue
                batch.append(write)
                keys.add(write[0])
                size += len(write[1])
                compares += len(write[2])
            self._pending.extendleft(reversed(later))
            if not batch:
                return
            self._flying |= keys
            task = asyncio.create_task(self._send(batch))
            self._in_flight[task] = keys
            task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task) -> None:
        self._flying -= self._in_flight.pop(task)
        if self._pending:
            self._kick()

    async def _send(self, batch: list) -> None:
        values = [_placed(value, place) for place, (_, value, _, _, _) in enumerate(batch)]
        sending = self._sending
        for place, ((k, _, _, _, (key, obj)), value) in enumerate(zip(batch, values)):
            sending[k] = (value, place, key, obj)  # for the watch, should its event come before the answer
        answers: list = []
        try:
            compares = [c for _, _, compare, _, _ in batch for c in compare]
            try:
                ok, revision, retried = await self._txn(compares, [(k, v) for (k, _, _, _, _), v in
                                                                   zip(batch, values)])
            except Exception as exc:
                if len(batch) == 1 or "too many operations" not in _details(exc):
                    raise
                self.max_batch = max(1, max(len(batch), len(compares)) // 2)
                log.warning("etcd refused a transaction of %d writes and %d compares (its --max-txn-ops is "
                            "lower than %d): batches of %d from now on", len(batch), len(compares), MAX_BATCH,
                            self.max_batch)
                ok, revision, retried = False, 0, False
            if ok or len(batch) == 1:
                answers = [(ok, revision * SUB + place, retried, v) for place, v in enumerate(values)]
            else:  # a compare failed: each write again alone, so only the one that failed fails
                alone = await asyncio.gather(*(self._txn(compare, [(k, value)])
                                               for k, value, compare, _, _ in batch), return_exceptions=True)
                for (_, value, _, _, _), placed, answer in zip(batch, values, alone):
                    if isinstance(answer, BaseException):
                        answers.append(answer)
                        continue
                    ok, revision, again = answer
                    # Retried, the transaction may have gone through the first time: the caller then
                    # finds its value in place, as sent with its place in the transaction.
                    answers.append((ok, revision * SUB, retried or again, value if ok or not retried else placed))
        except BaseException as exc:  # every writer of the batch hears of it
            answers = [exc] * len(batch)
            if not isinstance(exc, Exception):
                raise
        finally:
            for (_, _, _, future, _), answer in zip(batch, answers):
                if future.done():
                    continue
                if isinstance(answer, BaseException):
                    future.set_exception(answer)
                else:
                    future.set_result(answer)

    async def _already_written(self, k: bytes, value: bytes) -> Record | None:
        """After a retried write was refused: the key holding exactly our value means the first
        attempt went through (every create carries a fresh uid, so a stranger's write never matches)."""
        current = await self._get(k)
        if current is None or current.value != value:
            return None
        self._seen(_top(int(current.mod_revision)))
        return self._record_of(current)

    def _record(self, k: bytes, key: str, obj: dict[str, Any], value: bytes, revision: int) -> Record:
        """The record of a write that went through, also kept for the watch to hand on (unless a watch
        delivered its revision already: the answer may come after the event)."""
        return self._hand_on(k, _as_written(key, obj, value, revision))

    def _hand_on(self, k: bytes, record: Record) -> Record:
        """Keep ``record``, a write of this store's, for the watch to hand on (unless a watch delivered
        its revision already: the answer may come after the event)."""
        if record.revision // SUB > self._watched:
            written = self._written
            if len(written) >= MAX_HANDED_ON:  # no watch takes them (a store without one): the oldest go
                del written[next(iter(written))]
            written[(k, record.revision // SUB)] = record
        return record

    def _value(self, key: str, obj: dict[str, Any]) -> bytes:
        value = _stored(obj)
        if self.max_value_bytes and len(value) > self.max_value_bytes:
            raise TooLarge(key, len(value), self.max_value_bytes)
        return value

    async def _commit(self, k: bytes, key: str, obj: dict[str, Any], compare: list) -> tuple[bool, int, bool, bytes]:
        """:meth:`_write`'s answer for ``obj``; the watch no longer looks for it among the writes sent."""
        try:
            return await self._write(k, self._value(key, obj), compare, key, obj)
        finally:
            sent = self._sending.get(k)
            if sent is not None and sent[3] is obj:
                del self._sending[k]

    async def create(self, key: str, obj: dict[str, Any]) -> Record:
        from aetcd import rpc

        k = self._k(key)
        never = rpc.Compare(key=k, result=rpc.Compare.EQUAL, target=rpc.Compare.CREATE, create_revision=0)
        ok, revision, retried, value = await self._commit(k, key, obj, [never])
        if not ok:
            if retried and (mine := await self._already_written(k, value)) is not None:
                return mine
            raise KeyExists(key)
        return self._record(k, key, obj, value, revision)

    async def update(self, key: str, obj: dict[str, Any], expected_revision: int, *,
                     fence: tuple[str, int] | None = None) -> Record:
        from aetcd import rpc

        k = self._k(key)
        # One key is written once per etcd revision, so its etcd revision names its version (a
        # revision of another write of the same transaction passes for it: the API compares the
        # caller's resourceVersion with the object's own before it writes).
        at = expected_revision // SUB
        guards = [_at(rpc, k, at)] if expected_revision else []
        if not at:  # none given, or one below SUB, which no write has (though a missing key is at etcd revision 0)
            guards.append(rpc.Compare(key=k, result=rpc.Compare.GREATER, target=rpc.Compare.VERSION, version=0))
        if fence is not None:
            guards.append(_at(rpc, self._k(fence[0]), fence[1] // SUB))
        ok, revision, retried, value = await self._commit(k, key, obj, guards)
        if not ok:
            if retried and (mine := await self._already_written(k, value)) is not None:
                return mine
            if fence is not None:
                held = await self._get(self._k(fence[0]))
                actual = self._record_of(held).revision if held is not None else 0
                if actual != fence[1]:
                    raise Fenced(fence[0], fence[1], actual)
            current = await self._get(k)
            if current is None:
                raise KeyNotFound(key)
            raise Conflict(key, expected_revision, self._record_of(current).revision)
        return self._record(k, key, obj, value, revision)

    async def update_many(self, writes: list[tuple[str, dict[str, Any], int]], *,
                          fence: tuple[str, int] | None = None) -> list[Record | StoreError]:
        return await update_each(self, writes, fence=fence)  # the writer batches them into transactions

    async def delete(self, key: str, expected_revision: int | None = None) -> Record:
        from aetcd import rpc

        k = self._k(key)
        last = None
        for _ in range(8):
            current = await self._get(k)
            if current is None:
                if last is not None:  # our retried delete went through: its revision is not known
                    revision = await self.current_revision()
                    return Record(key, revision, _with_revision(last.value, revision))
                raise KeyNotFound(key)
            if expected_revision and int(current.mod_revision) != expected_revision // SUB:
                raise Conflict(key, expected_revision, self._record_of(current).revision)
            ok, revision, retried = await self._txn([_at(rpc, k, int(current.mod_revision))], [(k, None)])
            if ok:  # the last state, at the deletion's revision (a delete goes alone: its place is 0)
                revision *= SUB
                return self._hand_on(k, Record(key, revision, _with_revision(current.value, revision)))
            last = current if retried else None
        raise Conflict(key, expected_revision or 0, -1)

    async def compact(self, revision: int) -> None:
        from aetcd.exceptions import RevisionCompactedError

        try:  # etcd keeps the state at the etcd revision holding ``revision``: what comes after it
            await self._retrying(lambda c: c.compact(revision // SUB, physical=True))
        except RevisionCompactedError:
            pass
        self._compacted = max(self._compacted, revision)

    # --- reads -------------------------------------------------------------------------------------------

    async def get(self, key: str) -> Record | None:
        got = await self._get(self._k(key))
        return self._record_of(got) if got is not None else None

    async def list(self, prefix: str, *, revision: int = 0, limit: int = 0, start_after: str = "") -> ListResult:
        """A revision inside the writes of one transaction lists as of all of them (the result's
        revision says so): etcd keeps no state between them."""
        from aetcd import rpc
        from aetcd.exceptions import RevisionCompactedError

        if revision and revision < self._compacted:
            raise Compacted(revision, self._compacted)
        start = self._k(start_after) + b"\x00" if start_after > prefix else self._k(prefix)
        request = rpc.RangeRequest(key=start, range_end=self._k(prefix_end(prefix)), revision=revision // SUB,
                                   limit=limit + 1 if limit else 0, sort_order=rpc.RangeRequest.ASCEND,
                                   sort_target=rpc.RangeRequest.KEY)
        try:
            response, _ = await self._retrying(lambda c: c.kvstub.Range(request, timeout=60))
        except Exception as exc:
            if isinstance(exc, RevisionCompactedError) or "compacted" in str(exc):
                raise Compacted(revision, self._compacted) from None
            raise
        at = _top(revision // SUB or int(response.header.revision))
        self._seen(at)
        kvs = list(response.kvs)
        more = bool(limit) and len(kvs) > limit
        return ListResult([self._record_of(kv) for kv in (kvs[:limit] if more else kvs)], at, more)

    async def watch(self, prefix: str, from_revision: int, *, progress: bool = False,
                    last_states: bool = True) -> AsyncIterator[list[Event]]:
        """One etcd watch stream of our own (aetcd's hands events over one at a time): each response
        of etcd's, however many events it holds, becomes one batch."""
        from aetcd import rpc

        if from_revision < self._compacted:
            # etcd would still serve this one (it keeps the compaction revision's own events, and a
            # watch from R starts at R + 1), but the contract, and SQLite, refuse every revision
            # older than the compaction point: one answer from both backends.
            raise Compacted(from_revision, self._compacted)
        start, end = self._k(prefix), self._k(prefix_end(prefix))
        if progress and prefix == "/":  # every key of the etcd: foreign writes show as PROGRESS
            start = end = b"\0"
        mine = self._k(prefix)
        first, seen = divmod(from_revision, SUB)  # from the etcd revision holding it, after what it includes
        if seen == SUB - 1:
            first, seen = first + 1, -1
        create = rpc.WatchRequest(create_request=rpc.WatchCreateRequest(
            key=start, range_end=end, start_revision=first))
        closing = asyncio.Event()

        async def requests():
            yield create
            await closing.wait()  # keep the request side open for as long as we watch

        member = self._client
        call = rpc.WatchStub(member.channel).Watch(requests())
        try:
            async for response in call:
                if response.compact_revision:
                    raise Compacted(from_revision, int(response.compact_revision) * SUB - 1)
                if response.canceled:
                    raise Unavailable(f"etcd cancelled the watch: {response.cancel_reason}")
                # etcd hands every write of one etcd revision over in one response, in their order
                # in the transaction: a value keeping no place (a write alone, a delete) takes its
                # position among them.
                batch, at, place, foreign = [], None, 0, []
                for ev in response.events:
                    kv = ev.kv
                    etcd_revision = int(kv.mod_revision)
                    at, place = etcd_revision, (place + 1 if etcd_revision == at else 0)
                    if not kv.key.startswith(mine):
                        batch.append(Event(EventType.PROGRESS, Record("", _top(etcd_revision), b"")))
                        continue
                    record = self._written.pop((kv.key, etcd_revision), None)
                    unread = False
                    if ev.type == rpc.Event.DELETE:
                        if record is None:  # another writer's (or ours, before its answer): read below,
                            # unless the watcher holds it already (last_states=False: left empty)
                            record, unread = Record(self._unk(kv.key), etcd_revision * SUB + place, b""), True
                        event = Event(EventType.DELETED, record)
                    else:
                        if record is None:  # ours before its answer (the bytes sent), or another's
                            sent = self._sending.get(kv.key)
                            record = (_as_written(sent[2], sent[3], sent[0], etcd_revision * SUB + sent[1])
                                      if sent is not None and sent[0] == kv.value else self._record_of(kv, place))
                        event = Event(EventType.ADDED if kv.version == 1 else EventType.MODIFIED, record)
                    if etcd_revision != first or event.revision % SUB > seen:
                        if unread:
                            foreign.append((len(batch), kv.key))
                        batch.append(event)
                if at is not None and at > self._watched:
                    self._watched = at
                if foreign and last_states:
                    await self._last_states(batch, foreign)
                if progress and at is not None and (not batch or batch[-1].revision != _top(at)):
                    # the follower has seen every write of the response's last etcd revision
                    batch.append(Event(EventType.PROGRESS, Record("", _top(at), b"")))
                if batch:
                    self._seen(batch[-1].revision)
                    yield batch
        except Exception as exc:
            if _transient(exc):  # the watcher starts again from its last revision, on the next member
                self._move_on(member)
            raise
        finally:
            closing.set()
            call.cancel()

    async def _last_states(self, batch: list[Event], deleted: list[tuple[int, bytes]]) -> None:
        """Fill in the last state of the DELETED events at ``deleted`` (their places in ``batch``, their
        keys): another writer's deletes, read at the etcd revision before each (the watch asks for no
        ``prev_kv``: see the module's docstring). Compacted away: ``{}``."""
        from aetcd import rpc
        from aetcd.exceptions import RevisionCompactedError

        async def before(k: bytes, etcd_revision: int) -> bytes:
            request = rpc.RangeRequest(key=k, revision=etcd_revision - 1)
            try:
                response, _ = await self._retrying(lambda c: c.kvstub.Range(request, timeout=CALL_SECONDS))
            except Exception as exc:
                if isinstance(exc, RevisionCompactedError) or "compacted" in str(exc):
                    return b"{}"
                raise
            return response.kvs[0].value if response.kvs else b"{}"

        states = await asyncio.gather(*(before(k, batch[i].revision // SUB) for i, k in deleted))
        for (i, _), last in zip(deleted, states):
            record = batch[i].record
            batch[i] = Event(EventType.DELETED, Record(record.key, record.revision,
                                                       _with_revision(last, record.revision)))

    async def close(self) -> None:
        members, self._members = self._members, []
        for member in members:
            await member.close()
