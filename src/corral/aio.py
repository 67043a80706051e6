"""Small asyncio helpers shared by every layer."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Callable, Coroutine, Generator

__all__ = ["cancel_and_wait", "wait_for_termination", "OnLoop", "Backlog", "without_grpc_fork_handlers"]


class Backlog(asyncio.Queue):
    """A bounded queue of writes made in the background (events): :meth:`offer` never waits; past
    ``maxsize`` waiting, an item is dropped, counted (``dropped``) and logged on ``log`` as a warning
    at most once per ``warn_interval`` seconds of ``clock``. ``who`` starts the warning; ``counted_in``
    ends its figure (where the count shows)."""

    def __init__(self, maxsize: int, log: logging.Logger, *, who: str = "", counted_in: str = "",
                 warn_interval: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(maxsize)
        self.dropped = 0
        self._log, self._who, self._counted_in = log, who, counted_in
        self._warn_interval, self._clock = warn_interval, clock
        self._warned_at: float | None = None  # when a drop was last logged

    def offer(self, item: Any) -> None:
        try:
            self.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1
            now = self._clock()
            if self._warned_at is None or now - self._warned_at >= self._warn_interval:
                self._warned_at = now
                self._log.warning("%s%d events wait to be written, as many as are kept: new ones are dropped "
                                  "until some are written (%d dropped so far%s)", self._who, self.qsize(),
                                  self.dropped, self._counted_in)


class OnLoop:
    """Await a coroutine and measure the time it held the event loop (``busy``, seconds): the
    stretches it ran between its awaits, not the time it waited (tasks it started count apart).
    What a long computation costs everyone else, apart from how long its writes took."""

    def __init__(self, coro: Coroutine[Any, Any, Any]) -> None:
        self.coro = coro
        self.busy = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value, error = self.coro, None, None
        while True:
            start = time.perf_counter()
            try:
                step = coro.throw(error) if error is not None else coro.send(value)
            except StopIteration as stop:
                return stop.value
            finally:
                self.busy += time.perf_counter() - start
            try:
                value, error = (yield step), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation, thrown into the coroutine where it waits
                value, error = None, exc


async def cancel_and_wait(*tasks: asyncio.Task | None) -> None:
    """Cancel the tasks and wait until each has finished; a task's CancelledError is swallowed."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    for task in live:
        try:
            await task
        except asyncio.CancelledError:
            pass


async def wait_for_termination() -> None:
    """Return when the process gets SIGINT or SIGTERM (what a foreground service waits for)."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def without_grpc_fork_handlers() -> None:
    """Call before gRPC is imported: its fork handlers off (unless the environment says otherwise).
    corral forks only to run another program (the scheduler's child process, a container's process),
    never to go on using gRPC in the child; with the handlers on, a server on etcd logged "Other
    threads are currently calling into gRPC, skipping fork() handlers" whenever it started one."""
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
