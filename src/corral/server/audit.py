"""The audit log: one JSON line per request that changed state or was refused.

Each line: ``time`` (RFC 3339, microseconds), ``user``, ``groups``, ``verb``, ``resource``
(``pods`` or ``pods/status``; a path for anything outside the API), ``namespace``, ``name`` and the
response ``code``. Reads that succeed are not logged (they are most of the traffic and change
nothing); every 401 and 403 is. Lines are written as the requests finish, straight to the file (no
buffer to lose on a crash), which is created 0600. When it passes ``max_bytes`` it is renamed to
``PATH.1`` (older ones to ``.2`` … ``.{backups}``, the oldest dropped) and a new one begun.
"""

from __future__ import annotations

import errno
import os
import time

import msgspec

__all__ = ["AuditLog", "DEFAULT_MAX_BYTES", "DEFAULT_BACKUPS"]

DEFAULT_MAX_BYTES = 100 * 2**20
DEFAULT_BACKUPS = 5
_encode = msgspec.json.Encoder().encode


class _Entry(msgspec.Struct):
    """One line, in this order (a struct encodes several times faster than a dict)."""

    time: str
    user: str
    groups: tuple[str, ...]
    verb: str
    resource: str
    namespace: str
    name: str
    code: int


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
        line = _encode(_Entry(self._now(), user, groups, verb, resource, namespace, name, code)) + b"\n"
        if self._size + len(line) > self.max_bytes and self._size > 0:
            self._rotate()
        os.write(self._fd, line)
        self._size += len(line)

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
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
