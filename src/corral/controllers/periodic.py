"""What every controller here shares: a reconcile pass every ``interval`` seconds, started and
stopped with the leader, that survives whatever one pass meets."""

from __future__ import annotations

import asyncio
import logging

from corral.aio import cancel_and_wait

__all__ = ["PeriodicController"]


class PeriodicController:
    name = "controller"  # the task's name
    what = "controller"  # in the log, when a pass fails: "<what> round failed"
    interval = 2.0

    _task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self.name)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    async def reconcile(self) -> None:  # pragma: no cover - every controller has its own
        raise NotImplementedError

    def pause(self) -> float:
        """Seconds from the end of one pass to the start of the next."""
        return self.interval

    async def _run(self) -> None:
        while True:
            try:
                await self.reconcile()
            except Exception:  # keep going whatever one pass met
                logging.getLogger(type(self).__module__).exception("%s round failed", self.what)
            await asyncio.sleep(self.pause())
