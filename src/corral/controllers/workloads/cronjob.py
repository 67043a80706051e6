"""The CronJob controller: makes a CronJob's Jobs on its schedule, as Kubernetes' does.

For each CronJob (queued when it or one of its Jobs changes, and again at its next scheduled time):

- The most recent scheduled time that has come since the last one it ran (``lastScheduleTime``,
  or its creation) is due; earlier missed ones are not run again, as in Kubernetes. One later than
  ``startingDeadlineSeconds`` is missed (an event says so).
- ``concurrencyPolicy``: ``Allow`` runs Jobs side by side; ``Forbid`` skips a time while one runs;
  ``Replace`` deletes the running ones first.
- The Job is named ``NAME-MINUTES`` (minutes since the epoch of its scheduled time, so one time
  makes one Job, whichever server's controller gets there), owned by the CronJob, annotated with
  ``batch.kubernetes.io/cronjob-scheduled-timestamp``.
- Status: ``active`` (references to its running Jobs), ``lastScheduleTime``, ``lastSuccessfulTime``.
  Finished Jobs beyond ``successfulJobsHistoryLimit`` (3) and ``failedJobsHistoryLimit`` (1) are
  deleted, oldest first, with their pods. ``suspend: true`` makes none.

The schedule is read in ``timeZone`` (UTC without one): :mod:`corral.api.kinds.cron`.
"""

from __future__ import annotations

import copy
import time
from datetime import datetime, timezone
from typing import Any

import msgspec

from corral.api.kinds import cron
from corral.api.defaults import rfc3339
from corral.api.resources import by_kind
from corral.controllers.workloads.pods import owner_reference
from corral.controllers.queued import OwnedIndex, QueuedController
from corral.scheduler.cache.node_table import parse_timestamp
from corral.server import errors
from corral.server.rest import ResourceAPI

__all__ = ["CronJobController", "SCHEDULED_TIMESTAMP", "MAX_MISSED"]

SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
MAX_MISSED = 100  # more missed times than this since the last run: said in an event, as Kubernetes does

Obj = dict[str, Any]


def _finished(job: Obj) -> str | None:
    """"Complete" or "Failed" once the Job has ended, else None."""
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return cond["type"]
    return None


def _reference(job: Obj) -> Obj:
    meta = job["metadata"]
    return {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "namespace": meta["namespace"],
            "uid": meta["uid"], "resourceVersion": meta.get("resourceVersion", "")}


class CronJobController(QueuedController):
    name = "cronjob"
    component = "cronjob-controller"

    def __init__(self, api: ResourceAPI, *, clock=time.time) -> None:
        super().__init__(api)
        self.clock = clock
        self._cronjobs, self._jobs = by_kind("CronJob"), by_kind("Job")
        self.index = OwnedIndex(api.cache, self._cronjobs, self._jobs)  # routes changes to their owner

    # --- one CronJob -----------------------------------------------------------------------------------

    async def sync(self, key: str) -> float | None:
        record = self.api.cache.get(key)
        if record is None or record.obj["metadata"].get("deletionTimestamp"):
            return None
        cj = record.obj
        spec, status = cj.get("spec") or {}, dict(cj.get("status") or {})
        jobs = [j for j in self.index.objects_of(cj) if not j["metadata"].get("deletionTimestamp")]
        active = [j for j in jobs if _finished(j) is None]
        successes = [parse_timestamp((j.get("status") or {}).get("completionTime")) for j in jobs
                     if _finished(j) == "Complete"]
        if successes:
            status["lastSuccessfulTime"] = rfc3339(max(successes))
        await self._trim_history(cj, jobs)
        try:
            schedule, tz = cron.parse(spec.get("schedule", "")), cron.zone(spec.get("timeZone"))
        except cron.CronError as exc:  # written before a rule tightened: said, not retried
            self.events.record(cj, "Warning", "UnparseableSchedule", f"unparseable schedule: {exc}")
            return None
        now = datetime.fromtimestamp(self.clock(), timezone.utc)
        again: float | None = None
        if not spec.get("suspend"):
            due, upcoming = self._due(cj, schedule, tz, now)
            if upcoming is not None:
                again = max((upcoming - now).total_seconds(), 0.1)
            if due is not None:
                active = await self._start(cj, due, active, now, status)
        status["active"] = [_reference(j) for j in active] or None
        status = {k: v for k, v in status.items() if v is not None}
        if status != (cj.get("status") or {}):
            try:
                await self.api.update(self._cronjobs, cj["metadata"]["namespace"], cj["metadata"]["name"],
                                      {**cj, "status": status}, self.opts, subresource="status")
            except errors.ApiError as exc:
                if exc.code not in (404, 409):
                    raise
        return again

    def _due(self, cj: Obj, schedule: cron.Schedule, tz, now: datetime) -> tuple[datetime | None, datetime | None]:
        """(the most recent scheduled time not yet run, or None; the next one to come)."""
        status = cj.get("status") or {}
        since = parse_timestamp(status.get("lastScheduleTime") or cj["metadata"].get("creationTimestamp"))
        t = datetime.fromtimestamp(since, timezone.utc)
        due, missed = None, 0
        while True:
            t = schedule.next_after(t, tz)  # type: ignore[assignment]
            if t is None or t > now:
                break
            due, missed = t, missed + 1
            if missed > MAX_MISSED:  # a long outage: straight to the latest time, not every one between
                self.events.record(cj, "Warning", "TooManyMissedTimes", f"too many missed start times "
                                   f"(> {MAX_MISSED}): the most recent one is run")
                due, t = _latest_before(schedule, tz, now) or due, schedule.next_after(now, tz)
                break
        return due, t

    async def _start(self, cj: Obj, due: datetime, active: list[Obj], now: datetime, status: Obj) -> list[Obj]:
        spec, meta = cj.get("spec") or {}, cj["metadata"]
        deadline = spec.get("startingDeadlineSeconds")
        if deadline is not None and (now - due).total_seconds() > deadline:
            self.events.record(cj, "Warning", "MissSchedule", f"Missed scheduled time to start a job: "
                               f"{due.isoformat()}")
            status["lastScheduleTime"] = rfc3339(due.timestamp())
            return active
        policy = spec.get("concurrencyPolicy")  # Allow (the default) runs Jobs side by side
        if active and policy == "Forbid":
            return active  # the time is skipped; lastScheduleTime stays, so it is not run later
        if active and policy == "Replace":
            for job in active:
                await self._delete(job)
                self.events.record(cj, "Normal", "SuccessfulDelete", f"Deleted job {job['metadata']['name']}")
            active = []
        template = spec.get("jobTemplate") or {}
        tmeta = template.get("metadata") or {}
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": f"{meta['name']}-{int(due.timestamp() // 60)}", "namespace": meta["namespace"],
                            "labels": dict(tmeta.get("labels") or {}),
                            "annotations": {**(tmeta.get("annotations") or {}), SCHEDULED_TIMESTAMP: due.isoformat()},
                            "ownerReferences": [owner_reference(cj)]},
               "spec": copy.deepcopy(template.get("spec") or {})}  # the create fills it in: not the cache's
        try:
            reply = await self.api.create(self._jobs, meta["namespace"], job, self.opts)
        except errors.ApiError as exc:
            if exc.code != 409:  # 409: made already (by this controller a moment ago, or another server's)
                self.events.record(cj, "Warning", "FailedCreate", f"Error creating job: {exc.message}")
                raise
        else:
            made = msgspec.json.decode(reply.body)
            active = [*active, made]
            self.events.record(cj, "Normal", "SuccessfulCreate", f"Created job {made['metadata']['name']}")
        status["lastScheduleTime"] = rfc3339(due.timestamp())
        return active

    async def _trim_history(self, cj: Obj, jobs: list[Obj]) -> None:
        """The oldest finished Jobs beyond the history limits (which the API defaults) go."""
        for outcome, field in (("Complete", "successfulJobsHistoryLimit"), ("Failed", "failedJobsHistoryLimit")):
            ended = sorted((j for j in jobs if _finished(j) == outcome),
                           key=lambda j: (parse_timestamp(j["metadata"]["creationTimestamp"]), j["metadata"]["name"]))
            keep = cj["spec"][field]
            for job in ended[:max(len(ended) - keep, 0)]:
                await self._delete(job)

    async def _delete(self, job: Obj) -> None:
        meta = job["metadata"]
        try:
            await self.api.delete(self._jobs, meta["namespace"], meta["name"], None, None, meta["uid"],
                                  propagation="Background")
        except errors.ApiError as exc:
            if exc.code not in (404, 409):
                raise


def _latest_before(schedule: cron.Schedule, tz, now: datetime) -> datetime | None:
    """The last scheduled time at or before ``now`` within a day or a year back (found forwards)."""
    for back in (86_400, 366 * 86_400):
        t = datetime.fromtimestamp(now.timestamp() - back, timezone.utc)
        latest = None
        while (t := schedule.next_after(t, tz)) is not None and t <= now:  # type: ignore[assignment]
            latest = t
        if latest is not None:
            return latest
    return None
