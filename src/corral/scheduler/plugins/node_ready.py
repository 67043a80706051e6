"""NodeReady: only nodes that report Ready and have sent a heartbeat recently take new pods.

Why: a node whose agent stopped reporting may be gone; placing pods there strands them until the
node lifecycle controller notices. corral checks freshness at scheduling time (cara's 90 s rule),
instead of waiting for a NotReady taint.
"""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import ALL_PASS, CycleState, FilterResult, Plugin, Reason

NAME = "NodeReady"
NOT_READY = "node(s) were not ready"
STALE = "node(s) had no heartbeat for more than {seconds}s"
DEFAULT_FRESHNESS_SECONDS = 90


class NodeReady(Plugin):
    NAME = NAME

    def __init__(self, handle) -> None:
        super().__init__(handle)
        self.freshness = float(self.handle.args.get("heartbeatFreshnessSeconds", DEFAULT_FRESHNESS_SECONDS))
        self._cached: tuple[tuple[int, int], FilterResult] | None = None

    def filter(self, state: CycleState, pod, candidates: np.ndarray) -> FilterResult:
        table = self.cache.table
        now = self.handle.clock()
        # The answer changes only when a node does or the clock passes a second: reuse it meanwhile.
        key = (table.version, int(now))
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        size = table.size
        not_ready = ~table.ready[:size]
        stale = table.ready[:size] & (table.heartbeat[:size] < now - self.freshness)
        bad = not_ready | stale
        result = ALL_PASS if not bad[table.valid[:size]].any() else FilterResult(~bad, [
            Reason(NOT_READY, not_ready, unresolvable=True),
            Reason(STALE.format(seconds=int(self.freshness)), stale, unresolvable=True),
        ])
        self._cached = (key, result)
        return result
