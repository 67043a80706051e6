"""ImageLocality: prefer nodes that already hold the pod's images (status.images), weighted by the
image size and by how many nodes have it, so one widespread image does not pull everything to a
few nodes. Kubernetes' thresholds: below 23 MiB counts as nothing, 1000 MiB per container is full."""

from __future__ import annotations

import numpy as np

from corral.scheduler.framework.interface import CycleState, Plugin, count_rows
from corral.scheduler.framework.status import SKIP, SUCCESS, Status

NAME = "ImageLocality"
MIN_THRESHOLD = 23 * 1024 * 1024
MAX_CONTAINER_THRESHOLD = 1000 * 1024 * 1024


def image_names(image: str) -> tuple[str, ...]:
    """The names a node may list an image under: as written, and with the implicit ``:latest``."""
    last = image.rsplit("/", 1)[-1]
    if ":" in last or "@" in last:
        return (image,)
    return (image, f"{image}:latest")


def node_columns(table, image: str) -> np.ndarray | None:
    found = None
    for name in image_names(image):
        col = table.images.get(name)
        if col is not None:
            found = col.copy() if found is None else found | col
    return found


def image_size(table, image: str) -> int:
    return max((table.image_sizes.get(n, 0) for n in image_names(image)), default=0)


class ImageLocality(Plugin):
    NAME = NAME

    def pre_score(self, state: CycleState, pod, rows: np.ndarray) -> Status:
        table = self.cache.table
        if not table.images:
            return SKIP  # no node reports images
        images = pod.init_images + pod.images
        return SUCCESS if any(node_columns(table, i) is not None for i in images) else SKIP

    def score(self, state: CycleState, pod, rows: np.ndarray) -> np.ndarray:
        """Kubernetes' arithmetic: each container whose image the node holds adds
        ⌊size × (nodes holding it / all nodes)⌋; the sum, clamped to [23 MiB, 1000 MiB × containers],
        maps linearly onto 0–100 with integer division."""
        table = self.cache.table
        total_nodes = max(table.node_count, 1)
        images = pod.init_images + pod.images
        total = np.zeros(count_rows(rows), dtype=np.float64)
        for image in images:  # once per container, as Kubernetes counts them
            col = node_columns(table, image)
            if col is None:
                continue
            have = col[: table.size] & table.valid[: table.size]
            scaled = np.floor(image_size(table, image) * (have.sum() / total_nodes))
            total += have[rows] * scaled
        high = MAX_CONTAINER_THRESHOLD * max(len(images), 1)
        np.clip(total, MIN_THRESHOLD, high, out=total)
        return np.floor((total - MIN_THRESHOLD) * 100 / (high - MIN_THRESHOLD))
