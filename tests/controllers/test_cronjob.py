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
from corral.controllers.cronjob import SCHEDULED_TIMESTAMP, CronJobController
from corral.scheduler.cache.node_table import parse_timestamp
from corral.server import errors
from corral.server.rest import WriteOptions
from corral.testing.clock import FakeClock
from corral.testing.server import running_server

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
        yield Harness(server.api, parse_timestamp(made))


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
    assert status["lastScheduleTime"] == rfc3339(first) and [a["name"] for a in status["active"]] == [job["metadata"]["name"]]
    await harness.sync()
    assert len(await harness.jobs()) == 1  # the same time never makes a second Job
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


async def test_a_time_past_its_starting_deadline_is_missed_and_suspend_makes_none(harness):
    current = (await harness.api.current(CRONJOBS, "default", "tick")).obj
    await harness.api.update(CRONJOBS, "default", "tick", {**current, "spec": {
        **current["spec"], "startingDeadlineSeconds": 10}}, OPTS)
    first = _next_five(harness.clock())
    harness.clock.now = first + 60  # the controller was away a minute: too late for this one
    await harness.sync()
    assert await harness.jobs() == [] and (await harness.status())["lastScheduleTime"] == rfc3339(first)
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
