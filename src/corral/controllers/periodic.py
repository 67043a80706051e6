"""What every controller here shares: a reconcile pass every ``interval`` seconds, started and
stopped with the leader, that survives whatever one pass meets."""

from __future__ import annotations

import asyncio
import logging

from corral.aio import cancel_and_wait

__all__ = ["PeriodicController"]

log = logging.getLogger(__name__)


class PeriodicController:
    name = "controller"  # the task's name, and the log's
    interval = 2.0

    _task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def reconcile(self) -> None:  # pragma: no cover - every controller has its own
        raise NotImplementedError

    async def _run(self) -> None:
        while True:
            try:
                await self.reconcile()
            except Exception:  # keep going whatever one pass met
                log.exception("%s pass failed", self.name)
            await asyncio.sleep(self.interval)
