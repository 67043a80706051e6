"""The pod state machine, driven by events alone."""

from __future__ import annotations

import pytest

from corral.agent.machine import (
    BackoffPolicy, Emit, Exited, Forget, PodMachine, Removed, Report, StartFailed, Started, Stop,
    Stopped, Sync, Tick,
)
from corral.testing.builders import make_pod


def pod(restart: str = "Always", containers: int = 1, **meta) -> dict:
    obj = make_pod("p").node("n1").obj
    obj["spec"]["restartPolicy"] = restart
    obj["spec"]["containers"] = [{"name": f"c{i}", "image": "img", "command": ["run"]} for i in range(containers)]
    obj["metadata"].update(meta)
    return obj


def kinds(actions) -> list[str]:
    return [type(a).__name__ + (f":{a.reason}" if isinstance(a, Emit) else "") for a in actions]


def last_report(actions) -> dict:
    return [a for a in actions if isinstance(a, Report)][-1].status


def test_a_new_pod_starts_every_container_and_runs_when_all_run():
    m = PodMachine(pod(containers=2))
    actions = m.handle(Sync(m.pod, 100))
    assert kinds(actions) == ["Start", "Start", "Report"]
    assert last_report(actions)["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    m.handle(Started("c0", "id0", 101))
    assert m.phase == "Scheduled"
    actions = m.handle(Started("c1", "id1", 102))
    assert m.phase == "Running"
    status = last_report(actions)
    assert status["phase"] == "Running" and all(c["ready"] for c in status["containerStatuses"])


def test_containers_that_exit_0_with_restart_never_succeed():
    m = PodMachine(pod(restart="Never"))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))
    actions = m.handle(Exited("c0", 0, False, 2))
    assert m.phase == "Succeeded" and last_report(actions)["phase"] == "Succeeded"
    terminated = last_report(actions)["containerStatuses"][0]["state"]["terminated"]
    assert terminated == {"exitCode": 0, "reason": "Completed", "finishedAt": "1970-01-01T00:00:02Z"}


def test_a_container_that_fails_with_restart_never_fails_the_pod_with_its_exit_code():
    m = PodMachine(pod(restart="Never"))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))
    status = last_report(m.handle(Exited("c0", 3, False, 2)))
    assert status["phase"] == "Failed" and status["reason"] == "Error"
    assert status["message"] == "container c0 failed: exit code 3"
    assert status["containerStatuses"][0]["state"]["terminated"] == {
        "exitCode": 3, "reason": "Error", "finishedAt": "1970-01-01T00:00:02Z"}


def test_a_missing_command_fails_the_pod_with_the_start_error():
    m = PodMachine(pod(restart="Never"))
    m.handle(Sync(m.pod, 0))
    status = last_report(m.handle(StartFailed("c0", "StartError", 'exec: "nope": executable file not found in $PATH', 1)))
    assert status["phase"] == "Failed" and status["reason"] == "StartError"
    assert "executable file not found" in status["message"]


def test_an_oom_killed_container_says_so():
    m = PodMachine(pod(restart="Never"))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))
    status = last_report(m.handle(Exited("c0", 137, True, 2)))
    assert status["reason"] == "OOMKilled" and "more memory than its limit" in status["message"]


def test_a_crashing_container_with_restart_always_backs_off_doubling_and_counts_restarts():
    m = PodMachine(pod(), backoff=BackoffPolicy(initial=10, maximum=40))
    m.handle(Sync(m.pod, 0))
    now, delays = 0.0, []
    for restart in range(1, 5):
        m.handle(Started("c0", "id", now))
        actions = m.handle(Exited("c0", 1, False, now + 1))
        assert kinds(actions) == ["Emit:BackOff", "Report"]
        status = last_report(actions)
        assert status["containerStatuses"][0]["restartCount"] == restart
        assert status["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        due = m.next_deadline()
        delays.append(due - (now + 1))
        assert m.handle(Tick(due - 0.5)) == []  # not yet
        assert kinds(m.handle(Tick(due))) == ["Start"]
        now = due
    assert delays == [10, 20, 40, 40]


def test_on_failure_restarts_failures_but_not_successes():
    m = PodMachine(pod(restart="OnFailure"))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))
    m.handle(Exited("c0", 1, False, 2))
    assert m.next_deadline() is not None
    m.handle(Tick(m.next_deadline()))
    m.handle(Started("c0", "id", 20))
    m.handle(Exited("c0", 0, False, 21))
    assert m.phase == "Succeeded"


def test_deletion_stops_with_the_grace_period_then_reports_terminated():
    m = PodMachine(pod())
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))
    deleting = pod(deletionTimestamp="2026-01-01T00:00:30Z", deletionGracePeriodSeconds=7)
    actions = m.handle(Sync(deleting, 5))
    assert m.phase == "Terminating"
    assert kinds(actions) == ["Emit:Killing", "Stop"] and actions[1] == Stop(7.0)
    assert m.handle(Exited("c0", 143, False, 6)) == []  # the kill's own exit is no crash
    actions = m.handle(Stopped(8))
    assert last_report(actions)["phase"] == "Terminated" and isinstance(actions[-1], Forget)


def test_a_second_deletion_with_less_time_stops_again_sooner_and_the_pod_is_reported_once():
    m = PodMachine(pod())
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))
    assert m.handle(Sync(pod(deletionTimestamp="2026-01-01T00:00:30Z", deletionGracePeriodSeconds=30), 2))[-1] == \
        Stop(30.0)
    assert m.handle(Sync(pod(deletionTimestamp="2026-01-01T00:00:30Z", deletionGracePeriodSeconds=30), 3)) == []
    assert m.handle(Sync(pod(deletionTimestamp="2026-01-01T00:00:05Z", deletionGracePeriodSeconds=5), 4)) == \
        [Stop(5.0)]
    assert m.handle(Sync(pod(deletionTimestamp="2026-01-01T00:00:05Z", deletionGracePeriodSeconds=5), 5)) == []
    actions = m.handle(Stopped(6))  # the second stop's kill
    assert last_report(actions)["phase"] == "Terminated" and isinstance(actions[-1], Forget)
    assert m.handle(Stopped(31)) == []  # the first stop's, which found nothing left: nothing more to say
    assert m.handle(Sync(pod(deletionTimestamp="2026-01-01T00:00:00Z", deletionGracePeriodSeconds=0), 32)) == []


def test_a_container_deleted_before_it_started_is_reported_as_kubelet_does_not_as_a_success():
    m = PodMachine(pod(containers=2))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))  # c1 is still being created
    m.handle(Sync(pod(containers=2, deletionTimestamp="2026-01-01T00:00:30Z", deletionGracePeriodSeconds=7), 5))
    states = [c["state"] for c in last_report(m.handle(Stopped(8)))["containerStatuses"]]
    assert states == [{"terminated": {"exitCode": 137, "reason": "Killed", "finishedAt": "1970-01-01T00:00:08Z"}},
                      {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
                                      "finishedAt": "1970-01-01T00:00:08Z",
                                      "message": "The container could not be located when the pod was terminated"}}]


def test_a_pod_removed_or_bound_elsewhere_is_stopped_at_once_without_a_report():
    m = PodMachine(pod())
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))
    actions = m.handle(Removed(2))
    assert Stop(0.0) in actions and not any(isinstance(a, Report) for a in actions)
    assert kinds(m.handle(Stopped(3))) == ["Forget"]


def test_every_transition_is_in_the_history():
    m = PodMachine(pod(restart="Never"))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))
    m.handle(Exited("c0", 0, False, 2))
    assert [(t.event, t.phase_before, t.phase_after) for t in m.history] == [
        ("Sync", "Scheduled", "Scheduled"), ("Started", "Scheduled", "Running"), ("Exited", "Running", "Succeeded"),
    ]


def test_a_container_that_exits_0_with_restart_always_is_restarted_and_the_pod_stays_running():
    m = PodMachine(pod(restart="Always"), backoff=BackoffPolicy(initial=10, maximum=40))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))
    status = last_report(m.handle(Exited("c0", 0, False, 2)))
    assert m.phase == "Running" and status["phase"] == "Running"
    container = status["containerStatuses"][0]
    assert container["restartCount"] == 1
    assert container["lastState"]["terminated"]["exitCode"] == 0
    assert m.next_deadline() == 12  # after the 10 s back-off
    assert kinds(m.handle(Tick(12))) == ["Start"]
    status = last_report(m.handle(Started("c0", "id2", 13)))
    assert status["containerStatuses"][0]["state"] == {"running": {"startedAt": "1970-01-01T00:00:13Z"}}


def test_restart_counts_and_last_states_go_on_after_an_agent_restart():
    """A new machine for a pod its agent ran before restarting: the server's copy of the pod carries
    what that agent reported, and the counts go on from there instead of starting again at 0."""
    before = pod()
    last = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-11-24T10:00:00Z"}}
    before["status"] = {"phase": "Running", "containerStatuses": [
        {"name": "c0", "restartCount": 3, "lastState": last, "state": {"running": {}}, "ready": True}]}
    m = PodMachine(before, backoff=BackoffPolicy(initial=10, maximum=40))
    m.handle(Sync(m.pod, 0))
    status = last_report(m.handle(Started("c0", "id", 1)))["containerStatuses"][0]
    assert status["restartCount"] == 3 and status["lastState"] == last
    status = last_report(m.handle(Exited("c0", 1, False, 2)))["containerStatuses"][0]
    assert status["restartCount"] == 4


def with_init(restart: str = "Always", inits: int = 2) -> dict:
    obj = pod(restart)
    obj["spec"]["initContainers"] = [{"name": f"init{i}", "image": "img", "command": ["prepare"]}
                                     for i in range(inits)]
    return obj


def started_names(actions) -> list[str]:
    return [a.container["name"] for a in actions if type(a).__name__ == "Start"]


def initialized(status: dict) -> str:
    return next(c["status"] for c in status["conditions"] if c["type"] == "Initialized")


def test_init_containers_run_one_at_a_time_in_order_before_the_containers():
    m = PodMachine(with_init())
    actions = m.handle(Sync(m.pod, 0))
    assert started_names(actions) == ["init0"]
    status = last_report(actions)
    assert initialized(status) == "False" and [s["name"] for s in status["initContainerStatuses"]] == ["init0", "init1"]
    assert status["containerStatuses"][0]["state"] == {"waiting": {"reason": "PodInitializing"}}
    m.handle(Started("init0", "i0", 1))
    assert started_names(m.handle(Exited("init0", 0, False, 2))) == ["init1"]
    m.handle(Started("init1", "i1", 3))
    actions = m.handle(Exited("init1", 0, False, 4))
    assert started_names(actions) == ["c0"]
    assert initialized(last_report(actions)) == "True"
    # initialised: the container is being created now, no longer waiting for the init containers
    assert last_report(actions)["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}
    actions = m.handle(Started("c0", "c", 5))
    status = last_report(actions)
    assert m.phase == "Running" and status["initContainerStatuses"][1]["state"]["terminated"]["reason"] == "Completed"


def test_a_failed_init_container_fails_the_pod_with_restart_never_and_nothing_else_runs():
    m = PodMachine(with_init("Never"))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("init0", "i0", 1))
    actions = m.handle(Exited("init0", 3, False, 2))
    assert started_names(actions) == [] and m.phase == "Failed"
    assert last_report(actions)["message"] == "init container init0 failed: exit code 3"
    (cond,) = [c for c in last_report(actions)["conditions"] if c["type"] == "Initialized"]
    assert cond["message"] == "containers with incomplete status: [init0 init1]"  # a failed one is not done


def test_a_failed_init_container_is_restarted_with_back_off_and_the_containers_wait():
    m = PodMachine(with_init("Always", inits=1), backoff=BackoffPolicy(initial=10, maximum=40))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("init0", "i0", 1))
    actions = m.handle(Exited("init0", 1, False, 2))
    status = last_report(actions)["initContainerStatuses"][0]
    assert status["restartCount"] == 1 and status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert started_names(m.handle(Tick(12))) == ["init0"]
    m.handle(Started("init0", "i0", 12))
    assert started_names(m.handle(Exited("init0", 0, False, 13))) == ["c0"]


def _probed_pod(**probes) -> dict:
    obj = pod()
    obj["spec"]["containers"][0].update(probes)
    return obj


def _ready(actions) -> tuple[str, bool, bool]:
    status = last_report(actions)
    cond = next(c["status"] for c in status["conditions"] if c["type"] == "Ready")
    c = status["containerStatuses"][0]
    return cond, c["ready"], c["started"]


def test_a_readiness_probe_holds_ready_back_until_it_passes_and_takes_it_away_when_it_fails():
    from corral.agent.machine import Probed

    m = PodMachine(_probed_pod(readinessProbe={"exec": {"command": ["check"]}}))
    m.handle(Sync(m.pod, 0))
    assert _ready(m.handle(Started("c0", "id1", 1))) == ("False", False, True)  # running, not ready
    assert _ready(m.handle(Probed("c0", "id1", "readiness", True, "", 2))) == ("True", True, True)
    assert m.handle(Probed("c0", "id1", "readiness", True, "", 2.5)) == []  # no change: nothing reported
    actions = m.handle(Probed("c0", "id1", "readiness", False, "503", 3))
    assert _ready(actions) == ("False", False, True) and "Emit:Unhealthy" in kinds(actions)
    assert m.handle(Probed("c0", "old-run", "readiness", True, "", 4)) == []  # about another run: dropped


def test_a_failing_liveness_probe_kills_the_container_and_its_restart_policy_restarts_it():
    from corral.agent.machine import Probed

    m = PodMachine(_probed_pod(livenessProbe={"exec": {"command": ["check"]}}), backoff=BackoffPolicy(initial=10))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id1", 1))
    assert m.handle(Probed("c0", "id1", "liveness", True, "", 2)) == []
    actions = m.handle(Probed("c0", "id1", "liveness", False, "no file", 3))
    assert kinds(actions) == ["Emit:Unhealthy", "Emit:Killing", "Stop", "Report"]
    stop = [a for a in actions if isinstance(a, Stop)][0]
    assert (stop.container, stop.grace_seconds) == ("c0", 30.0)
    actions = m.handle(Exited("c0", 137, False, 4))  # the kill's end: restarted after the back-off
    assert last_report(actions)["containerStatuses"][0]["restartCount"] == 1 and m.next_deadline() == 14


def test_a_startup_probe_holds_started_and_ready_back_and_without_probes_run_they_count_as_passing():
    from corral.agent.machine import Probed

    spec = {"startupProbe": {"tcpSocket": {"port": 80}}, "readinessProbe": {"tcpSocket": {"port": 80}}}
    m = PodMachine(_probed_pod(**spec))
    m.handle(Sync(m.pod, 0))
    assert _ready(m.handle(Started("c0", "id1", 1))) == ("False", False, False) and not m.started("c0")
    assert _ready(m.handle(Probed("c0", "id1", "startup", True, "", 2))) == ("False", False, True)
    assert m.started("c0")
    hollow = PodMachine(_probed_pod(**spec), probes=False)  # the simulator runs no probes
    hollow.handle(Sync(hollow.pod, 0))
    assert _ready(hollow.handle(Started("c0", "id1", 1))) == ("True", True, True)


def emits(actions) -> list[tuple[str, str, str]]:
    return [(a.type, a.reason, a.message) for a in actions if isinstance(a, Emit)]


def test_a_container_whose_config_is_missing_waits_and_is_tried_again_after_the_first_back_off():
    from corral.agent.runtimes.base import CONFIG_ERROR

    m = PodMachine(pod(restart="Never"), backoff=BackoffPolicy(initial=10, maximum=40))
    m.handle(Sync(m.pod, 0))
    actions = m.handle(StartFailed("c0", CONFIG_ERROR, 'configmap "settings" not found', 5))
    assert emits(actions) == [("Warning", "Failed", 'Error: configmap "settings" not found')]
    status = last_report(actions)
    assert status["containerStatuses"][0]["state"] == {
        "waiting": {"reason": CONFIG_ERROR, "message": 'configmap "settings" not found'}}
    assert status["containerStatuses"][0]["restartCount"] == 0 and m.phase == "Scheduled"
    assert m.handle(Tick(14.9)) == []
    assert started_names(m.handle(Tick(15))) == ["c0"]  # not a restart, even under Never


@pytest.mark.parametrize("reason, waiting", [("ErrImagePull", "ImagePullBackOff"), ("StartError", "CrashLoopBackOff")])
@pytest.mark.parametrize("restart", ["Always", "OnFailure"])
def test_a_container_that_cannot_start_backs_off_as_its_restart_policy_says(reason, waiting, restart):
    m = PodMachine(pod(restart=restart), backoff=BackoffPolicy(initial=10, maximum=40))
    m.handle(Sync(m.pod, 0))
    actions = m.handle(StartFailed("c0", reason, "no such image", 5))
    assert emits(actions) == [("Warning", "Failed", "Error: no such image"),
                              ("Warning", "BackOff", "Back-off restarting failed container c0")]
    status = last_report(actions)["containerStatuses"][0]
    assert status["state"] == {"waiting": {"reason": waiting, "message": "no such image"}}
    assert status["restartCount"] == 1 and status["lastState"] == {"terminated": {
        "exitCode": 128, "reason": reason, "message": "no such image", "finishedAt": "1970-01-01T00:00:05Z"}}
    assert m.handle(Tick(14.9)) == [] and started_names(m.handle(Tick(15))) == ["c0"]


def test_an_init_container_that_cannot_start_under_never_fails_the_pod():
    m = PodMachine(with_init("Never", inits=1))
    m.handle(Sync(m.pod, 0))
    status = last_report(m.handle(StartFailed("init0", "StartError", "exec: not found", 1)))
    assert (status["phase"], status["reason"], status["message"]) == (
        "Failed", "StartError", "init container init0 failed: exec: not found")


def test_a_succeeded_pod_says_no_reason_and_a_crash_loop_waits():
    m = PodMachine(pod(restart="Never"))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))
    status = last_report(m.handle(Exited("c0", 0, False, 2)))
    assert "reason" not in status and "message" not in status
    m = PodMachine(pod(), backoff=BackoffPolicy(initial=10, maximum=40))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id", 1))
    status = last_report(m.handle(Exited("c0", 2, False, 3)))["containerStatuses"][0]
    assert status["state"] == {"waiting": {"reason": "CrashLoopBackOff",
                                           "message": "back-off 10s restarting failed container"}}
    assert status["ready"] is False and status["started"] is False


def test_containers_due_to_restart_at_the_same_tick_all_start():
    m = PodMachine(pod(containers=2), backoff=BackoffPolicy(initial=10, maximum=40))
    m.handle(Sync(m.pod, 0))
    for name in ("c0", "c1"):
        m.handle(Started(name, name, 1))
        m.handle(Exited(name, 1, False, 2))
    assert started_names(m.handle(Tick(12))) == ["c0", "c1"]


def test_stopping_a_pod_names_the_containers_it_stops_and_keeps_how_finished_ones_ended():
    m = PodMachine(with_init(inits=1))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("init0", "i0", 1))
    assert emits(m.handle(Removed(2))) == [("Normal", "Killing", "Stopping container init0")]  # still initialising
    m = PodMachine(pod(restart="Never", containers=2))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "a", 1))
    m.handle(Started("c1", "b", 1))
    m.handle(Exited("c0", 3, False, 2))
    deleting = pod(restart="Never", containers=2, deletionTimestamp="2026-01-01T00:00:30Z",
                   deletionGracePeriodSeconds=5)
    deleting["spec"]["containers"] = m.pod["spec"]["containers"]
    assert emits(m.handle(Sync(deleting, 3))) == [("Normal", "Killing", "Stopping container c0, c1")]
    states = [c["state"]["terminated"] for c in last_report(m.handle(Stopped(4)))["containerStatuses"]]
    assert [(s["exitCode"], s["reason"]) for s in states] == [(3, "Error"), (137, "Killed")]


def test_probe_failures_are_said_and_a_liveness_kill_uses_the_probes_own_grace_period():
    from corral.agent.machine import Probed

    m = PodMachine(_probed_pod(readinessProbe={"exec": {"command": ["ready"]}},
                               livenessProbe={"exec": {"command": ["alive"]}, "terminationGracePeriodSeconds": 3}))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id1", 1))
    m.handle(Probed("c0", "id1", "readiness", True, "", 2))
    assert emits(m.handle(Probed("c0", "id1", "readiness", False, "HTTP 503", 3))) == [
        ("Warning", "Unhealthy", "Readiness probe failed: HTTP 503")]
    m.handle(Probed("c0", "id1", "readiness", True, "", 4))
    actions = m.handle(Probed("c0", "id1", "liveness", False, "exit 1", 5))
    assert emits(actions) == [("Warning", "Unhealthy", "Liveness probe failed: exit 1"),
                              ("Normal", "Killing", "Container c0 failed liveness probe, will be restarted")]
    assert Stop(3.0, "c0") in actions and _ready(actions) == ("False", False, True)  # not ready while it is killed


def test_probe_results_that_come_while_the_pod_stops_change_nothing():
    from corral.agent.machine import Probed

    m = PodMachine(_probed_pod(livenessProbe={"exec": {"command": ["alive"]}}))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "id1", 1))
    m.handle(Removed(2))
    assert m.handle(Probed("c0", "id1", "liveness", False, "exit 1", 3)) == []
    assert m.handle(Probed("c0", "id1", "readiness", False, "exit 1", 3)) == []


def test_the_first_report_of_a_pod_with_init_containers_says_what_kubectl_shows():
    m = PodMachine(with_init(inits=2))
    status = last_report(m.handle(Sync(m.pod, 100)))
    ts = "1970-01-01T00:01:40Z"
    assert status["conditions"] == [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts},
        {"type": "Initialized", "status": "False", "lastTransitionTime": ts, "reason": "ContainersNotInitialized",
         "message": "containers with incomplete status: [init0 init1]"},
        {"type": "ContainersReady", "status": "False", "lastTransitionTime": ts},
        {"type": "Ready", "status": "False", "lastTransitionTime": ts}]
    assert status["qosClass"] == "BestEffort"  # until the API server's class reaches the agent
    assert [s["state"] for s in status["initContainerStatuses"]] == [{"waiting": {"reason": "PodInitializing"}}] * 2
    m.handle(Started("init0", "i0", 101))
    status = last_report(m.handle(Exited("init0", 0, False, 102)))
    (cond,) = [c for c in status["conditions"] if c["type"] == "Initialized"]
    assert cond["message"] == "containers with incomplete status: [init1]"  # init0 is done


def test_an_agent_restarted_during_initialisation_goes_on_counting_its_init_containers_restarts():
    before = with_init(inits=1)
    last = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-11-24T10:00:00Z"}}
    before["status"] = {"phase": "Pending", "initContainerStatuses": [
        {"name": "init0", "restartCount": 1, "lastState": last, "state": {"running": {}}}],
        "containerStatuses": [{"name": "c0", "restartCount": "3", "lastState": "junk", "state": {"waiting": {}}},
                              "not a status"]}  # what a hand-edited status may hold: not taken
    m = PodMachine(before)
    status = last_report(m.handle(Sync(m.pod, 0)))
    assert (status["initContainerStatuses"][0]["restartCount"], status["initContainerStatuses"][0]["lastState"]) == (
        1, last)
    assert status["containerStatuses"][0]["restartCount"] == 0 and "lastState" not in status["containerStatuses"][0]
    m.handle(Started("init0", "i0", 1))
    status = last_report(m.handle(Exited("init0", 1, False, 2)))  # failed: backing off, still not done
    (cond,) = [c for c in status["conditions"] if c["type"] == "Initialized"]
    assert cond["message"] == "containers with incomplete status: [init0]"


def test_a_container_being_started_is_not_started_again_and_is_named_when_the_pod_stops():
    m = PodMachine(pod(), backoff=BackoffPolicy(initial=10, maximum=40))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("c0", "a", 1))
    m.handle(Exited("c0", 1, False, 2))  # crashed: restarted once its back-off ends
    assert started_names(m.handle(Tick(12))) == ["c0"]  # starting now, not yet Started
    assert started_names(m.handle(Tick(13))) == []  # a tick meanwhile does not start it twice
    assert emits(m.handle(Removed(14))) == [("Normal", "Killing", "Stopping container c0")]  # what may be running
