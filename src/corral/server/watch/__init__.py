"""Watching: the watch cache (``cache``) that follows the store once and serves every client's
watches and lists from memory, with its bounded window of history."""

from corral.server.watch.cache import HISTORY_BYTES, CacheWatcher, TooOld, WatchCache, editable

__all__ = ["WatchCache", "CacheWatcher", "TooOld", "HISTORY_BYTES", "editable"]
