"""DefaultBinder: writes the binding (spec.nodeName) through the scheduler's binder: straight to
the store when the scheduler runs inside the server, through the API's binding subresource when it
runs on its own."""

from __future__ import annotations

from corral.scheduler.framework.interface import CycleState, Plugin
from corral.scheduler.framework.status import Status

NAME = "DefaultBinder"


class DefaultBinder(Plugin):
    NAME = NAME

    async def bind(self, state: CycleState, pod, node: str) -> Status:
        binder = self.handle.binder
        if binder is None:
            return Status.error("no binder configured", NAME)
        return await binder.bind(pod, node)
