"""Exec sessions over a local child process: with pipes, or with a pseudo-terminal (``-t``).

The process runtime starts the command (see ``ProcessRuntime.exec``) and hands it to one of these;
the agent reads its output, feeds its stdin and, at the end, closes it, which kills the command's
whole process group (it runs in a session of its own) if it still runs.
"""

from __future__ import annotations

import asyncio
import errno
import fcntl
import os
import signal
import struct
import termios
from typing import AsyncIterator

__all__ = ["PipeSession", "PtySession", "set_window_size"]

_READ = 64 * 1024


def set_window_size(fd: int, width: int, height: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class PipeSession:
    """stdout and stderr apart, as kubectl shows them without ``-t``."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue(maxsize=16)

        async def pump(channel: int, stream: asyncio.StreamReader | None) -> None:
            while stream is not None:
                chunk = await stream.read(_READ)
                if not chunk:
                    break
                await queue.put((channel, chunk))
            await queue.put(None)

        pumps = [asyncio.ensure_future(pump(1, self._proc.stdout)), asyncio.ensure_future(pump(2, self._proc.stderr))]
        try:
            ended = 0
            while ended < 2:
                item = await queue.get()
                if item is None:
                    ended += 1
                else:
                    yield item
        finally:
            for task in pumps:
                task.cancel()

    async def write(self, data: bytes) -> None:
        stdin = self._proc.stdin
        if stdin is None or stdin.is_closing():
            return
        stdin.write(data)
        try:
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass

    async def close_stdin(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.is_closing():
            self._proc.stdin.close()

    def resize(self, width: int, height: int) -> None:
        pass

    async def wait(self) -> int:
        code = await self._proc.wait()
        return 128 - code if code < 0 else code

    async def close(self) -> None:
        _kill_group(self._proc.pid)
        await self.close_stdin()


class PtySession:
    """One terminal: the command's stdin, stdout and stderr are the pseudo-terminal's slave side;
    the agent holds the master (output, keystrokes, the window size)."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int) -> None:
        self._proc = proc
        self._master = master
        os.set_blocking(master, False)

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()

        def readable() -> None:
            try:
                chunk = os.read(self._master, _READ)
            except BlockingIOError:
                return
            except OSError:  # EIO: every holder of the slave side has gone
                chunk = b""
            if not chunk:
                loop.remove_reader(self._master)
            queue.put_nowait(chunk or None)

        loop.add_reader(self._master, readable)
        try:
            while (chunk := await queue.get()) is not None:
                yield 1, chunk
        finally:
            if self._master >= 0:
                loop.remove_reader(self._master)

    async def write(self, data: bytes) -> None:
        while data:
            try:
                written = os.write(self._master, data)
            except BlockingIOError:
                await asyncio.sleep(0.01)
                continue
            except OSError as exc:
                if exc.errno in (errno.EIO, errno.EBADF):
                    return
                raise
            data = data[written:]

    async def close_stdin(self) -> None:
        await self.write(b"\x04")  # end of input, as a terminal says it

    def resize(self, width: int, height: int) -> None:
        try:
            set_window_size(self._master, width, height)
        except OSError:
            pass

    async def wait(self) -> int:
        code = await self._proc.wait()
        return 128 - code if code < 0 else code

    async def close(self) -> None:
        _kill_group(self._proc.pid)
        if self._master >= 0:
            asyncio.get_running_loop().remove_reader(self._master)
            os.close(self._master)
            self._master = -1
