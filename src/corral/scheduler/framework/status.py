"""The result of a plugin call: a code, the reasons, and the plugin that said so."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Code", "Status", "SUCCESS", "SKIP"]


class Code(enum.IntEnum):
    """What a status does to the pod.

    - ``SUCCESS``: go on to the next step.
    - ``ERROR``: something broke (not the pod's fault); the pod goes back through backoff and is
      retried; preemption is not attempted.
    - ``UNSCHEDULABLE``: the pod does not fit now; it waits in the unschedulable set until a cluster
      event could make it fit; preemption may free room for it.
    - ``UNSCHEDULABLE_AND_UNRESOLVABLE``: as unschedulable, but removing pods would not help (a
      node selector, a taint): preemption does not consider the nodes so marked.
    - ``WAIT``: a Permit plugin holds the pod before binding.
    - ``SKIP``: a PreFilter or PreScore plugin has nothing to do for this pod; the framework skips
      its Filter or Score for this cycle.
    - ``PENDING``: a PreEnqueue plugin keeps the pod out of the active queue for now.
    """

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def rejects(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    def message(self) -> str:
        return ", ".join(self.reasons)

    @classmethod
    def error(cls, reason: str, plugin: str = "") -> "Status":
        return cls(Code.ERROR, (reason,), plugin)

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "", unresolvable: bool = False) -> "Status":
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
        return cls(code, reasons, plugin)


SUCCESS = Status()
SKIP = Status(Code.SKIP)
