"""NetworkThroughput: prefer nodes that would pull the pod's missing images soonest.

Advisory only: it estimates pull time as (bytes of the pod's images the node lacks) × 8 ÷ (the
node's measured download throughput), and never filters a node out. Image sizes come from the nodes
that already hold an image; nodes without a throughput measurement get a neutral score.
"""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import CycleState, Plugin, count_rows
from corral.scheduler.framework.status import SKIP, SUCCESS, Status
from corral.scheduler.plugins.image_locality import image_size, node_columns

NAME = "NetworkThroughput"
NEUTRAL = 50.0


class NetworkThroughput(Plugin):
    NAME = NAME

    def pre_score(self, state: CycleState, pod, rows: np.ndarray) -> Status:
        # It reads the rows (whether any has a throughput) but does not say so (pre_score_reads_rows):
        # given every row instead of the feasible ones it skips less often, never more, and when it
        # does not skip, the remembered decision gives way to the full evaluation anyway.
        table = self.cache.table
        if not table.images:
            return SKIP  # no node reports images
        sized = [i for i in pod.images if image_size(table, i) > 0]
        if not sized or np.isnan(table.download_bps[rows]).all():
            return SKIP
        state[NAME] = sized
        return SUCCESS

    def score(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        table = self.cache.table
        missing_bits = np.zeros(count_rows(rows), dtype=np.float64)
        for image in state[NAME]:  # each has a size, so some node listed it: the table has its column
            missing_bits += ~node_columns(table, image)[rows] * image_size(table, image) * 8.0
        with np.errstate(divide="ignore", invalid="ignore"):
            return missing_bits / table.download_bps[rows]  # seconds; NaN where unmeasured

    def normalize(self, state: CycleState, pod, seconds: np.ndarray) -> np.ndarray:
        known = np.isfinite(seconds)
        out = np.full(len(seconds), NEUTRAL)
        if known.any():
            slowest = seconds[known].max()
            out[known] = 100.0 if slowest == 0 else np.floor(100.0 * (1 - seconds[known] / slowest))
        return out
