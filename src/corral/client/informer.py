"""Informer: a local, indexed, always-converging copy of one resource, with change handlers.

The loop is client-go's reflector: list (remembering the list's resourceVersion), then watch from
it; when the watch ends, watch again from the last revision seen; when the server answers 410 Gone
(the revision was compacted away), list again and reconcile the local copy with what is there now,
emitting the adds, updates and deletes that were missed; when the server cannot be reached, retry
with exponential backoff. Handlers run on the event loop, in order, and must not block.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterable

from corral.aio import cancel_and_wait
from corral.api.resources import ResourceType
from corral.client.rest import ApiError, Client, ConnectionFailed, Gone, resolve

__all__ = ["Informer", "object_key"]

log = logging.getLogger(__name__)

Handler = Callable[..., None]
IndexFunc = Callable[[Any], Iterable[str]]


def _meta(obj: Any) -> Any:
    return obj.get("metadata") or {} if isinstance(obj, dict) else obj.metadata


def object_key(obj: Any) -> str:
    """``namespace/name`` for namespaced objects, ``name`` otherwise (client-go's key)."""
    meta = _meta(obj)
    ns, name = (meta.get("namespace"), meta.get("name")) if isinstance(meta, dict) else (meta.namespace, meta.name)
    return f"{ns}/{name}" if ns else name


def _rv(obj: Any) -> str:
    meta = _meta(obj)
    return (meta.get("resourceVersion") if isinstance(meta, dict) else meta.resource_version) or ""


class Informer:
    def __init__(self, client: Client, resource: ResourceType | str, *, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 indexers: dict[str, IndexFunc] | None = None, raw: bool = False,
                 backoff_initial: float = 0.2, backoff_max: float = 10.0,
                 watch_timeout: int | None = None) -> None:
        """``watch_timeout``: seconds after which the server ends each watch and the informer
        watches again from its last version (client-go's reflectors use 5–10 minutes); None leaves
        it to the server (30 minutes)."""
        self.client = client
        self.resource = resolve(resource)
        self.namespace, self.label_selector, self.field_selector = namespace, label_selector, field_selector
        self.raw = raw
        self._objects: dict[str, Any] = {}
        self._indexers = dict(indexers or {})
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._add: list[Handler] = []
        self._update: list[Handler] = []
        self._delete: list[Handler] = []
        self._synced = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._backoff = (backoff_initial, backoff_max)
        self.watch_timeout = watch_timeout
        self.resource_version = ""
        self.relists = 0  # how often the informer had to list (1 + recoveries)

    # --- handlers and reads ----------------------------------------------------------------------------

    def on_add(self, fn: Handler) -> None:
        self._add.append(fn)

    def on_update(self, fn: Handler) -> None:
        self._update.append(fn)

    def on_delete(self, fn: Handler) -> None:
        self._delete.append(fn)

    def get(self, key: str) -> Any | None:
        return self._objects.get(key)

    def list(self) -> list[Any]:
        return list(self._objects.values())

    def keys(self) -> list[str]:
        return list(self._objects)

    def by_index(self, index: str, value: str) -> list[Any]:
        return [self._objects[k] for k in self._indices[index].get(value, ())]

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self._synced.wait(), timeout)

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> asyncio.Task:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=f"informer-{self.resource.plural}")
        return self._task

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def run(self) -> None:
        delay = self._backoff[0]
        need_list = True
        failures = 0  # in a row: the first is a warning, the others debug lines (an outage, not a flood)

        def answered() -> None:
            """The server answered (a list, a watch's event or its end): an outage is over, and the
            next one's retries start at the shortest delay again."""
            nonlocal failures, delay
            if failures:
                log.info("%s informer: the server answers again after %d failed attempts", self.resource.plural,
                         failures)
            failures, delay = 0, self._backoff[0]

        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                    answered()
                async for event in self.client.watch(
                    self.resource, self.namespace, resource_version=self.resource_version,
                    label_selector=self.label_selector, field_selector=self.field_selector, raw=self.raw,
                    timeout_seconds=self.watch_timeout,
                ):
                    if failures:
                        answered()
                    self._apply(event.type, event.object, event.resource_version)
                answered()
            except Gone:
                log.info("%s: resourceVersion %s expired; relisting", self.resource.plural, self.resource_version)
                need_list = True
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # whatever broke, an informer keeps trying: components rely on it
                if not isinstance(exc, (ConnectionFailed, ApiError, OSError)):
                    level = logging.ERROR
                else:
                    level = logging.DEBUG if failures else logging.WARNING
                failures += 1
                log.log(level, "%s informer: %s; retrying in %.1fs", self.resource.plural, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._backoff[1])

    async def _relist(self) -> None:
        listing = await self.client.list(self.resource, self.namespace, label_selector=self.label_selector,
                                         field_selector=self.field_selector, raw=self.raw)
        self.relists += 1
        fresh = {object_key(o): o for o in listing.items}
        for key in [k for k in self._objects if k not in fresh]:
            self._remove(key)
        for key, obj in fresh.items():
            old = self._objects.get(key)
            if old is None:
                self._put(key, obj)
                self._emit(self._add, obj)
            elif _rv(old) != _rv(obj):
                self._put(key, obj)
                self._emit(self._update, old, obj)
        self.resource_version = listing.resource_version
        self._synced.set()

    def _apply(self, etype: str, obj: Any, rv: str) -> None:
        if rv:
            self.resource_version = rv
        if etype == "BOOKMARK":
            return
        key = object_key(obj)
        if etype == "DELETED":
            if key in self._objects:
                self._remove(key, obj)
            return
        old = self._objects.get(key)
        self._put(key, obj)
        if old is None:
            self._emit(self._add, obj)
        else:
            self._emit(self._update, old, obj)

    # --- the indexed store -----------------------------------------------------------------------------

    def _put(self, key: str, obj: Any) -> None:
        old = self._objects.get(key)
        if old is not None:
            self._unindex(key, old)
        self._objects[key] = obj
        for name, fn in self._indexers.items():
            for value in fn(obj):
                self._indices[name].setdefault(value, set()).add(key)

    def _unindex(self, key: str, obj: Any) -> None:
        for name, fn in self._indexers.items():
            for value in fn(obj):
                keys = self._indices[name].get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del self._indices[name][value]

    def _remove(self, key: str, last: Any | None = None) -> None:
        old = self._objects.pop(key)
        self._unindex(key, old)
        self._emit(self._delete, last if last is not None else old)

    def _emit(self, handlers: list[Handler], *args: Any) -> None:
        for fn in handlers:
            try:
                fn(*args)
            except Exception:  # a broken handler must not stop the informer
                log.exception("%s informer handler failed", self.resource.plural)
