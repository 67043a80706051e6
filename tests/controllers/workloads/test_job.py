"""The Job controller, synced by hand on a fake clock: completions and parallelism, a work queue,
backoffLimit with its back-off, activeDeadlineSeconds, Indexed Jobs, suspend and
ttlSecondsAfterFinished; and the API's rules for Jobs."""

from __future__ import annotations

import copy

import pytest

from corral.api.defaults import rfc3339
from corral.api.kinds.batch import COMPLETION_INDEX, CONTROLLER_UID
from corral.api.resources import by_kind
from corral.controllers.workloads.job import JobController, indexes_text, parse_indexes
from corral.server import errors
from corral.server.rest import WriteOptions
from corral.testing.clock import FakeClock
from corral.testing.server import recorded_events, running_server

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

    async def sync(self, name: str = "work", namespace: str = "default"):
        await self.api.cache.wait_consistent()
        self.controller.reset()
        self.controller.initial_keys()
        return await self.controller.sync(JOBS.key(namespace, name))

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

    async def set_status(self, pod: dict, status: dict) -> None:
        current = (await self.api.current(PODS, "default", pod["metadata"]["name"])).obj
        await self.api.update(PODS, "default", pod["metadata"]["name"], {**current, "status": status}, OPTS,
                              subresource="status")

    async def change(self, name: str = "work", **spec) -> None:
        current = (await self.api.current(JOBS, "default", name)).obj
        await self.api.update(JOBS, "default", name, {**current, "spec": {**current["spec"], **spec}}, OPTS)

    async def status(self, name: str = "work") -> dict:
        await self.api.cache.wait_consistent()
        return (await self.api.current(JOBS, "default", name)).obj.get("status") or {}

    async def events(self) -> list[tuple[str, str, str]]:
        return await recorded_events(self.controller)

    async def condition(self, name: str = "work") -> tuple[str, str] | None:
        conds = [c for c in (await self.status(name)).get("conditions") or () if c["status"] == "True"]
        return (conds[-1]["type"], conds[-1]["reason"]) if conds else None


@pytest.fixture
async def harness(tmp_path):
    async with running_server(str(tmp_path / "s"), scheduler=False, controllers=False) as server:
        harness = Harness(server.api)
        harness.controller.events.start()
        try:
            yield harness
        finally:
            await harness.controller.events.stop()


async def test_a_job_runs_parallelism_pods_until_its_completions_succeed(harness):
    await harness.create(job(completions=3, parallelism=2))
    pods = await harness.pods()
    assert len(pods) == 2
    uid = (await harness.api.current(JOBS, "default", "work")).obj["metadata"]["uid"]
    assert pods[0]["metadata"]["labels"][CONTROLLER_UID] == uid and pods[0]["metadata"]["name"].startswith("work-")
    assert (await harness.status())["active"] == 2 and (await harness.status())["startTime"] == rfc3339(START)
    written = (await harness.api.current(JOBS, "default", "work")).obj["metadata"]["resourceVersion"]
    await harness.sync()  # nothing changed: nothing written
    assert (await harness.api.current(JOBS, "default", "work")).obj["metadata"]["resourceVersion"] == written
    await harness.finish(pods[0], "Succeeded")
    await harness.sync()
    assert len(await harness.pods()) == 2  # one more: 1 done, 2 to go, 2 at a time
    assert (await harness.status())["succeeded"] == 1
    for pod in await harness.pods():
        await harness.finish(pod, "Succeeded")
    harness.clock.advance(5)
    await harness.sync()
    ended = rfc3339(START + 5)
    assert await harness.status() == {
        "startTime": rfc3339(START), "completionTime": ended, "active": 0, "ready": 0, "succeeded": 3, "failed": 0,
        "conditions": [{"type": "Complete", "status": "True", "reason": "CompletionsReached",
                        "message": "Reached expected number of succeeded pods", "lastProbeTime": ended,
                        "lastTransitionTime": ended}]}
    made = sorted(p["metadata"]["name"] for p in await harness.pods(active=False))
    events = await harness.events()
    assert sorted(events[:3]) == [("Normal", "SuccessfulCreate", f"Created pod: {name}") for name in made]
    assert events[3:] == [("Normal", "Completed", "Job completed")]
    written = (await harness.api.current(JOBS, "default", "work")).obj["metadata"]["resourceVersion"]
    await harness.sync()
    assert await harness.pods() == [] and (await harness.status())["succeeded"] == 3  # done: nothing more made
    assert (await harness.api.current(JOBS, "default", "work")).obj["metadata"]["resourceVersion"] == written


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
    (failed,) = status["conditions"]
    assert failed["message"] == "Job has reached the specified backoff limit" and "completionTime" not in status
    assert (await harness.events())[-1] == ("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit")


async def test_a_job_running_past_its_deadline_fails_and_its_pods_are_stopped(harness):
    again = await harness.create(job(parallelism=2, completions=4, activeDeadlineSeconds=60))
    assert again == pytest.approx(60) and len(await harness.pods()) == 2
    running = sorted(p["metadata"]["name"] for p in await harness.pods())
    harness.clock.advance(59.95)
    assert await harness.sync() == pytest.approx(0.1)  # looked at again when the deadline passes, not later
    harness.clock.advance(0.05)
    await harness.sync()
    assert await harness.condition() == ("Failed", "DeadlineExceeded")
    assert await harness.pods() == []  # deleted
    (failed,) = (await harness.status())["conditions"]
    assert failed["message"] == "Job was active longer than specified deadline"
    events = await harness.events()
    assert sorted(events[2:4]) == [("Normal", "SuccessfulDelete", f"Deleted pod: {name}") for name in running]
    assert events[4:] == [("Warning", "DeadlineExceeded", "Job was active longer than specified deadline")]


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
    await harness.create(job("single", parallelism=1))
    (pod,) = [p for p in await harness.pods() if p["metadata"]["name"].startswith("single-")]
    await harness.finish(pod, "Succeeded")
    await harness.sync("single")
    assert await harness.condition("single") == ("Complete", "CompletionsReached")


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


async def test_finished_pods_stay_counted_after_they_are_deleted(harness):
    await harness.create(job(completions=2, parallelism=2, backoffLimit=3))
    first, second = await harness.pods()
    await harness.finish(first, "Succeeded")
    await harness.finish(second, "Failed")
    await harness.sync()
    assert ((await harness.status())["succeeded"], (await harness.status())["failed"]) == (1, 1)
    for pod in (first, second):
        await harness.api.delete(PODS, "default", pod["metadata"]["name"], None, None, None)
    harness.clock.advance(10)  # the failed pod's back-off
    await harness.sync()
    status = await harness.status()
    assert (status["succeeded"], status["failed"], status["active"]) == (1, 1, 1)
    assert len(await harness.pods()) == 1  # one more to complete, not two


async def test_an_indexed_job_keeps_its_completed_indexes_when_their_pods_go(harness):
    await harness.create(job(completions=3, parallelism=1, completionMode="Indexed"))
    (pod,) = await harness.pods()
    await harness.finish(pod, "Succeeded")
    await harness.sync()
    await harness.api.delete(PODS, "default", pod["metadata"]["name"], None, None, None)
    await harness.sync()
    status = await harness.status()
    assert (status["completedIndexes"], status["succeeded"]) == ("0", 1)
    assert [p["metadata"]["annotations"][COMPLETION_INDEX] for p in await harness.pods()] == ["1"]
    # a pod of the Job claiming an index past its completions is not counted
    stray = {**(await harness.pods())[0], "status": {}}
    stray["metadata"] = {k: v for k, v in stray["metadata"].items() if k in ("labels", "ownerReferences")}
    stray["metadata"].update(name="stray", annotations={COMPLETION_INDEX: "3"})
    await harness.api.create(PODS, "default", stray, OPTS)
    await harness.finish(stray, "Succeeded")
    await harness.sync()
    assert ((await harness.status())["completedIndexes"], (await harness.status())["succeeded"]) == ("0", 1)
    # two pods that both completed index 1 (one thought lost, then both ran) count once
    (one,) = [p for p in await harness.pods() if p["metadata"]["annotations"][COMPLETION_INDEX] == "1"]
    twin = {**one, "status": {}}
    twin["metadata"] = {**{k: v for k, v in one["metadata"].items() if k in ("labels", "ownerReferences",
                                                                            "annotations")}, "name": "twin"}
    await harness.api.create(PODS, "default", twin, OPTS)
    for pod in (one, twin):
        await harness.finish(pod, "Succeeded")
    await harness.sync()
    assert ((await harness.status())["completedIndexes"], (await harness.status())["succeeded"]) == ("0-1", 2)


async def test_an_indexed_pod_carries_its_index_in_its_label_and_every_container(harness):
    template_spec = {"restartPolicy": "Never",
                     "initContainers": [{"name": "setup", "image": "busybox", "env": [{"name": "MODE", "value": "x"}]}],
                     "containers": [{"name": "c", "image": "busybox"}]}
    obj = job(completions=1, completionMode="Indexed")
    obj["spec"]["template"]["spec"] = template_spec
    await harness.create(obj)
    (pod,) = await harness.pods()
    assert pod["metadata"]["labels"][COMPLETION_INDEX] == "0"
    variable = {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}}
    assert pod["spec"]["initContainers"][0]["env"] == [{"name": "MODE", "value": "x"}, variable]
    assert pod["spec"]["containers"][0]["env"] == [variable]


async def test_container_restarts_under_on_failure_count_against_the_backoff_limit(harness):
    obj = job(backoffLimit=2)
    obj["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    await harness.create(obj)
    (pod,) = await harness.pods()

    def running(restarts: int) -> dict:
        return {"phase": "Running", "containerStatuses": [
            {"name": "c", "state": {"running": {}}, "restartCount": restarts},
            {"name": "sidecar", "state": {"running": {}}, "restartCount": 0}]}

    await harness.set_status(pod, running(2))
    await harness.sync()
    assert await harness.condition() is None and len(await harness.pods()) == 1  # 2 restarts: within the limit
    await harness.set_status(pod, running(3))
    await harness.sync()
    assert await harness.condition() == ("Failed", "BackoffLimitExceeded") and await harness.pods() == []


async def test_the_ready_pods_of_a_job_are_counted(harness):
    await harness.create(job(parallelism=3, completions=3))
    pods = await harness.pods()
    for pod, ready in zip(pods, ("True", "True", "False")):
        await harness.set_status(pod, {"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]})
    await harness.sync()
    status = await harness.status()
    assert (status["active"], status["ready"]) == (3, 2)
    # a condition another actor wrote stays through the controller's own writes
    current = (await harness.api.current(JOBS, "default", "work")).obj
    noted = {"type": "example.com/Audited", "status": "True", "lastTransitionTime": rfc3339(START)}
    await harness.api.update(JOBS, "default", "work", {**current, "status": {**status, "conditions": [noted]}},
                             OPTS, subresource="status")
    await harness.finish(pods[2], "Succeeded")
    await harness.sync()
    assert (await harness.status())["conditions"] == [noted] and (await harness.status())["succeeded"] == 1


async def test_a_job_created_suspended_starts_nothing_until_resumed(harness):
    await harness.create(job(parallelism=2, completions=2, suspend=True, activeDeadlineSeconds=30))
    status = await harness.status()
    assert await harness.pods() == [] and "startTime" not in status
    assert status["conditions"] == [{"type": "Suspended", "status": "True", "reason": "JobSuspended",
                                     "message": "Job suspended", "lastTransitionTime": rfc3339(START)}]
    harness.clock.advance(60)  # its deadline counts from when it starts, not while suspended
    await harness.sync()
    assert await harness.condition() == ("Suspended", "JobSuspended")
    await harness.change(suspend=False)
    await harness.sync()
    status = await harness.status()
    assert len(await harness.pods()) == 2 and status["startTime"] == rfc3339(START + 60)
    assert "conditions" not in status  # no longer Suspended


async def test_a_suspended_job_past_its_deadline_is_not_failed(harness):
    await harness.create(job(parallelism=1, completions=1, activeDeadlineSeconds=30))
    await harness.change(suspend=True)
    harness.clock.advance(60)
    await harness.sync()
    assert await harness.condition() == ("Suspended", "JobSuspended") and await harness.pods() == []


async def test_a_job_is_looked_at_again_at_its_deadline_when_that_comes_before_a_back_off(harness):
    await harness.create(job(activeDeadlineSeconds=8))
    harness.clock.advance(2)
    (pod,) = await harness.pods()
    await harness.finish(pod, "Failed")
    assert await harness.sync() == pytest.approx(6)  # the deadline in 6 s, before the 10 s back-off
    harness.clock.advance(3)
    assert await harness.sync() == pytest.approx(3)
    await harness.create(job("long", activeDeadlineSeconds=100))
    (pod,) = [p for p in await harness.pods() if p["metadata"]["name"].startswith("long-")]
    await harness.finish(pod, "Failed")
    assert await harness.sync("long") == pytest.approx(10)  # the back-off ends first


async def test_a_pod_failed_without_container_statuses_backs_off_from_when_it_was_seen(harness):
    await harness.create(job(completions=2, parallelism=2, backoffLimit=5))
    first, second = await harness.pods()
    await harness.set_status(first, {"phase": "Failed", "reason": "Evicted"})
    harness.clock.advance(4)
    assert await harness.sync() == pytest.approx(10)  # the whole back-off, from now
    await harness.set_status(second, {"phase": "Failed", "reason": "Evicted"})
    assert await harness.sync() == pytest.approx(20)  # two failures: 20 s
    assert await harness.pods() == []


async def test_lowering_parallelism_deletes_the_pods_not_yet_running_first(harness):
    await harness.create(job(parallelism=3, completions=6))
    pods = await harness.pods()
    await harness.set_status(pods[1], {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
    await harness.change(parallelism=1)
    await harness.sync()
    assert [p["metadata"]["name"] for p in await harness.pods()] == [pods[1]["metadata"]["name"]]
    assert (await harness.status())["active"] == 1


async def test_a_job_needing_fewer_pods_than_its_parallelism_starts_only_those(harness):
    await harness.create(job(parallelism=2, completions=2))
    first, second = await harness.pods()
    await harness.finish(first, "Succeeded")
    await harness.sync()
    assert [p["metadata"]["name"] for p in await harness.pods()] == [second["metadata"]["name"]]


@pytest.mark.parametrize("outcome", ["Succeeded", "Failed"])
async def test_the_pods_of_a_finished_job_are_stopped_and_it_stays_finished(harness, outcome):
    await harness.create(job(backoffLimit=0))
    (pod,) = await harness.pods()
    await harness.finish(pod, outcome)
    await harness.sync()
    conditions = (await harness.status())["conditions"]
    late = {k: v for k, v in pod.items() if k != "status"}
    late["metadata"] = {k: v for k, v in pod["metadata"].items() if k in ("labels", "ownerReferences")}
    late["metadata"]["name"] = "late"
    await harness.api.create(PODS, "default", late, OPTS)
    harness.clock.advance(5)
    await harness.sync()
    assert await harness.pods() == [] and (await harness.status())["conditions"] == conditions
    assert [c["type"] for c in conditions] == ["Complete" if outcome == "Succeeded" else "Failed"]


async def test_a_job_being_deleted_or_gone_is_left_alone(harness):
    obj = job("going")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    await harness.api.create(JOBS, "default", obj, OPTS)
    await harness.api.delete(JOBS, "default", "going", None, None, None)
    assert await harness.sync("going") is None
    assert await harness.pods() == []
    assert await harness.sync("never-made") is None


def test_completed_indexes_read_and_write_as_kubernetes_writes_them():
    assert parse_indexes("0-2,5,7-8") == {0, 1, 2, 5, 7, 8}
    assert indexes_text({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8" and indexes_text(set()) == ""


async def test_a_pod_the_api_refuses_is_said_in_an_event_and_the_sync_fails_to_be_retried(harness):
    obj = job()
    obj["spec"]["template"]["spec"]["priorityClassName"] = "missing"  # no such PriorityClass
    await harness.api.create(JOBS, "default", obj, OPTS)
    with pytest.raises(errors.ApiError) as refused:
        await harness.sync()
    assert await harness.pods() == []
    assert await harness.events() == [("Warning", "FailedCreate", f"Error creating: {refused.value.message}")]


async def test_a_jobs_pods_are_made_in_its_namespace(harness):
    await harness.api.create(by_kind("Namespace"), None, {"metadata": {"name": "team"}}, OPTS)
    await harness.api.create(JOBS, "team", job(), OPTS)
    await harness.sync(namespace="team")
    await harness.api.cache.wait_consistent()
    pods = [r.obj for r in harness.api.cache.items(PODS.store_prefix)]
    assert [p["metadata"]["namespace"] for p in pods] == ["team"]


async def test_a_failed_job_goes_after_its_ttl_counted_from_when_it_failed(harness):
    await harness.create(job(backoffLimit=0, ttlSecondsAfterFinished=30))
    (pod,) = await harness.pods()
    await harness.finish(pod, "Failed")
    assert await harness.sync() == pytest.approx(30)
    harness.clock.advance(29.5)
    assert await harness.sync() == pytest.approx(0.5)  # not yet, however close
    harness.clock.advance(0.5)
    assert await harness.sync() is None
    await harness.api.cache.wait_consistent()
    with pytest.raises(errors.ApiError) as gone:
        await harness.api.current(JOBS, "default", "work")
    assert gone.value.code == 404


async def test_a_ttl_that_runs_out_for_a_job_replaced_or_gone_meanwhile_deletes_nothing(harness):
    await harness.create(job(ttlSecondsAfterFinished=0))
    (pod,) = await harness.pods()
    await harness.finish(pod, "Succeeded")
    harness.controller.reset()  # the controller's view, a moment before what follows
    await harness.api.cache.wait_consistent()
    seen = (await harness.api.current(JOBS, "default", "work")).obj
    seen = {**seen, "status": {"conditions": [{"type": "Complete", "status": "True",
                                                "lastTransitionTime": rfc3339(START)}]}}
    await harness.api.delete(JOBS, "default", "work", None, None, None)
    await harness.api.create(JOBS, "default", job(), OPTS)  # another Job of the same name
    assert await harness.controller._expire(seen) is None  # 409: not the Job it saw
    await harness.api.cache.wait_consistent()
    assert (await harness.api.current(JOBS, "default", "work")).obj["metadata"]["uid"] != seen["metadata"]["uid"]
    await harness.api.delete(JOBS, "default", "work", None, None, None)
    assert await harness.controller._expire(seen) is None  # 404: gone already


async def test_a_status_write_that_finds_the_job_changed_or_gone_is_dropped(harness):
    await harness.create(job())
    stale = copy.deepcopy((await harness.api.current(JOBS, "default", "work")).obj)  # the controller's view
    await harness.change(parallelism=1, activeDeadlineSeconds=100)  # someone changed it meanwhile: 409
    await harness.controller._write_status(stale, {"active": 7})
    assert (await harness.status())["active"] == 1  # not written; the change queues the Job again
    await harness.api.delete(JOBS, "default", "work", None, None, None)
    await harness.controller._write_status(stale, {"active": 7})  # 404: nothing to write
