"""Exec and attach sessions of the process runtime.

For exec, the runtime starts the command (see ``ProcessRuntime.exec``) and hands it to a
:class:`PipeSession` or, with ``-t``, a :class:`PtySession`; the agent reads its output, feeds its
stdin and, at the end, closes it, which kills the command's whole process group (it runs in a
session of its own) if it still runs. For attach, an :class:`AttachedSession` follows what the
container appends to its log and writes to its stdin pipe; closing it leaves the container be.
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

__all__ = ["PipeSession", "PtySession", "AttachedSession", "set_window_size", "exit_code"]

_READ = 64 * 1024


def set_window_size(fd: int, width: int, height: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))


def exit_code(returncode: int) -> int:
    """A process's exit code as a shell and Kubernetes report it: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


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
        return exit_code(await self._proc.wait())

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
        return exit_code(await self._proc.wait())

    async def close(self) -> None:
        _kill_group(self._proc.pid)
        if self._master >= 0:
            asyncio.get_running_loop().remove_reader(self._master)
            os.close(self._master)
            self._master = -1


class AttachedSession:
    """A running container's output from now on, and its stdin pipe (``writer``, -1 for none)."""

    def __init__(self, log_path, alive, writer: int) -> None:
        self._log_path = log_path
        self._alive = alive
        self._writer = writer

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        with open(self._log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            while True:
                chunk = f.read(_READ)
                if chunk:
                    yield 1, chunk
                    continue
                if not self._alive():
                    if rest := f.read():
                        yield 1, rest
                    return
                await asyncio.sleep(0.1)

    async def write(self, data: bytes) -> None:
        while data and self._writer >= 0:
            try:
                data = data[os.write(self._writer, data):]
            except BlockingIOError:  # the container reads slower than the user types
                await asyncio.sleep(0.01)
            except OSError:
                return

    async def close_stdin(self) -> None:
        """The user's input ends; the container's stdin stays open for the next attachment."""
        if self._writer >= 0:
            os.close(self._writer)
            self._writer = -1

    def resize(self, width: int, height: int) -> None:
        pass

    async def wait(self) -> int:
        return 0  # the container's own end is reported in its status, not to whoever attached

    async def close(self) -> None:
        await self.close_stdin()
