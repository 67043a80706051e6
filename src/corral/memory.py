"""Giving freed memory back to the system.

glibc's allocator keeps what a burst of work freed (a thousand watches that came and went, each
with its TLS buffers) mapped in the process, and RSS stays at its peak: measured with 2,000
watches of 500 objects each, 436 MiB after every client had left, 112 MiB after ``malloc_trim(0)``,
which returns the free pages of every arena. Elsewhere (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import time

__all__ = ["release_free_memory"]

log = logging.getLogger(__name__)

_trim = None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    _trim = _libc.malloc_trim
    _trim.argtypes, _trim.restype = [ctypes.c_size_t], ctypes.c_int
except (OSError, AttributeError):  # not glibc
    pass


def release_free_memory() -> bool:
    """Return the allocator's free pages to the system; True if any were returned."""
    if _trim is None:
        return False
    start = time.perf_counter()
    released = bool(_trim(0))
    log.debug("malloc_trim: %s in %.1f ms", "released" if released else "nothing", 1e3 * (time.perf_counter() - start))
    return released
