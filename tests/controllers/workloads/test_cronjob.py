"""The CronJob controller on a fake clock: Jobs made at their scheduled times (in a time zone), one
per time whatever happens, the concurrency policies, a starting deadline, history limits and
suspend; and cron schedules read as cron reads them."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import msgspec
import pytest

from corral.api.kinds import cron
from corral.api.defaults import rfc3339
from corral.api.resources import by_kind
from corral.controllers.workloads.cronjob import SCHEDULED_TIMESTAMP, CronJobController
from corral.scheduler.cache.node_table import parse_timestamp
from corral.server import errors
from corral.server.rest import WriteOptions
from corral.testing.clock import FakeClock
from corral.testing.server import record_writes, recorded_events, running_server

CRONJOBS, JOBS = by_kind("CronJob"), by_kind("Job")
OPTS = WriteOptions(warn=False)


def cronjob(name: str = "tick", schedule: str = "*/5 * * * *", **spec) -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, **spec, "jobTemplate": {"metadata": {"labels": {"app": name}}, "spec": {
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}}


class Harness:
    def __init__(self, api, start: float) -> None:
        self.api = api
        self.clock = FakeClock(start)
        self.controller = CronJobController(api, clock=self.clock)

    async def sync(self, name: str = "tick"):
        await self.api.cache.wait_consistent()
        self.controller.reset()
        self.controller.initial_keys()
        return await self.controller.sync(CRONJOBS.key("default", name))

    async def jobs(self) -> list[dict]:
        await self.api.cache.wait_consistent()
        return sorted((r.obj for r in self.api.cache.items(JOBS.store_prefix)
                       if not r.obj["metadata"].get("deletionTimestamp")), key=lambda j: j["metadata"]["name"])

    async def events(self) -> list[tuple[str, str, str]]:
        return await recorded_events(self.controller)

    async def change(self, name: str = "tick", **spec) -> None:
        current = (await self.api.current(CRONJOBS, "default", name)).obj
        await self.api.update(CRONJOBS, "default", name, {**current, "spec": {**current["spec"], **spec}}, OPTS)

    async def status(self, name: str = "tick") -> dict:
        await self.api.cache.wait_consistent()
        return (await self.api.current(CRONJOBS, "default", name)).obj.get("status") or {}

    async def finish(self, job: dict, outcome: str) -> None:
        current = (await self.api.current(JOBS, "default", job["metadata"]["name"])).obj
        status = {"conditions": [{"type": outcome, "status": "True"}], "completionTime": rfc3339(self.clock())}
        await self.api.update(JOBS, "default", job["metadata"]["name"], {**current, "status": status}, OPTS,
                              subresource="status")


@pytest.fixture
async def harness(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        created = await server.api.create(CRONJOBS, "default", cronjob(), OPTS)
        made = msgspec.json.decode(created.body)["metadata"]["creationTimestamp"]
        harness = Harness(server.api, parse_timestamp(made))
        harness.store = server.store
        harness.controller.events.start()
        try:
            yield harness
        finally:
            await harness.controller.events.stop()


def _next_five(t: float) -> float:
    return (int(t) // 300 + 1) * 300


async def test_a_job_is_made_at_each_scheduled_time_once_named_by_it(harness):
    again = await harness.sync()
    first = _next_five(harness.clock())
    assert await harness.jobs() == [] and again == pytest.approx(first - harness.clock(), abs=0.2)
    harness.clock.now = first + 1
    assert await harness.sync() == pytest.approx(299, abs=0.2)
    (job,) = await harness.jobs()
    assert job["metadata"]["name"] == f"tick-{int(first // 60)}"
    assert job["metadata"]["labels"] == {"app": "tick"} and job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    assert job["metadata"]["annotations"][SCHEDULED_TIMESTAMP] == datetime.fromtimestamp(first, timezone.utc).isoformat()
    status = await harness.status()
    meta = job["metadata"]
    assert status == {"lastScheduleTime": rfc3339(first), "active": [{
        "apiVersion": "batch/v1", "kind": "Job", "name": meta["name"], "namespace": "default", "uid": meta["uid"],
        "resourceVersion": meta["resourceVersion"]}]}
    assert await harness.events() == [("Normal", "SuccessfulCreate", f"Created job {meta['name']}")]
    written = (await harness.api.current(CRONJOBS, "default", "tick")).obj["metadata"]["resourceVersion"]
    await harness.sync()
    assert len(await harness.jobs()) == 1  # the same time never makes a second Job
    assert (await harness.api.current(CRONJOBS, "default", "tick")).obj["metadata"]["resourceVersion"] == written
    await harness.finish(job, "Complete")
    await harness.sync()
    status = await harness.status()
    assert "active" not in status and status["lastSuccessfulTime"] == rfc3339(harness.clock())
    harness.clock.now = first + 3600 + 30  # an hour missed: only the latest time is run
    await harness.sync()
    assert [j["metadata"]["name"] for j in await harness.jobs()][-1] == f"tick-{int((first + 3600) // 60)}"
    assert len(await harness.jobs()) == 2


async def test_forbid_skips_a_time_while_one_runs_and_replace_replaces_it(harness):
    current = (await harness.api.current(CRONJOBS, "default", "tick")).obj
    await harness.api.update(CRONJOBS, "default", "tick", {**current, "spec": {
        **current["spec"], "concurrencyPolicy": "Forbid"}}, OPTS)
    first = _next_five(harness.clock())
    harness.clock.now = first + 1
    await harness.sync()
    harness.clock.now = first + 301
    await harness.sync()
    assert len(await harness.jobs()) == 1  # the second time skipped: the first still runs
    current = (await harness.api.current(CRONJOBS, "default", "tick")).obj
    await harness.api.update(CRONJOBS, "default", "tick", {**current, "spec": {
        **current["spec"], "concurrencyPolicy": "Replace"}}, OPTS)
    harness.clock.now = first + 601
    await harness.sync()
    names = [j["metadata"]["name"] for j in await harness.jobs()]
    assert names == [f"tick-{int((first + 600) // 60)}"]  # the running one deleted, the new one made
    assert (await harness.events())[-2:] == [("Normal", "SuccessfulDelete", f"Deleted job tick-{int(first // 60)}"),
                                             ("Normal", "SuccessfulCreate", f"Created job {names[0]}")]


async def test_allow_runs_a_new_job_beside_the_one_still_running(harness):
    first = _next_five(harness.clock())
    harness.clock.now = first + 1
    await harness.sync()
    harness.clock.now = first + 301
    await harness.sync()
    jobs = await harness.jobs()
    names = [j["metadata"]["name"] for j in jobs]
    assert names == [f"tick-{int(first // 60)}", f"tick-{int((first + 300) // 60)}"]
    assert (await harness.status())["active"] == [  # what kubectl describe lists: references to each Job
        {"apiVersion": "batch/v1", "kind": "Job", "name": j["metadata"]["name"], "namespace": "default",
         "uid": j["metadata"]["uid"], "resourceVersion": j["metadata"]["resourceVersion"]} for j in jobs]


async def first_job_under_forbid(harness) -> tuple[float, dict, dict]:
    """With concurrencyPolicy Forbid, the first scheduled time's Job: (that time, the Job, its
    current object)."""
    await harness.change(concurrencyPolicy="Forbid")
    first = _next_five(harness.clock())
    harness.clock.now = first + 1
    await harness.sync()
    (job,) = await harness.jobs()
    return first, job, (await harness.api.current(JOBS, "default", job["metadata"]["name"])).obj


async def test_a_job_being_deleted_is_not_counted_as_running(harness):
    first, job, current = await first_job_under_forbid(harness)
    current["metadata"]["finalizers"] = ["example.com/hold"]
    await harness.api.update(JOBS, "default", job["metadata"]["name"], current, OPTS)
    await harness.api.delete(JOBS, "default", job["metadata"]["name"], None, None, None)
    harness.clock.now = first + 301
    await harness.sync()
    status = await harness.status()
    assert [a["name"] for a in status["active"]] == [f"tick-{int((first + 300) // 60)}"]  # Forbid did not skip it


async def test_a_job_another_server_made_for_the_same_time_is_not_made_again(harness):
    first = _next_five(harness.clock())
    cj = (await harness.api.current(CRONJOBS, "default", "tick")).obj
    other = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
        "name": f"tick-{int(first // 60)}", "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "CronJob", "name": "tick", "uid": cj["metadata"]["uid"],
            "controller": True}]}, "spec": cj["spec"]["jobTemplate"]["spec"]}
    await harness.api.create(JOBS, "default", other, OPTS)
    harness.clock.now = first + 1
    await harness.sync()
    assert [j["metadata"]["name"] for j in await harness.jobs()] == [other["metadata"]["name"]]
    assert (await harness.status())["lastScheduleTime"] == rfc3339(first) and await harness.events() == []


async def test_the_next_look_is_at_the_next_scheduled_time_however_close(harness):
    first = _next_five(harness.clock())
    harness.clock.now = first - 0.5
    assert await harness.sync() == pytest.approx(0.5)
    harness.clock.now = first - 0.01
    assert await harness.sync() == pytest.approx(0.1)  # not sooner than 0.1 s


async def test_a_schedule_is_read_in_its_time_zone(harness):
    obj = cronjob("ny", "0 9 * * *", timeZone="America/New_York")
    created = msgspec.json.decode((await harness.api.create(CRONJOBS, "default", obj, OPTS)).body)
    since = datetime.fromtimestamp(parse_timestamp(created["metadata"]["creationTimestamp"]), timezone.utc)
    nine = cron.parse("0 9 * * *").next_after(since, ZoneInfo("America/New_York")).timestamp()
    harness.clock.now = nine - 1
    assert await harness.sync("ny") == pytest.approx(1)
    assert await harness.jobs() == []
    harness.clock.now = nine + 1
    await harness.sync("ny")
    (job,) = await harness.jobs()
    assert job["metadata"]["name"] == f"ny-{int(nine // 60)}"


@pytest.fixture
def host_in_another_zone():
    """The host's local time zone is not UTC: the controller must not read times in it."""
    import os
    import time

    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


async def test_times_do_not_depend_on_the_hosts_time_zone(harness, host_in_another_zone):
    first = _next_five(harness.clock())
    harness.clock.now = first + 1
    assert await harness.sync() == pytest.approx(299, abs=0.2)
    (job,) = await harness.jobs()
    assert job["metadata"]["name"] == f"tick-{int(first // 60)}"
    assert (await harness.status())["lastScheduleTime"] == rfc3339(first)


async def test_more_than_a_hundred_missed_times_run_the_latest_and_say_so(harness):
    first = _next_five(harness.clock())
    harness.clock.now = first + 99 * 300  # exactly on the 100th time: it is due, and 100 are not too many
    await harness.sync()
    assert [j["metadata"]["name"] for j in await harness.jobs()] == [f"tick-{int((first + 99 * 300) // 60)}"]
    assert [e[1] for e in await harness.events()] == ["SuccessfulCreate"]
    last = first + 99 * 300 + 101 * 300
    harness.clock.now = last + 7
    assert await harness.sync() == pytest.approx(293, abs=0.2)
    assert [j["metadata"]["name"] for j in await harness.jobs()][-1] == f"tick-{int(last // 60)}"
    assert (await harness.events())[1] == (
        "Warning", "TooManyMissedTimes", "too many missed start times (> 100): the most recent one is run")


async def test_after_too_many_missed_times_a_time_exactly_now_is_the_latest(harness):
    first = _next_five(harness.clock())
    last = first + 150 * 300
    harness.clock.now = last  # on the minute: the time now is due, not the one five minutes before
    assert await harness.sync() == pytest.approx(300, abs=0.2)
    assert [j["metadata"]["name"] for j in await harness.jobs()] == [f"tick-{int(last // 60)}"]


@pytest.mark.parametrize("zone", [None, "Pacific/Auckland"])
async def test_after_years_away_a_weekly_job_runs_for_the_latest_sunday_of_its_time_zone(harness, zone):
    spec = {"timeZone": zone} if zone else {}
    created = msgspec.json.decode((await harness.api.create(CRONJOBS, "default", cronjob("weekly", "0 0 * * 0", **spec),
                                                            OPTS)).body)
    tz = ZoneInfo(zone) if zone else timezone.utc
    since = datetime.fromtimestamp(parse_timestamp(created["metadata"]["creationTimestamp"]), timezone.utc)
    sunday = cron.parse("0 0 * * 0").next_after(since.replace(year=since.year + 3), tz)
    harness.clock.now = sunday.timestamp() + 3 * 86_400  # 156 Sundays missed; none in the last day
    again = await harness.sync("weekly")
    assert [j["metadata"]["name"] for j in await harness.jobs()] == [f"weekly-{int(sunday.timestamp() // 60)}"]
    assert again == pytest.approx(4 * 86_400)  # the next Sunday midnight there, four days on


async def test_a_schedule_stored_before_a_rule_tightened_is_said_and_not_retried(harness):
    from corral.api.defaults import apply_create_defaults

    obj = cronjob("old", "61 * * * *")
    apply_create_defaults(CRONJOBS, obj, "default")  # as the server that accepted it stored it
    obj["metadata"].update(uid="old-uid", creationTimestamp=rfc3339(harness.clock()))
    await harness.store.create(CRONJOBS.key("default", "old"), obj)
    assert await harness.sync("old") is None
    events = await harness.events()
    assert len(events) == 1 and events[0][:2] == ("Warning", "UnparseableSchedule")
    assert events[0][2].startswith("unparseable schedule: ") and "minute" in events[0][2]


async def test_a_time_past_its_starting_deadline_is_missed_and_suspend_makes_none(harness):
    current = (await harness.api.current(CRONJOBS, "default", "tick")).obj
    await harness.api.update(CRONJOBS, "default", "tick", {**current, "spec": {
        **current["spec"], "startingDeadlineSeconds": 10}}, OPTS)
    first = _next_five(harness.clock())
    harness.clock.now = first + 60  # the controller was away a minute: too late for this one
    await harness.sync()
    assert await harness.jobs() == [] and (await harness.status())["lastScheduleTime"] == rfc3339(first)
    assert await harness.events() == [("Warning", "MissSchedule", "Missed scheduled time to start a job: "
                                       + datetime.fromtimestamp(first, timezone.utc).isoformat())]
    current = (await harness.api.current(CRONJOBS, "default", "tick")).obj
    await harness.api.update(CRONJOBS, "default", "tick", {**current, "spec": {**current["spec"], "suspend": True}}, OPTS)
    harness.clock.now = first + 301
    assert await harness.sync() is None and await harness.jobs() == []


async def test_finished_jobs_beyond_the_history_limits_are_deleted_oldest_first(harness):
    first = _next_five(harness.clock())
    for i in range(5):
        harness.clock.now = first + 300 * i + 1
        await harness.sync()
        job = (await harness.jobs())[-1]
        await harness.finish(job, "Complete" if i != 2 else "Failed")
    await harness.sync()
    names = [j["metadata"]["name"] for j in await harness.jobs()]
    minutes = [int((first + 300 * i) // 60) for i in range(5)]
    assert names == [f"tick-{m}" for m in (minutes[1], minutes[2], minutes[3], minutes[4])]  # 3 complete, 1 failed
    assert "active" not in await harness.status()  # finished, failed or not
    harness.clock.now = first + 300 * 5 + 1
    await harness.sync()
    await harness.finish((await harness.jobs())[-1], "Failed")
    await harness.sync()
    names = [j["metadata"]["name"] for j in await harness.jobs()]
    assert f"tick-{minutes[2]}" not in names and f"tick-{int((first + 1500) // 60)}" in names  # the older failure goes


async def test_a_suspended_job_still_counts_as_running(harness):
    first, job, current = await first_job_under_forbid(harness)
    status = {"conditions": [{"type": "Suspended", "status": "True"}]}
    await harness.api.update(JOBS, "default", job["metadata"]["name"], {**current, "status": status}, OPTS,
                             subresource="status")
    harness.clock.now = first + 301
    await harness.sync()
    assert len(await harness.jobs()) == 1  # Forbid: the next time is skipped while it has not finished
    assert [a["name"] for a in (await harness.status())["active"]] == [job["metadata"]["name"]]


async def test_the_api_refuses_a_schedule_or_time_zone_it_cannot_read(harness):
    for bad, field in (({"schedule": "61 * * * *"}, "spec.schedule: Invalid value: \"61 * * * *\": minute"),
                       ({"schedule": "* * *"}, "expected exactly 5 fields"),
                       ({"timeZone": "Mars/Olympus"}, "spec.timeZone: Invalid value: \"Mars/Olympus\"")):
        obj = cronjob("bad")
        obj["spec"].update(bad)
        with pytest.raises(errors.ApiError) as err:
            await harness.api.create(CRONJOBS, "default", obj, OPTS)
        assert field in err.value.message


@pytest.mark.parametrize("schedule, after, tz, expected", [
    ("*/15 9-17 * * mon-fri", "2026-11-27T17:50:00+00:00", None, "2026-11-30T09:00:00+00:00"),
    ("0 0 29 2 *", "2026-11-27T00:00:00+00:00", None, "2028-02-29T00:00:00+00:00"),
    ("@hourly", "2026-11-27T17:50:00+00:00", "Asia/Kolkata", "2026-11-28T00:00:00+05:30"),
    ("0 9 * * *", "2026-11-27T12:00:00+00:00", "America/New_York", "2026-11-27T09:00:00-05:00"),  # 14:00 UTC
    ("0 0 1 * 7", "2026-11-27T00:00:00+00:00", None, "2026-11-29T00:00:00+00:00"),  # day 1 or a Sunday
    ("0 12 * jan,jul sun", "2026-11-27T00:00:00+00:00", None, "2027-01-03T12:00:00+00:00"),
])
def test_schedules_are_read_as_cron_reads_them(schedule, after, tz, expected):
    got = cron.parse(schedule).next_after(datetime.fromisoformat(after), ZoneInfo(tz) if tz else timezone.utc)
    assert got.isoformat() == expected


async def test_a_cronjob_being_deleted_or_gone_makes_nothing(harness):
    obj = cronjob("going")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    await harness.api.create(CRONJOBS, "default", obj, OPTS)
    await harness.api.delete(CRONJOBS, "default", "going", None, None, None)
    harness.clock.now = _next_five(harness.clock()) + 1
    assert await harness.sync("going") is None and await harness.jobs() == []
    assert await harness.sync("never-made") is None


async def test_a_job_the_api_refuses_is_an_event_and_a_failed_sync(harness, monkeypatch):
    create = harness.api.create

    async def refuse_jobs(resource, *args):
        if resource is JOBS:
            raise errors.ApiError(403, "Forbidden", 'namespace "default" is being terminated')
        return await create(resource, *args)

    monkeypatch.setattr(harness.api, "create", refuse_jobs)
    harness.clock.now = _next_five(harness.clock()) + 1
    with pytest.raises(errors.ApiError):
        await harness.sync()  # retried with backoff by the queue
    assert (await harness.events())[-1] == (
        "Warning", "FailedCreate", 'Error creating job: namespace "default" is being terminated')
    assert await harness.jobs() == []


async def test_a_status_write_that_finds_the_cronjob_changed_or_gone_is_dropped(harness, monkeypatch):
    update = harness.api.update

    async def changed_meanwhile(resource, namespace, name, obj, opts, subresource=None):
        if resource is CRONJOBS and subresource == "status":  # someone writes first: this one is a 409
            current = (await harness.api.current(CRONJOBS, namespace, name)).obj
            await update(resource, namespace, name, {**current, "metadata": {
                **current["metadata"], "labels": {"touched": "yes"}}}, opts)
        return await update(resource, namespace, name, obj, opts, subresource=subresource)

    monkeypatch.setattr(harness.api, "update", changed_meanwhile)
    harness.clock.now = _next_five(harness.clock()) + 1
    await harness.sync()  # no error: the change that made it stale queues it again
    assert len(await harness.jobs()) == 1 and "lastScheduleTime" not in await harness.status()
    monkeypatch.setattr(harness.api, "update", update)
    await harness.sync()
    assert (await harness.status())["lastScheduleTime"]  # written on the next sync


async def test_a_status_write_that_finds_the_cronjob_gone_is_dropped(harness, monkeypatch):
    update = harness.api.update

    async def gone_meanwhile(resource, namespace, name, obj, opts, subresource=None):
        if resource is CRONJOBS and subresource == "status":  # deleted first: this one is a 404
            await harness.api.delete(CRONJOBS, namespace, name, None, None, None)
        return await update(resource, namespace, name, obj, opts, subresource=subresource)

    monkeypatch.setattr(harness.api, "update", gone_meanwhile)
    harness.clock.now = _next_five(harness.clock()) + 1
    await harness.sync()  # no error: the delete's own event tells the controller it is gone
    assert len(await harness.jobs()) == 1


async def test_a_settled_cronjob_is_synced_without_a_single_write(harness, monkeypatch):
    harness.clock.now = _next_five(harness.clock()) + 1
    await harness.sync()  # its job made, its status written
    writes = record_writes(harness.api, monkeypatch)
    await harness.sync()
    assert writes == []


async def test_its_own_history_limits_keep_the_newest_finished_jobs_by_creation(harness):
    import asyncio

    await harness.change(successfulJobsHistoryLimit=1, failedJobsHistoryLimit=0)
    harness.clock.now = _next_five(harness.clock()) + 1
    await harness.sync()
    (scheduled,) = await harness.jobs()
    await harness.finish(scheduled, "Complete")
    await asyncio.sleep(1.1)  # creation times have whole seconds: the manual Job is made a second later
    uid = (await harness.api.current(CRONJOBS, "default", "tick")).obj["metadata"]["uid"]
    for name, outcome in (("a-manual", "Complete"), ("a-failed", "Failed")):  # kubectl create job --from=cronjob/tick
        await harness.api.create(JOBS, "default", {"metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "batch/v1", "kind": "CronJob", "name": "tick", "uid": uid, "controller": True}]},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "c", "image": "busybox"}]}}}}, OPTS)
        await harness.finish((await harness.api.current(JOBS, "default", name)).obj, outcome)
    await harness.sync()
    assert [j["metadata"]["name"] for j in await harness.jobs()] == ["a-manual"]  # newest complete; no failed one


async def test_a_job_exactly_at_its_starting_deadline_still_starts(harness):
    await harness.change(startingDeadlineSeconds=10)
    first = _next_five(harness.clock())
    harness.clock.now = first + 10  # as Kubernetes: too late only once the deadline has passed
    await harness.sync()
    assert len(await harness.jobs()) == 1


async def test_a_job_is_its_template_with_the_scheduled_time_and_the_cronjob_as_controller(harness):
    current = (await harness.api.current(CRONJOBS, "default", "tick")).obj
    template = {**current["spec"]["jobTemplate"], "metadata": {"labels": {"app": "tick"}, "annotations": {"team": "a"}}}
    await harness.change(jobTemplate=template)
    first = _next_five(harness.clock())
    harness.clock.now = first + 1
    await harness.sync()
    (job,) = await harness.jobs()
    assert set(job) == {"apiVersion", "kind", "metadata", "spec"}  # nothing else written
    meta = job["metadata"]
    assert set(meta) == {"name", "namespace", "labels", "annotations", "ownerReferences", "uid", "creationTimestamp",
                         "generation", "resourceVersion"}
    assert meta["labels"]["app"] == "tick" and meta["annotations"] == {
        "team": "a", SCHEDULED_TIMESTAMP: datetime.fromtimestamp(first, timezone.utc).isoformat()}
    assert [(r["kind"], r["name"], r["controller"]) for r in meta["ownerReferences"]] == [("CronJob", "tick", True)]


async def test_missed_times_are_counted_from_the_last_scheduled_time_not_from_creation(harness):
    await harness.api.create(CRONJOBS, "default", cronjob("minutely", "* * * * *"), OPTS)
    start = harness.clock()
    harness.clock.now = start + 150 * 60  # 150 minutes away: more than a hundred missed
    await harness.sync("minutely")
    harness.clock.now += 60  # one more minute: one time missed since the last one run
    await harness.sync("minutely")
    reasons = [reason for _, reason, _ in await harness.events()]
    assert reasons.count("TooManyMissedTimes") == 1 and len(await harness.jobs()) == 2


@pytest.mark.parametrize("meanwhile", ["deleted", "made again"])
async def test_a_finished_job_deleted_or_made_again_meanwhile_is_left_as_it_is(harness, monkeypatch, meanwhile):
    """History trimming deletes the Job it read, by uid: gone already (404) or replaced by a new Job of
    the same name (409), nothing is deleted and the sync goes on."""
    await harness.change(successfulJobsHistoryLimit=0)
    harness.clock.now = _next_five(harness.clock()) + 1
    await harness.sync()
    (job,) = await harness.jobs()
    await harness.finish(job, "Complete")
    name, delete = job["metadata"]["name"], harness.api.delete

    async def raced(resource, namespace, obj_name, *args, **kwargs):
        if resource is JOBS and obj_name == name and args[2] == job["metadata"]["uid"]:
            current = (await harness.api.current(JOBS, namespace, obj_name)).obj
            await delete(JOBS, namespace, obj_name, 0, None, None)
            if meanwhile == "made again":
                await harness.api.create(JOBS, namespace, {"metadata": {
                    "name": obj_name, "ownerReferences": current["metadata"]["ownerReferences"]},
                    "spec": {"template": current["spec"]["template"]}}, OPTS)
        return await delete(resource, namespace, obj_name, *args, **kwargs)

    monkeypatch.setattr(harness.api, "delete", raced)
    await harness.sync()
    names = [j["metadata"]["name"] for j in await harness.jobs()]
    assert names == ([name] if meanwhile == "made again" else [])  # the new one is not the one it read
