"""NodeReady: only nodes that report Ready and have sent a heartbeat recently take new pods.

Why: a node whose agent stopped reporting may be gone; placing pods there strands them until the
node lifecycle controller notices. corral checks freshness at scheduling time (cara's 90 s rule),
instead of waiting for a NotReady taint. Past 10,000 nodes the agents heartbeat less often
(:mod:`corral.api.kinds.coordination`), and the freshness required grows by the same factor; the
server passes its own heartbeat settings (``nodeHeartbeatSeconds``, ``maxNodeHeartbeatsPerSecond``).
"""

from __future__ import annotations

import numpy as np

from corral.api.kinds.coordination import DEFAULT_INTERVAL, DEFAULT_MAX_PER_SECOND, HeartbeatScale
from corral.scheduler.framework.interface import ALL_PASS, CycleState, FilterResult, Plugin, Reason

NAME = "NodeReady"
NOT_READY = "node(s) were not ready"
STALE = "node(s) had no heartbeat for more than {seconds}s"
DEFAULT_FRESHNESS_SECONDS = 90


class NodeReady(Plugin):
    NAME = NAME
    ROW_LOCAL_FILTER = True
    TEMPLATE_SIGNATURE = True

    def __init__(self, handle) -> None:
        super().__init__(handle)
        args = self.handle.args
        self.base_freshness = float(args.get("heartbeatFreshnessSeconds", DEFAULT_FRESHNESS_SECONDS))
        self.heartbeats = HeartbeatScale(float(args.get("nodeHeartbeatSeconds", DEFAULT_INTERVAL)),
                                         float(args.get("maxNodeHeartbeatsPerSecond", DEFAULT_MAX_PER_SECOND)))
        # (table version, size, computed at, valid until, result): the answer stays exact until the
        # first fresh heartbeat ages past the limit, or a node changes.
        self._cached: tuple[int, int, float, float, FilterResult] | None = None
        self._aged = 0  # bumped when time (not a node's change) may have changed some row's answer

    def signature(self, pod) -> object:
        return ()

    def memo_key(self) -> object:
        self._result()
        return self._aged

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        return self._result()

    def _result(self) -> FilterResult:
        table = self.cache.table
        now = self.handle.clock()
        cached = self._cached
        if cached is not None:
            in_time = cached[2] <= now <= cached[3]
            if in_time and cached[0] == table.version and cached[1] == table.size:
                return cached[4]
            if not in_time:
                self._aged += 1
        size = table.size
        freshness = self.base_freshness * self.heartbeats.factor(table.node_count)
        ready, valid = table.ready[:size], table.valid[:size]
        not_ready = ~ready
        stale = ready & (table.heartbeat[:size] < now - freshness)
        bad = not_ready | stale
        result = ALL_PASS if not bad[valid].any() else FilterResult(~bad, [
            Reason(NOT_READY, not_ready, unresolvable=True),
            Reason(STALE.format(seconds=int(freshness)), stale, unresolvable=True),
        ])
        fresh = ready & ~stale
        until = float(table.heartbeat[:size][fresh].min()) + freshness if fresh.any() else float("inf")
        self._cached = (table.version, size, now, until, result)
        return result

    def filter_rows(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        passed = self.filter(state, pod, rows).passed
        return np.ones(len(rows), dtype=bool) if passed is None else passed[rows]

    def filter_one(self, state: CycleState, pod, row: int) -> bool:
        passed = self.filter(state, pod, None).passed
        return passed is None or bool(passed[row])
