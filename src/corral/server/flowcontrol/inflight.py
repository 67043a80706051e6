"""Requests in flight, limited as kube-apiserver's ``--max-requests-inflight`` and
``--max-mutating-requests-inflight`` limit them: past the limit a request is answered 429 with
``Retry-After`` at once, before it costs anything, instead of queuing until every client times out.

Two lanes, each with its own counts: the cluster's own components (nodes, the scheduler, the
controllers and other servers, i.e. ``system:nodes``, ``system:masters`` and the
``system:kube-scheduler`` user) and everyone else, so that a flood of user requests cannot starve
node heartbeats or bindings; in the users' lane, no one user holds more than half of it, so one
client's flood leaves room for everyone else's requests. Long-running requests (watches, followed
logs, throughput tests) are not counted here: they are bounded elsewhere.

Counted after authentication (the lane is the user's), before the body is read. Watches are
counted per user instead (``watches_per_user``, default 1,000): each holds a buffer in the server.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from aiohttp import web

from corral.pki import MASTERS_GROUP, NODES_GROUP
from corral.server import errors
from corral.server.params import is_true

__all__ = ["InflightLimits", "DEFAULT_READS", "DEFAULT_WRITES", "DEFAULT_WATCHES_PER_USER", "RETRY_AFTER_SECONDS"]

DEFAULT_READS = 400  # kube-apiserver's defaults
DEFAULT_WRITES = 200
DEFAULT_WATCHES_PER_USER = 1000
RETRY_AFTER_SECONDS = 1
SYSTEM_USERS = frozenset({"system:kube-scheduler", "system:kube-controller-manager"})
SYSTEM_GROUPS = frozenset({MASTERS_GROUP, NODES_GROUP})
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# No user holds more than this share of the users' lane: one client's flood leaves the rest to the
# others (kube-apiserver's API Priority and Fairness queues per user; this bounds instead of queuing).
USER_SHARE = 0.5


class TooManyRequests(errors.ApiError):
    def __init__(self, message: str = "Too many requests, please try again later.") -> None:
        super().__init__(429, "TooManyRequests", message, {"retryAfterSeconds": RETRY_AFTER_SECONDS})


def long_running(request: web.Request) -> bool:
    """Watches and streams: they hold a connection for minutes by design."""
    if request.path.startswith("/corral/v1/throughput"):
        return True
    if not request.query_string:  # most requests: no query to parse (parsing it cost ~1.5 µs)
        return False
    query = request.query
    return is_true(query.get("watch")) or (is_true(query.get("follow")) and request.path.endswith("/log"))


class InflightLimits:
    def __init__(self, *, reads: int = DEFAULT_READS, writes: int = DEFAULT_WRITES,
                 watches_per_user: int = DEFAULT_WATCHES_PER_USER) -> None:
        self.limits = {False: reads, True: writes}  # by "mutating"
        self.counts: dict[tuple[bool, bool], int] = {}  # (system lane, mutating) → in flight
        self.per_user: dict[tuple[bool, str], int] = {}  # (mutating, user) → in flight, users' lane only
        self.watches_per_user = watches_per_user
        self.watches: dict[str, int] = {}  # user → open watches
        self.refused = 0

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
        if count >= self.limits[mutating]:
            self.refused += 1
            raise TooManyRequests()
        held = None
        if not system:
            held = (mutating, user)
            mine = self.per_user.get(held, 0)
            if mine >= max(1, int(self.limits[mutating] * USER_SHARE)):
                self.refused += 1
                raise TooManyRequests(f'user "{user}" has {mine} {"writes" if mutating else "reads"} in flight, its '
                                      "share of the users' lane; try again later")
            self.per_user[held] = mine + 1
        self.counts[key] = count + 1
        return key, held

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
