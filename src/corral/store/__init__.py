"""Revisioned key/value storage with watch: the contract (``base``) and its backends.

The API server is the only user of a store. SQLite (``sqlite``) is the embedded default, for one
server; etcd (``etcd``) lets several servers share one cluster state. Every backend passes the same
conformance suite (``tests/store``).
"""

from __future__ import annotations

import os

from corral.store.base import (
    DEFAULT_MAX_VALUE_BYTES,
    Compacted,
    Conflict,
    Event,
    EventType,
    Fenced,
    KeyExists,
    KeyNotFound,
    ListResult,
    Record,
    Store,
    StoreError,
    StoreFull,
    StoreLocked,
    TooLarge,
    Unavailable,
)

__all__ = [
    "Compacted", "Conflict", "Event", "EventType", "Fenced", "KeyExists", "KeyNotFound", "ListResult",
    "Record", "Store", "StoreError", "StoreFull", "StoreLocked", "TooLarge", "Unavailable", "open_store", "DEFAULT_MAX_VALUE_BYTES",
]


async def open_store(url: str, *, synchronous: str = "FULL", root: str = "/corral", etcd_tls=None) -> Store:
    """Open a store from a URL: ``sqlite:///abs/path.db``, ``sqlite://rel/path.db``, a plain path,
    or ``etcd://HOST:PORT[,HOST:PORT...]`` (keys under ``root``; over TLS with ``etcd_tls``, an
    :class:`corral.store.etcd.EtcdTLS`)."""
    from corral.store.sqlite import SQLiteStore

    if url.startswith("etcd://"):
        from corral.store.etcd import EtcdStore

        return await EtcdStore.open(url, root=root, tls=etcd_tls)
    if etcd_tls is not None:
        raise ValueError("--etcd-cafile, --etcd-certfile and --etcd-keyfile need an etcd store (--store etcd://...)")
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
    elif "://" in url:
        scheme = url.split("://", 1)[0]
        raise ValueError(f"unsupported store {scheme!r}: use sqlite:///path or etcd://host:port")
    else:
        path = url
    return await SQLiteStore.open(os.path.expanduser(path), synchronous=synchronous)
