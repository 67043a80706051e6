"""Gang scheduling: a PodGroup's members are bound all together or not at all.

:class:`GangBook` knows the groups (from PodGroup objects) and their members (pods labelled
``scheduling.corral.dev/pod-group``). The :class:`Coscheduling` plugin acts at three points:

- **PreEnqueue** — a member waits outside the queue while its group does not exist or has fewer
  members than ``minMember`` (they could never all be placed); the book offers it again when that
  changes.
- **PreFilter** — a group whose last try timed out is refused for as long as its timeout, so a gang
  that does not fit does not take places again and again from pods that could use them.
- **Permit** — a placed member (assumed in the cache, so its place counts) waits until ``minMember``
  members of its group have a place, then all waiting members bind at once. If that does not happen
  within ``scheduleTimeoutSeconds`` of the first one waiting, or a member fails or goes away, every
  waiting member is refused: its place is given back and it is tried again later.

Waiting costs no binding slot and no thread: each waiting member is a future. The book also
keeps each group's status (members, scheduled, phase, why the rest wait), which the scheduler writes.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from corral.api.kinds.scheduling import DEFAULT_SCHEDULE_TIMEOUT, POD_GROUP_LABEL
from corral.scheduler.framework.interface import CycleState, Plugin
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.framework.status import SKIP, SUCCESS, Code, Status

__all__ = ["Coscheduling", "GangBook", "NAME", "group_of"]

NAME = "Coscheduling"


def group_of(namespace: str, labels: dict[str, str]) -> str | None:
    """The ``namespace/name`` key of the group a pod with ``labels`` belongs to, or None."""
    name = labels.get(POD_GROUP_LABEL)
    return f"{namespace}/{name}" if name else None


@dataclass(slots=True)
class Gang:
    min_member: int = 0  # 0: the PodGroup does not exist (yet)
    timeout: float = DEFAULT_SCHEDULE_TIMEOUT
    members: set[str] = field(default_factory=set)  # pods that exist, pending or placed
    waiting: dict[str, asyncio.Future] = field(default_factory=dict)  # members held at Permit
    deadline: float = 0.0  # when the waiting members are let go
    denied_until: float = 0.0  # after a timeout: refused until then
    message: str = ""  # why the rest wait, after the last failure


class GangBook:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.gangs: dict[str, Gang] = {}
        self.gated: dict[str, dict[str, Any]] = {}  # pod key → its object, kept out of the queue
        self.member_of: dict[str, str] = {}  # pod key → its group
        self.placed: Callable[[str], bool] = lambda key: False  # set by the scheduler: bound or assumed
        self.changed: set[str] = set()  # groups whose status should be written

    def gang(self, key: str) -> Gang:
        gang = self.gangs.get(key)
        if gang is None:
            gang = self.gangs[key] = Gang()
        return gang

    # --- what the cluster says -----------------------------------------------------------------

    def group_changed(self, key: str, obj: dict[str, Any] | None) -> list[dict[str, Any]]:
        """A PodGroup added, changed or deleted; returns the gated pods to offer to the queue again."""
        gang = self.gang(key)
        if obj is None:
            gang.min_member = 0
            self.reject_waiting(key, "its PodGroup was deleted")
        else:
            spec = obj.get("spec") or {}
            gang.min_member = int(spec.get("minMember") or 0)
            gang.timeout = float(spec.get("scheduleTimeoutSeconds") or DEFAULT_SCHEDULE_TIMEOUT)
        self.changed.add(key)
        return self._ungate(key)

    def member_changed(self, key: str, group: str | None, alive: bool) -> list[dict[str, Any]]:
        """A pod of ``group`` exists (``alive``) or is gone (``group`` None: whatever it was in);
        returns gated pods to offer to the queue again."""
        previous = self.member_of.get(key)
        if previous is not None and (previous != group or not alive):
            self._leave(key, previous)
        if group is None or not alive:
            return []
        self.member_of[key] = group
        gang = self.gang(group)
        if key not in gang.members:
            gang.members.add(key)
            self.changed.add(group)
        return self._ungate(group)

    def _leave(self, key: str, group: str) -> None:
        self.member_of.pop(key, None)
        self.gated.pop(key, None)
        gang = self.gang(group)
        gang.members.discard(key)
        self.changed.add(group)
        if gang.waiting and (len(gang.members) < gang.min_member or key in gang.waiting):
            self.reject_waiting(group, f"member {key} went away: {len(gang.members)} of {gang.min_member} "
                                       "members exist")

    def _ungate(self, group: str) -> list[dict[str, Any]]:
        gang = self.gangs[group]
        if not gang.min_member or len(gang.members) < gang.min_member:
            return []
        out = [obj for k, obj in self.gated.items() if k in gang.members]
        for obj in out:
            meta = obj["metadata"]
            self.gated.pop(f"{meta['namespace']}/{meta['name']}", None)
        return out

    # --- the plugin's questions ----------------------------------------------------------------

    def why_gated(self, pod: PodInfo) -> str:
        group = group_of(pod.namespace, pod.labels)
        if group is None:
            return ""
        gang = self.gang(group)
        if not gang.min_member:
            return f"waiting for PodGroup {group} to exist"
        if len(gang.members) < gang.min_member:
            return f"PodGroup {group} has {len(gang.members)} of its {gang.min_member} members"
        return ""

    def scheduled(self, group: str) -> int:
        gang = self.gangs.get(group)
        return sum(1 for k in gang.members if self.placed(k)) if gang else 0

    def reject_waiting(self, group: str, why: str, *, deny: bool = False) -> None:
        gang = self.gangs.get(group)
        if gang is None:
            return
        for future in gang.waiting.values():
            if not future.done():
                future.set_result(why)
        gang.waiting.clear()
        gang.message = why
        if deny:
            gang.denied_until = self.clock() + gang.timeout
        self.changed.add(group)

    def status(self, group: str) -> dict[str, Any]:
        gang = self.gangs.get(group) or Gang()
        scheduled = self.scheduled(group)
        if gang.min_member and scheduled >= gang.min_member and not gang.waiting:
            phase, message = "Scheduled", ""
        elif gang.waiting:
            phase = "Scheduling"
            message = (f"{scheduled} of {gang.min_member} members have a place; holding them up to "
                       f"{gang.timeout:g}s for the rest")
        else:
            phase = "Pending"
            message = gang.message or (f"{len(gang.members)} of {gang.min_member} members exist"
                                       if len(gang.members) < gang.min_member else "")
        return {"phase": phase, "scheduled": scheduled, "members": len(gang.members), "message": message}


class Coscheduling(Plugin):
    NAME = NAME

    @property
    def book(self) -> GangBook:
        return self.cache.gangs

    def pre_enqueue(self, pod: PodInfo) -> Status:
        why = self.book.why_gated(pod)
        if why:
            self.book.gated[pod.key] = pod.obj
            return Status(Code.PENDING, (why,), NAME)
        return SUCCESS

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return SUCCESS  # the place is held by the cache's assume; Unreserve below is what matters

    def pre_filter(self, state: CycleState, pod: PodInfo) -> Status:
        group = group_of(pod.namespace, pod.labels)
        if group is None:
            return SKIP
        gang = self.book.gang(group)
        if gang.denied_until > self.book.clock():
            return Status.unschedulable(f"PodGroup {group} did not fit whole within its timeout; "
                                        f"tried again in {gang.denied_until - self.book.clock():.0f}s",
                                        plugin=NAME, unresolvable=True)  # preemption would not help
        return SKIP  # nothing to filter node by node

    async def permit(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        group = group_of(pod.namespace, pod.labels)
        if group is None:
            return SUCCESS
        book, gang = self.book, self.book.gang(group)
        if book.scheduled(group) >= gang.min_member:  # this one completes the gang (or joins a complete one)
            for future in gang.waiting.values():
                if not future.done():
                    future.set_result("")
            gang.waiting.clear()
            gang.message = ""
            book.changed.add(group)
            return SUCCESS
        now = book.clock()
        if not gang.waiting:
            gang.deadline = now + gang.timeout
        future = asyncio.get_running_loop().create_future()
        gang.waiting[pod.key] = future
        book.changed.add(group)
        try:
            why = await asyncio.wait_for(asyncio.shield(future), max(gang.deadline - now, 0.0))
        except asyncio.TimeoutError:
            if future.done():  # another member's timer ran first and let the gang go
                why = future.result()
            else:
                why = (f"timed out after {gang.timeout:g}s with {book.scheduled(group)} of {gang.min_member} "
                       "members placed: places given back")
                book.reject_waiting(group, why, deny=True)
        if why:
            return Status.unschedulable(f"PodGroup {group}: {why}", plugin=NAME)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        """A member's binding failed after the gang was let through, or it was refused: the others
        still waiting are let go too (all or nothing)."""
        group = group_of(pod.namespace, pod.labels)
        if group is not None and self.book.gangs.get(group) and self.book.gangs[group].waiting:
            self.book.reject_waiting(group, f"member {pod.key} could not be bound")
