"""The audit log: one JSON line per request that changed state or was refused.

Each line: ``time`` (RFC 3339, microseconds), ``user``, ``groups``, ``verb``, ``resource``
(``pods`` or ``pods/status``; a path for anything outside the API), ``namespace``, ``name`` and the
response ``code``. Reads that succeed are not logged (they are most of the traffic and change
nothing); every 401 and 403 is. The lines of the requests one turn of the event loop finished are
written together at the end of that turn, with one write(2), to the file (created 0600): a write per
request cost ~6 µs of the loop's time under load (each write hands the interpreter's lock to the
store's thread and waits to get it back); a crash loses at most the lines of the turn it ends.
Outside an event loop each line is written at once. When it passes ``max_bytes`` it is renamed to
``PATH.1`` (older ones to ``.2`` … ``.{backups}``, the oldest dropped) and a new one begun.
"""

from __future__ import annotations

import asyncio
import errno
import os
import time

import msgspec

__all__ = ["AuditLog", "DEFAULT_MAX_BYTES", "DEFAULT_BACKUPS"]

DEFAULT_MAX_BYTES = 100 * 2**20
DEFAULT_BACKUPS = 5
_encode = msgspec.json.Encoder().encode


class _Who(msgspec.Struct):
    """The middle of a line, between ``time`` and ``code`` (a struct encodes several times faster
    than a dict). Clients repeat the same requests: it is encoded once per distinct request."""

    user: str
    groups: tuple[str, ...]
    verb: str
    resource: str
    namespace: str
    name: str


MAX_REMEMBERED = 4096  # encoded middles kept before starting over


class AuditLog:
    def __init__(self, path: str, *, max_bytes: int = DEFAULT_MAX_BYTES, backups: int = DEFAULT_BACKUPS) -> None:
        if max_bytes <= 0:
            raise ValueError("the audit log's maximum size must be positive")
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        parent = os.path.dirname(os.path.abspath(path))
        try:
            os.makedirs(parent, mode=0o700, exist_ok=True)
        except FileExistsError:  # a file where the directory should be
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), parent) from None
        self._fd = -1
        self._size = 0
        self._second, self._second_text = -1, ""
        self._pending: list[bytes] | None = None  # lines waiting for the end of this loop turn
        self._middles: dict[tuple, bytes] = {}
        self._open()

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._size = os.fstat(self._fd).st_size

    def _now(self) -> str:
        """RFC 3339 UTC with microseconds; the seconds part formatted once per second."""
        t = time.time()
        second = int(t)
        if second != self._second:
            self._second, self._second_text = second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._second_text}.{int((t - second) * 1e6):06d}Z"

    def record(self, *, user: str, groups: tuple[str, ...], verb: str, resource: str, namespace: str, name: str,
               code: int) -> None:
        key = (user, groups, verb, resource, namespace, name)
        middle = self._middles.get(key)
        if middle is None:
            if len(self._middles) >= MAX_REMEMBERED:
                self._middles.clear()
            middle = self._middles[key] = _encode(_Who(*key))[1:-1]
        line = b'{"time":"%s",%s,"code":%d}\n' % (self._now().encode(), middle, code)
        if self._pending is not None:
            self._pending.append(line)
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._write((line,))
            return
        self._pending = [line]
        loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write the lines waiting for the end of the loop's turn."""
        lines, self._pending = self._pending, None
        if lines and self._fd >= 0:
            self._write(lines)

    def _write(self, lines) -> None:
        chunk = bytearray()
        for line in lines:
            if self._size + len(chunk) + len(line) > self.max_bytes and self._size + len(chunk) > 0:
                self._append(chunk)
                chunk.clear()
                self._rotate()
            chunk += line
        self._append(chunk)

    def _append(self, data: bytes | bytearray) -> None:
        if data:
            os.write(self._fd, data)
            self._size += len(data)

    def _rotate(self) -> None:
        os.close(self._fd)
        for n in range(self.backups - 1, 0, -1):
            older = f"{self.path}.{n}"
            if os.path.exists(older):
                os.replace(older, f"{self.path}.{n + 1}")
        if self.backups > 0:
            os.replace(self.path, f"{self.path}.1")
        else:
            os.unlink(self.path)
        self._open()

    def close(self) -> None:
        self.flush()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
