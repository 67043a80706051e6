"""The Job controller, synced by hand on a fake clock: completions and parallelism, a work queue,
backoffLimit with its back-off, activeDeadlineSeconds, Indexed Jobs, suspend and
ttlSecondsAfterFinished; and the API's rules for Jobs."""

from __future__ import annotations

import pytest

from corral.api.defaults import rfc3339
from corral.api.kinds.batch import COMPLETION_INDEX, CONTROLLER_UID
from corral.api.resources import by_kind
from corral.controllers.job import JobController, indexes_text, parse_indexes
from corral.server import errors
from corral.server.rest import WriteOptions
from corral.testing.clock import FakeClock
from corral.testing.server import running_server

JOBS, PODS = by_kind("Job"), by_kind("Pod")
OPTS = WriteOptions(warn=False)
START = 1_800_000_000.0


def job(name: str = "work", **spec) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {**spec, "template": {"spec": {"restartPolicy": "Never",
                                                   "containers": [{"name": "c", "image": "busybox"}]}}}}


class Harness:
    def __init__(self, api) -> None:
        self.api = api
        self.clock = FakeClock(START)
        self.controller = JobController(api, clock=self.clock)

    async def create(self, obj: dict) -> str:
        await self.api.create(JOBS, "default", obj, OPTS)
        return await self.sync(obj["metadata"]["name"])

    async def sync(self, name: str = "work"):
        await self.api.cache.wait_consistent()
        self.controller.reset()
        self.controller.initial_keys()
        return await self.controller.sync(JOBS.key("default", name))

    async def pods(self, *, active: bool = True) -> list[dict]:
        await self.api.cache.wait_consistent()
        out = [r.obj for r in self.api.cache.items(PODS.store_prefix)]
        if active:
            out = [p for p in out if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                   and not p["metadata"].get("deletionTimestamp")]
        return sorted(out, key=lambda p: p["metadata"]["name"])

    async def finish(self, pod: dict, phase: str) -> None:
        current = (await self.api.current(PODS, "default", pod["metadata"]["name"])).obj
        state = {"terminated": {"exitCode": 0 if phase == "Succeeded" else 1, "finishedAt": rfc3339(self.clock())}}
        status = {"phase": phase, "containerStatuses": [{"name": "c", "state": state, "restartCount": 0}]}
        await self.api.update(PODS, "default", pod["metadata"]["name"], {**current, "status": status}, OPTS,
                              subresource="status")

    async def status(self, name: str = "work") -> dict:
        await self.api.cache.wait_consistent()
        return (await self.api.current(JOBS, "default", name)).obj.get("status") or {}

    async def condition(self, name: str = "work") -> tuple[str, str] | None:
        conds = [c for c in (await self.status(name)).get("conditions") or () if c["status"] == "True"]
        return (conds[-1]["type"], conds[-1]["reason"]) if conds else None


@pytest.fixture
async def harness(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        yield Harness(server.api)


async def test_a_job_runs_parallelism_pods_until_its_completions_succeed(harness):
    await harness.create(job(completions=3, parallelism=2))
    pods = await harness.pods()
    assert len(pods) == 2
    uid = (await harness.api.current(JOBS, "default", "work")).obj["metadata"]["uid"]
    assert pods[0]["metadata"]["labels"][CONTROLLER_UID] == uid and pods[0]["metadata"]["name"].startswith("work-")
    assert (await harness.status())["active"] == 2 and (await harness.status())["startTime"] == rfc3339(START)
    await harness.finish(pods[0], "Succeeded")
    await harness.sync()
    assert len(await harness.pods()) == 2  # one more: 1 done, 2 to go, 2 at a time
    assert (await harness.status())["succeeded"] == 1
    for pod in await harness.pods():
        await harness.finish(pod, "Succeeded")
    harness.clock.advance(5)
    await harness.sync()
    status = await harness.status()
    assert (status["succeeded"], status["active"], await harness.condition()) == (3, 0, ("Complete", "CompletionsReached"))
    assert status["completionTime"] == rfc3339(START + 5)
    await harness.sync()
    assert await harness.pods() == [] and (await harness.status())["succeeded"] == 3  # done: nothing more made


async def test_a_failing_job_is_retried_after_a_back_off_and_fails_past_its_backoff_limit(harness):
    await harness.create(job(backoffLimit=2))
    for attempt in range(3):
        (pod,) = await harness.pods()
        await harness.finish(pod, "Failed")
        again = await harness.sync()
        if attempt < 2:
            assert await harness.pods() == [] and again == pytest.approx(10 * 2 ** attempt)  # 10 s, then 20 s
            harness.clock.advance(again)
            await harness.sync()
    status = await harness.status()
    assert (status["failed"], status["active"], await harness.condition()) == (3, 0, ("Failed", "BackoffLimitExceeded"))
    assert len(await harness.pods(active=False)) == 3 and await harness.pods() == []


async def test_a_job_running_past_its_deadline_fails_and_its_pods_are_stopped(harness):
    again = await harness.create(job(parallelism=2, completions=4, activeDeadlineSeconds=60))
    assert again == pytest.approx(60) and len(await harness.pods()) == 2
    harness.clock.advance(60)
    await harness.sync()
    assert await harness.condition() == ("Failed", "DeadlineExceeded")
    assert await harness.pods() == []  # deleted


async def test_an_indexed_job_runs_each_index_once_and_reports_them(harness):
    await harness.create(job(completions=3, parallelism=3, completionMode="Indexed"))
    pods = await harness.pods()
    by_index = {p["metadata"]["annotations"][COMPLETION_INDEX]: p for p in pods}
    assert sorted(by_index) == ["0", "1", "2"]
    assert by_index["1"]["metadata"]["name"].startswith("work-1-")
    assert {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}} in by_index["1"]["spec"]["containers"][0]["env"]
    await harness.finish(by_index["1"], "Succeeded")
    await harness.finish(by_index["2"], "Failed")
    harness.clock.advance(30)
    await harness.sync()
    assert (await harness.status())["completedIndexes"] == "1"
    replacement = [p for p in await harness.pods() if p["metadata"]["annotations"][COMPLETION_INDEX] == "2"]
    assert len(replacement) == 1  # index 2 again (its back-off over), not index 1
    for pod in await harness.pods():
        await harness.finish(pod, "Succeeded")
    await harness.sync()
    status = await harness.status()
    assert (status["completedIndexes"], status["succeeded"], await harness.condition()) == ("0-2", 3, ("Complete", "CompletionsReached"))


async def test_a_work_queue_job_completes_once_one_pod_succeeded_and_none_runs(harness):
    await harness.create(job(parallelism=2))
    first, second = await harness.pods()
    await harness.finish(first, "Succeeded")
    await harness.sync()
    assert await harness.condition() is None and len(await harness.pods()) == 1  # no new pod; the other runs on
    await harness.finish(second, "Succeeded")
    await harness.sync()
    assert await harness.condition() == ("Complete", "CompletionsReached")


async def test_a_suspended_job_stops_its_pods_and_a_finished_one_goes_after_its_ttl(harness):
    await harness.create(job(parallelism=2, completions=2))
    current = (await harness.api.current(JOBS, "default", "work")).obj
    await harness.api.update(JOBS, "default", "work", {**current, "spec": {**current["spec"], "suspend": True}}, OPTS)
    await harness.sync()
    assert await harness.pods() == [] and await harness.condition() == ("Suspended", "JobSuspended")

    await harness.create(job("short", ttlSecondsAfterFinished=30))
    (pod,) = [p for p in await harness.pods() if p["metadata"]["name"].startswith("short-")]
    await harness.finish(pod, "Succeeded")
    assert await harness.sync("short") == pytest.approx(30)  # looked at again when its time is up
    harness.clock.advance(30)
    await harness.sync("short")
    await harness.api.cache.wait_consistent()
    with pytest.raises(errors.ApiError) as gone:
        await harness.api.current(JOBS, "default", "short")
    assert gone.value.code == 404


async def test_the_api_refuses_jobs_kubernetes_refuses_and_keeps_their_template(harness):
    api = harness.api
    bad = job("bad")
    bad["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    with pytest.raises(errors.ApiError) as err:
        await api.create(JOBS, "default", bad, OPTS)
    assert "spec.template.spec.restartPolicy: Unsupported value: \"Always\"" in err.value.message
    with pytest.raises(errors.ApiError) as err:
        await api.create(JOBS, "default", job("idx", completionMode="Indexed", parallelism=2), OPTS)
    assert "spec.completions: Required value: when completion mode is Indexed" in err.value.message
    await api.create(JOBS, "default", job("fixed"), OPTS)
    current = (await api.current(JOBS, "default", "fixed")).obj
    assert current["spec"]["backoffLimit"] == 6 and current["spec"]["completions"] == 1
    changed = {**current, "spec": {**current["spec"], "template": {**current["spec"]["template"], "spec": {
        **current["spec"]["template"]["spec"], "restartPolicy": "OnFailure"}}}}
    with pytest.raises(errors.ApiError) as err:
        await api.update(JOBS, "default", "fixed", changed, OPTS)
    assert "spec.template: Invalid value: template: field is immutable" in err.value.message


def test_completed_indexes_read_and_write_as_kubernetes_writes_them():
    assert parse_indexes("0-2,5,7-8") == {0, 1, 2, 5, 7, 8}
    assert indexes_text({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8" and indexes_text(set()) == ""
