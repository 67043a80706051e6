"""The Job controller: runs a Job's pods until enough of them succeed, as Kubernetes' does.

For each Job (a key in its work queue, queued when it or one of its pods changes):

- **Counts.** Its pods are those whose controller ownerReference names it. ``succeeded`` and
  ``failed`` count its finished pods, and never go down (a finished pod deleted later stays
  counted); an Indexed Job counts the distinct indexes that succeeded (``completedIndexes``).
- **Failure.** More failures than ``backoffLimit`` (failed pods, plus container restarts under
  ``restartPolicy: OnFailure``) → condition ``Failed``, reason ``BackoffLimitExceeded``; running
  longer than ``activeDeadlineSeconds`` → ``Failed``, ``DeadlineExceeded``. Its running pods are
  deleted. A failed pod is replaced after a back-off: 10 s doubling to 6 min, as Kubernetes.
- **Success.** ``completions`` pods succeeded (each index once, for Indexed) → condition
  ``Complete`` and ``completionTime``; without ``completions`` (a work queue), one success and no pod
  left running.
- **Running.** Otherwise as many pods run as ``parallelism`` allows and the remaining completions
  need: missing ones are created (an Indexed Job's with their index: the annotation and label
  ``batch.kubernetes.io/job-completion-index`` and ``JOB_COMPLETION_INDEX`` in their environment),
  surplus ones deleted. ``suspend: true`` deletes its running pods and says ``Suspended``.
- **Afterwards.** ``ttlSecondsAfterFinished`` after it finished, the Job is deleted, its pods with
  it (the garbage collector).
"""

from __future__ import annotations

import time
from typing import Any, Iterable

import msgspec

from corral.api.defaults import rfc3339
from corral.api.kinds.batch import COMPLETION_INDEX
from corral.api.resources import by_kind
from corral.controllers.workloads.pods import deletion_order, is_active, is_ready, pod_from_template
from corral.controllers.queued import OwnedIndex, QueuedController
from corral.scheduler.cache.node_table import parse_timestamp
from corral.server import errors
from corral.server.rest import ResourceAPI

__all__ = ["JobController", "indexes_text", "parse_indexes"]

BACKOFF_BASE, BACKOFF_MAX = 10.0, 360.0  # seconds: a failed pod's replacement waits this, doubling
MAX_BURST = 500  # pods created or deleted by one sync

Obj = dict[str, Any]


def parse_indexes(text: str | None) -> set[int]:
    """``"0-2,5"`` → {0, 1, 2, 5} (``completedIndexes``)."""
    out: set[int] = set()
    for part in (text or "").split(","):
        a, _, b = part.partition("-")
        if a.strip().isdigit():
            out.update(range(int(a), int(b if b.strip().isdigit() else a) + 1))
    return out


def indexes_text(indexes: Iterable[int]) -> str:
    """{0, 1, 2, 5} → ``"0-2,5"``."""
    runs: list[list[int]] = []
    for i in sorted(indexes):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(f"{a}-{b}" if b > a else str(a) for a, b in runs)


def _index(pod: Obj) -> int | None:
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX, "")
    return int(value) if value.isdigit() else None


def _phase(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase") or ""


def _finished_at(pod: Obj) -> float:
    """When the pod's last container ended (0 when unknown)."""
    times = [parse_timestamp(((s.get("state") or {}).get("terminated") or {}).get("finishedAt"))
             for s in (pod.get("status") or {}).get("containerStatuses") or ()]
    return max(times, default=0.0)


def _condition(job: Obj, kind: str) -> Obj | None:
    return next((c for c in (job.get("status") or {}).get("conditions") or ()
                 if c.get("type") == kind and c.get("status") == "True"), None)


class JobController(QueuedController):
    name = "job"
    component = "job-controller"

    def __init__(self, api: ResourceAPI, *, clock=time.time) -> None:
        super().__init__(api)
        self.clock = clock
        self._jobs, self._pods = by_kind("Job"), by_kind("Pod")
        self.index = OwnedIndex(api.cache, self._jobs, self._pods)  # routes changes to their owner

    # --- one Job -----------------------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        record = self.api.cache.get(key)
        if record is None or record.obj["metadata"].get("deletionTimestamp"):
            return None
        job = record.obj
        pods = self.index.objects_of(job)
        if _condition(job, "Complete") or _condition(job, "Failed"):
            await self._delete_all(job, [p for p in pods if is_active(p)])
            return await self._expire(job)
        return await self._run(job, pods)

    async def _run(self, job: Obj, pods: list[Obj]) -> float | None:
        spec, status, now = job.get("spec") or {}, dict(job.get("status") or {}), self.clock()
        active = [p for p in pods if is_active(p)]
        failed_pods = [p for p in pods if _phase(p) == "Failed"]
        indexed = spec.get("completionMode") == "Indexed"
        completions = spec.get("completions")
        done = parse_indexes(status.get("completedIndexes")) | {
            i for p in pods if _phase(p) == "Succeeded" and (i := _index(p)) is not None and i < (completions or 0)}
        succeeded = len(done) if indexed else max(int(status.get("succeeded") or 0),
                                                  sum(1 for p in pods if _phase(p) == "Succeeded"))
        failed = max(int(status.get("failed") or 0), len(failed_pods))
        restarts = 0
        if ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") == "OnFailure":
            restarts = sum(int(s.get("restartCount") or 0) for p in active
                           for s in (p.get("status") or {}).get("containerStatuses") or ())
        if not status.get("startTime") and not spec.get("suspend"):
            status["startTime"] = rfc3339(now)
        started = parse_timestamp(status.get("startTime"))
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "Suspended"]
        finished: tuple[str, str, str] | None = None
        deadline = spec.get("activeDeadlineSeconds")
        if failed + restarts > spec["backoffLimit"]:
            finished = ("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
        elif deadline and started and now - started >= deadline and not spec.get("suspend"):
            finished = ("Failed", "DeadlineExceeded", "Job was active longer than specified deadline")
        elif (succeeded >= completions) if completions is not None else (succeeded > 0 and not active):
            finished = ("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
        again: float | None = None
        if finished is not None:
            kind, reason, message = finished
            await self._delete_all(job, active)
            active = []
            conditions.append({"type": kind, "status": "True", "reason": reason, "message": message,
                               "lastProbeTime": rfc3339(now), "lastTransitionTime": rfc3339(now)})
            if kind == "Complete":
                status["completionTime"] = rfc3339(now)
                self.events.record(job, "Normal", "Completed", "Job completed")
            else:
                self.events.record(job, "Warning", reason, message)
        elif spec.get("suspend"):
            await self._delete_all(job, active)
            active = []
            conditions.append({"type": "Suspended", "status": "True", "reason": "JobSuspended",
                               "message": "Job suspended", "lastTransitionTime": rfc3339(now)})
        else:
            active, again = await self._scale(job, active, done, succeeded, failed_pods, now)
            if deadline and started:
                left = deadline - (now - started)
                again = left if again is None else min(again, left)
        status.update(active=len(active), ready=sum(1 for p in active if is_ready(p)), succeeded=succeeded,
                      failed=failed, conditions=conditions or None)
        if indexed:
            status["completedIndexes"] = indexes_text(done)
        status = {k: v for k, v in status.items() if v is not None}
        if status != (job.get("status") or {}):
            await self._write_status(job, status)
        if finished is not None:
            return await self._expire({**job, "status": status})
        return max(again, 0.1) if again is not None else None

    async def _scale(self, job: Obj, active: list[Obj], done: set[int], succeeded: int, failed_pods: list[Obj],
                     now: float) -> tuple[list[Obj], float | None]:
        """Create the pods still wanted, or delete the surplus; the active pods after it, and when to
        look again (a back-off running out)."""
        spec = job.get("spec") or {}
        parallelism, completions = spec["parallelism"], spec.get("completions")
        indexed = spec.get("completionMode") == "Indexed"
        if indexed:
            running = {i for p in active if (i := _index(p)) is not None}
            pending = [i for i in range(completions or 0) if i not in done and i not in running]
            wanted = min(parallelism, len(running) + len(pending))
        elif completions is not None:
            wanted = min(parallelism, completions - succeeded)
        else:
            wanted = parallelism if succeeded == 0 else len(active)
        if len(active) > wanted:
            doomed = sorted(active, key=deletion_order)[:min(len(active) - wanted, MAX_BURST)]
            await self._delete_all(job, doomed)
            return [p for p in active if p not in doomed], None
        missing = min(wanted - len(active), MAX_BURST)
        if missing <= 0:
            return active, None
        if failed_pods:  # a replacement waits out its back-off, as Kubernetes' controller does
            delay = min(BACKOFF_BASE * 2 ** (len(failed_pods) - 1), BACKOFF_MAX)
            last = max((_finished_at(p) for p in failed_pods), default=0.0) or now
            if now < last + delay:
                return active, last + delay - now
        template = spec.get("template") or {}
        indexes = pending[:missing] if indexed else [None] * missing
        for index in indexes:
            pod = pod_from_template(job, template)
            if index is not None:
                _with_index(pod, job, index)
            try:
                reply = await self.api.create(self._pods, job["metadata"]["namespace"], pod, self.opts)
            except errors.ApiError as exc:
                self.events.record(job, "Warning", "FailedCreate", f"Error creating: {exc.message}")
                raise
            self.events.record(job, "Normal", "SuccessfulCreate",
                               f"Created pod: {msgspec.json.decode(reply.body)['metadata']['name']}")
        return active + [{}] * missing, None  # the new ones count as active in this status

    async def _delete_all(self, job: Obj, pods: list[Obj]) -> None:
        for pod in pods:
            if await self.delete_if_unchanged(self._pods, pod):
                self.events.record(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}")

    async def _write_status(self, job: Obj, status: Obj) -> None:
        meta = job["metadata"]
        try:
            await self.api.update(self._jobs, meta["namespace"], meta["name"], {**job, "status": status}, self.opts,
                                  subresource="status")
        except errors.ApiError as exc:
            if exc.code not in (404, 409):
                raise  # changed or gone meanwhile: that change queues the key again

    async def _expire(self, job: Obj) -> float | None:
        """``ttlSecondsAfterFinished`` after it finished: the Job goes, and its pods with it."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        if ttl is None:
            return None
        ended = _condition(job, "Complete") or _condition(job, "Failed") or {}
        left = parse_timestamp(ended.get("lastTransitionTime")) + ttl - self.clock()
        if left > 0:
            return left
        meta = job["metadata"]
        try:
            await self.api.delete(self._jobs, meta["namespace"], meta["name"], None, None, meta["uid"],
                                  propagation="Background")
        except errors.ApiError as exc:
            if exc.code not in (404, 409):
                raise
        return None


def _with_index(pod: Obj, job: Obj, index: int) -> None:
    """An Indexed Job's pod: its index as annotation, label and JOB_COMPLETION_INDEX, and in its
    name, as Kubernetes makes them."""
    meta = pod["metadata"]
    meta["generateName"] = f"{job['metadata']['name']}-{index}-"
    meta.setdefault("annotations", {})[COMPLETION_INDEX] = str(index)
    meta.setdefault("labels", {})[COMPLETION_INDEX] = str(index)
    spec = pod["spec"]
    variable = {"name": "JOB_COMPLETION_INDEX",
                "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}}
    for container in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
        container["env"] = [*(container.get("env") or ()), variable]
