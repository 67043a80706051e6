"""PrioritySort: the active queue serves higher priority first, then earlier arrival."""

from __future__ import annotations

from corral.scheduler.framework.interface import Plugin

NAME = "PrioritySort"


class PrioritySort(Plugin):
    NAME = NAME

    def sort_key(self, queued) -> tuple:
        """Smaller sorts first: (-priority, when the pod was first queued)."""
        return (-queued.info.priority, queued.initial_attempt)
