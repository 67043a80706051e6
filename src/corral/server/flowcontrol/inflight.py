"""Requests in flight, limited as kube-apiserver's ``--max-requests-inflight`` and
``--max-mutating-requests-inflight`` limit them, with fair queuing per user in front of the users'
seats, as its API Priority and Fairness queues per flow.

Two lanes, each with its own counts: the cluster's own components (nodes, the scheduler, the
controllers and other servers, i.e. ``system:nodes``, ``system:masters`` and the
``system:kube-scheduler`` user) and everyone else, so that a flood of user requests cannot starve
node heartbeats or bindings. The cluster's lane answers 429 with ``Retry-After`` at once when full.
In the users' lane no one user holds more than half the seats, so one client's flood leaves room for
everyone else's requests; a request that finds no seat for it waits in its user's queue (at most
``queue_per_user`` waiting, ``queue_wait`` seconds each), and each seat that frees goes to the next
user in turn that has one waiting, round robin, so a user with a few requests is served between the
requests of one with thousands. A full queue, or a wait that runs out, is a 429 with
``Retry-After``. Long-running requests (watches, followed logs, exec and port-forward, throughput tests) are not counted
here: they are bounded elsewhere.

Counted after authentication (the lane is the user's), before the body is read. Watches are
counted per user instead (``watches_per_user``, default 1,000): each holds a buffer in the server.
"""

from __future__ import annotations

import asyncio
import collections
from contextlib import contextmanager
from typing import Iterator

from aiohttp import web

from corral.pki import MASTERS_GROUP, NODES_GROUP
from corral.server import errors
from corral.server.http.params import is_true

__all__ = ["InflightLimits", "Queued", "DEFAULT_READS", "DEFAULT_WRITES", "DEFAULT_WATCHES_PER_USER",
           "RETRY_AFTER_SECONDS"]

DEFAULT_READS = 400  # kube-apiserver's defaults
DEFAULT_WRITES = 200
DEFAULT_WATCHES_PER_USER = 1000
RETRY_AFTER_SECONDS = 1
SYSTEM_USERS = frozenset({"system:kube-scheduler", "system:kube-controller-manager"})
SYSTEM_GROUPS = frozenset({MASTERS_GROUP, NODES_GROUP})
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# No user holds more than this share of the users' lane: one client's flood leaves the rest to the
# others, whose requests then find seats at once.
USER_SHARE = 0.5
QUEUE_PER_USER = 100  # requests of one user waiting for a seat; past it, 429 at once
QUEUE_WAIT = 10.0  # seconds a request waits for a seat before its 429 (kube-apiserver's is 15)


class TooManyRequests(errors.ApiError):
    def __init__(self, message: str = "Too many requests, please try again later.") -> None:
        super().__init__(429, "TooManyRequests", message, {"retryAfterSeconds": RETRY_AFTER_SECONDS})


_STREAMS = ("/exec", "/attach", "/portforward")


def long_running(request: web.Request) -> bool:
    """Watches and streams (logs followed, exec, port-forward): they hold a connection for minutes
    by design."""
    if request.path.startswith("/corral/v1/throughput") or request.path.endswith(_STREAMS):
        return True
    if not request.query_string:  # most requests: no query to parse (parsing it cost ~1.5 µs)
        return False
    query = request.query
    return is_true(query.get("watch")) or (is_true(query.get("follow")) and request.path.endswith("/log"))


class Queued(Exception):
    """Raised by :meth:`InflightLimits.enter` for a request that must wait for a seat: pass it to
    :meth:`InflightLimits.wait`. (An exception keeps the common path, a free seat, a plain call.)"""

    def __init__(self, future: asyncio.Future, mutating: bool, user: str) -> None:
        self.future, self.mutating, self.user = future, mutating, user


class InflightLimits:
    def __init__(self, *, reads: int = DEFAULT_READS, writes: int = DEFAULT_WRITES,
                 watches_per_user: int = DEFAULT_WATCHES_PER_USER, queue_per_user: int = QUEUE_PER_USER,
                 queue_wait: float = QUEUE_WAIT) -> None:
        self.limits = {False: reads, True: writes}  # by "mutating"
        self.counts: dict[tuple[bool, bool], int] = {}  # (system lane, mutating) → in flight
        self.per_user: dict[tuple[bool, str], int] = {}  # (mutating, user) → in flight, users' lane only
        self.watches_per_user = watches_per_user
        self.watches: dict[str, int] = {}  # user → open watches
        self.queue_per_user, self.queue_wait = queue_per_user, queue_wait
        # Users' lane, by mutating: user → its waiting requests, oldest first; the users in the
        # order their turns come (a served user goes to the back).
        self.queues: dict[bool, collections.OrderedDict[str, collections.deque[asyncio.Future]]] = {
            False: collections.OrderedDict(), True: collections.OrderedDict()}
        self.refused = 0
        self.queued = 0  # requests that waited for a seat

    @contextmanager
    def watching(self, user: str) -> Iterator[None]:
        """Count an open watch of ``user`` while it lasts; :class:`TooManyRequests` past the cap."""
        if self.watches.get(user, 0) >= self.watches_per_user:
            self.refused += 1
            raise TooManyRequests(f'too many watches open for user "{user}" (at most {self.watches_per_user}); '
                                  "close some, or try again later")
        self.watches[user] = self.watches.get(user, 0) + 1
        try:
            yield
        finally:
            self.watches[user] -= 1
            if not self.watches[user]:
                del self.watches[user]

    @staticmethod
    def system(user: str, groups: tuple[str, ...]) -> bool:
        return user in SYSTEM_USERS or not SYSTEM_GROUPS.isdisjoint(groups)

    def enter(self, request: web.Request, user: str, groups: tuple[str, ...]) -> tuple | None:
        """Count the request (until :meth:`leave` with what this returns); raise
        :class:`TooManyRequests` when its lane is full, or when a user holds its share of the
        users' lane. Two calls, not a context manager: a generator-based one cost ~1.5 µs per
        request."""
        if long_running(request):
            return None
        mutating = request.method in MUTATING
        system = self.system(user, groups)
        key = (system, mutating)
        count = self.counts.get(key, 0)
        if system:
            if count >= self.limits[mutating]:
                self.refused += 1
                raise TooManyRequests()
            self.counts[key] = count + 1
            return key, None
        held = (mutating, user)
        if count >= self.limits[mutating] or self.per_user.get(held, 0) >= self._share(mutating) \
                or self.queues[mutating]:  # no seat, or others waited first: wait in turn
            raise Queued(self._enqueue(mutating, user), mutating, user)
        self.per_user[held] = self.per_user.get(held, 0) + 1
        self.counts[key] = count + 1
        return key, held

    def _share(self, mutating: bool) -> int:
        return max(1, int(self.limits[mutating] * USER_SHARE))

    def _enqueue(self, mutating: bool, user: str) -> asyncio.Future:
        waiting = self.queues[mutating].get(user)
        if waiting is None:
            waiting = self.queues[mutating][user] = collections.deque()
        elif len(waiting) >= self.queue_per_user:
            self.refused += 1
            raise TooManyRequests(f'user "{user}" has {len(waiting)} {"writes" if mutating else "reads"} waiting '
                                  "for the server already; try again later")
        future = asyncio.get_running_loop().create_future()
        waiting.append(future)
        self.queued += 1
        self._dispatch(mutating)  # a seat may be free for this user (others wait only for their share)
        return future

    async def wait(self, queued: Queued) -> tuple:
        """The seat a :class:`Queued` request waited for (leave it as :meth:`enter`'s), or
        :class:`TooManyRequests` after ``queue_wait`` seconds."""
        if queued.future.done():
            return queued.future.result()
        timer = asyncio.get_running_loop().call_later(self.queue_wait, self._expire, queued)
        try:
            return await queued.future
        except asyncio.CancelledError:  # the server stops: a seat granted meanwhile is given back
            if queued.future.done() and not queued.future.cancelled() and queued.future.exception() is None:
                self.leave(queued.future.result())
            raise
        finally:
            timer.cancel()

    def _expire(self, queued: Queued) -> None:
        if queued.future.done():
            return
        waiting = self.queues[queued.mutating].get(queued.user)
        if waiting is not None:
            try:
                waiting.remove(queued.future)
            except ValueError:
                pass
            if not waiting:
                del self.queues[queued.mutating][queued.user]
        self.refused += 1
        queued.future.set_exception(TooManyRequests(
            f'user "{queued.user}" waited {self.queue_wait:g} s for the server and was not served; try again later'))

    def _dispatch(self, mutating: bool) -> None:
        """Give the users' free seats to the waiting requests, one user at a time in turn."""
        queues, key, share = self.queues[mutating], (False, mutating), self._share(mutating)
        passed = 0  # users in a row that could take no seat (at their share)
        while queues and self.counts.get(key, 0) < self.limits[mutating] and passed < len(queues):
            user, waiting = next(iter(queues.items()))
            held = (mutating, user)
            while waiting and waiting[0].done():  # given up (cancelled) while waiting
                waiting.popleft()
            if not waiting:
                del queues[user]
                continue
            queues.move_to_end(user)
            if self.per_user.get(held, 0) >= share:
                passed += 1
                continue
            passed = 0
            future = waiting.popleft()
            if not waiting:
                del queues[user]
            self.per_user[held] = self.per_user.get(held, 0) + 1
            self.counts[key] = self.counts.get(key, 0) + 1
            future.set_result((key, held))

    def leave(self, entered: tuple | None) -> None:
        if entered is None:
            return
        key, held = entered
        self.counts[key] -= 1
        if held is not None:
            left = self.per_user[held] - 1
            if left:
                self.per_user[held] = left
            else:
                del self.per_user[held]
            if self.queues[held[0]]:
                self._dispatch(held[0])
