"""``kubectl exec`` and ``attach`` on the docker runtime: Docker's exec and attach APIs, their
streams read without threads.

The exec is created with the SDK (a plain request), then started by hand on a connection of our
own to the engine — ``POST /exec/{id}/start`` with ``Upgrade: tcp``, after which the connection *is*
the command's stdio — so that no byte of its output can sit in an HTTP library's read buffer and
so that reading it needs no thread. Without a TTY the engine multiplexes stdout and stderr: each
piece is preceded by 8 bytes, the stream (1 or 2), three zeros, the length (big-endian).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import struct
from typing import Any, AsyncIterator
from urllib.parse import urlsplit

from corral.agent.runtimes.base import StreamError

__all__ = ["DockerExecSession", "open_exec", "open_attach"]

_READ = 64 * 1024
MAX_HEADER_BYTES = 64 * 1024


async def _connect(base_url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    url = urlsplit(base_url)
    if url.scheme in ("unix", "http+unix"):
        return await asyncio.open_unix_connection(url.path)
    if url.scheme in ("tcp", "http"):
        return await asyncio.open_connection(url.hostname, url.port or 2375)
    raise StreamError(f"exec needs the Docker engine on a unix socket or plain tcp, not {url.scheme}://")


async def _hijack(base_url: str, path: str, body: bytes, what: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """POST ``path`` asking the engine to turn the connection into the stream (``Upgrade: tcp``)."""
    try:
        reader, writer = await _connect(base_url)
    except OSError as exc:
        raise StreamError(f"cannot reach the Docker engine: {exc}") from None
    writer.write(f"POST {path} HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\n"
                 f"Connection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
        writer.close()
        raise StreamError(f"the Docker engine did not start the {what}: {exc}") from None
    status = head.split(b" ", 2)[1:2]
    if status not in ([b"101"], [b"200"]):
        writer.close()
        raise StreamError(f"the Docker engine refused the {what}: {head.splitlines()[0].decode(errors='replace')}")
    return reader, writer


async def open_exec(base_url: str, api: Any, exec_id: str, *, tty: bool) -> DockerExecSession:
    """Start the created exec ``exec_id`` and return its session; raises :class:`StreamError`."""
    body = json.dumps({"Detach": False, "Tty": tty}).encode()
    reader, writer = await _hijack(base_url, f"/exec/{exec_id}/start", body, "exec")
    return DockerExecSession(api, exec_id, reader, writer, tty=tty)


async def open_attach(base_url: str, api: Any, container_id: str, *, stdin: bool, tty: bool) -> DockerExecSession:
    """Attach to the running container's own stdio from now on (``kubectl attach``)."""
    query = f"stream=1&stdout=1&stderr=1&stdin={1 if stdin else 0}"
    reader, writer = await _hijack(base_url, f"/containers/{container_id}/attach?{query}", b"", "attach")
    return DockerExecSession(api, container_id, reader, writer, tty=tty, attached=True)


class DockerExecSession:
    def __init__(self, api: Any, exec_id: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 tty: bool, attached: bool = False) -> None:
        self._attached = attached  # to the container itself: ``exec_id`` is the container's id
        self._api = api
        self._id = exec_id
        self._reader = reader
        self._writer = writer
        self._tty = tty
        self._resizing: asyncio.Task | None = None

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        try:
            if self._tty:
                while chunk := await self._reader.read(_READ):
                    yield 1, chunk
                return
            while True:
                head = await self._reader.readexactly(8)
                stream, size = head[0], struct.unpack(">I", head[4:])[0]
                data = await self._reader.readexactly(size)
                if stream in (1, 2) and data:
                    yield stream, data
        except (asyncio.IncompleteReadError, ConnectionResetError):
            return

    async def write(self, data: bytes) -> None:
        if self._writer.is_closing():
            return
        self._writer.write(data)
        try:
            await self._writer.drain()
        except (ConnectionResetError, BrokenPipeError):
            pass

    async def close_stdin(self) -> None:
        if self._tty:
            await self.write(b"\x04")
        elif self._writer.can_write_eof() and not self._writer.is_closing():
            self._writer.write_eof()

    def resize(self, width: int, height: int) -> None:
        """Applied in the order asked (each waits for the one before: the last size wins)."""
        before = self._resizing

        async def apply() -> None:
            if before is not None:
                await asyncio.wait([before])
            try:
                resize = self._api.resize if self._attached else self._api.exec_resize
                await asyncio.to_thread(resize, self._id, height=height, width=width)
            except Exception:  # a resize of an exec that has just ended: nothing to do
                pass

        self._resizing = asyncio.ensure_future(apply())

    async def _inspect(self) -> dict[str, Any]:
        return await asyncio.to_thread(self._api.exec_inspect, self._id)

    async def wait(self) -> int:
        if self._attached:  # the container goes on (or ends by itself): nothing of the user's to report
            return 0
        for _ in range(100):  # the engine notes the exit a moment after the stream ends
            info = await self._inspect()
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            await asyncio.sleep(0.05)
        return -1

    async def close(self) -> None:
        self._writer.close()
        if self._attached:  # detaching leaves the container running
            return
        try:
            info = await self._inspect()
        except Exception:  # the container has gone, and the exec with it
            return
        pid = info.get("Pid") or 0
        if info.get("Running") and pid > 0:  # the user left: the command ends (it runs in the host's pid view)
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
