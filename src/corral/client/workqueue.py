"""A rate-limited work queue with client-go's guarantees, for controllers and the scheduler's binder.

- **Dedupe**: a key added several times before a worker takes it is processed once.
- **One worker per key**: a key being processed is not handed out again; if it is added meanwhile,
  it is queued once more when the worker calls :meth:`done`.
- **Per-item exponential backoff**: :meth:`add_rate_limited` delays a key by
  ``base * 2**failures`` (capped); :meth:`forget` resets its count after a success.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import time
from typing import Callable, Generic, Hashable, TypeVar

__all__ = ["WorkQueue", "ShutDown"]

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """The queue was shut down; workers should exit."""


class WorkQueue(Generic[K]):
    def __init__(self, *, base_delay: float = 0.005, max_delay: float = 1000.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._queue: collections.deque[K] = collections.deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._waiting: list[tuple[float, int, K]] = []  # (ready_at, seq, key)
        self._seq = itertools.count()
        self._base, self._max = base_delay, max_delay
        self._clock = clock
        self._cond = asyncio.Condition()
        self._timer: asyncio.TimerHandle | None = None
        self._shutting_down = False

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: K) -> None:
        """Queue ``key`` now, unless it is already queued; if it is being processed, after that."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.append(key)
            self._notify()

    def add_after(self, key: K, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        heapq.heappush(self._waiting, (self._clock() + delay, next(self._seq), key))
        self._schedule_timer()

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after its backoff; returns the delay chosen."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(self._base * (2 ** failures), self._max)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: K) -> int:
        return self._failures.get(key, 0)

    async def get(self) -> K:
        """The next key to work on; the caller must call :meth:`done` with it."""
        async with self._cond:
            while not self._queue:
                if self._shutting_down:
                    raise ShutDown()
                await self._cond.wait()
            key = self._queue.popleft()
            self._dirty.discard(key)
            self._processing.add(key)
            return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._notify()

    def shutdown(self) -> None:
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
        self._notify()

    # --- internals ---------------------------------------------------------------------------------------

    def _notify(self) -> None:
        async def wake() -> None:
            async with self._cond:
                self._cond.notify_all()

        asyncio.get_running_loop().create_task(wake())

    def _schedule_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if not self._waiting:
            self._timer = None
            return
        delay = max(0.0, self._waiting[0][0] - self._clock())
        self._timer = asyncio.get_running_loop().call_later(delay, self._release_due)

    def _release_due(self) -> None:
        now = self._clock()
        while self._waiting and self._waiting[0][0] <= now:
            _, _, key = heapq.heappop(self._waiting)
            self.add(key)
        self._schedule_timer()
