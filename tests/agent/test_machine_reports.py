"""The pod state machine's output, exactly: every action and the whole status it reports through a
pod's life (start, run, crash and back-off, a failed image pull, deletion with a grace period), as
`kubectl get pod -o yaml` and the official client read it."""

from __future__ import annotations

from corral.agent.machine import (
    BackoffPolicy, Emit, Exited, Forget, PodMachine, Removed, Report, Start, StartFailed, Started, Stop,
    Stopped, Sync, Tick,
)

SCHEDULED = {"type": "PodScheduled", "status": "True", "lastTransitionTime": "1970-01-01T00:00:50Z"}


def t(seconds: int) -> str:
    return f"1970-01-01T00:{seconds // 60:02d}:{seconds % 60:02d}Z"


def pod(restart: str = "Always", **meta) -> dict:
    return {"metadata": {"name": "web", "namespace": "shop", "uid": "u-1", **meta},
            "spec": {"nodeName": "n1", "restartPolicy": restart,
                     "containers": [{"name": "app", "image": "app:1"}, {"name": "side", "image": "side:2"}]},
            "status": {"phase": "Scheduled", "qosClass": "Burstable", "conditions": [SCHEDULED]}}


def status(now: int, phase: str, ready: bool, containers: list[dict], start: int = 100, **extra) -> dict:
    flag = "True" if ready else "False"
    return {"phase": phase,
            "conditions": [SCHEDULED,
                           {"type": "Initialized", "status": "True", "lastTransitionTime": t(now)},
                           {"type": "ContainersReady", "status": flag, "lastTransitionTime": t(now)},
                           {"type": "Ready", "status": flag, "lastTransitionTime": t(now)}],
            "containerStatuses": containers, "qosClass": "Burstable",
            "hostIP": "10.0.0.5", "podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}],
            "startTime": t(start), **extra}


def cs(name: str, image: str, state: dict, restarts: int = 0, cid: str = "", last: dict | None = None,
       image_id: str = "") -> dict:
    running = "running" in state
    out = {"name": name, "image": image, "imageID": image_id, "ready": running, "started": running,
           "restartCount": restarts, "state": state}
    if cid:
        out["containerID"] = cid
    if last:
        out["lastState"] = last
    return out


CREATING = {"waiting": {"reason": "ContainerCreating"}}


def test_a_pods_whole_life_reported_exactly():
    m = PodMachine(pod(), host_ip="10.0.0.5")
    app, side = pod()["spec"]["containers"]
    assert (m.key, m.uid, m.restart_policy, m.grace_seconds) == ("shop/web", "u-1", "Always", 30.0)

    assert m.handle(Sync(m.pod, 100)) == [Start(app), Start(side), Report(status(100, "Scheduled", False, [
        cs("app", "app:1", CREATING), cs("side", "side:2", CREATING)]))]
    assert m.handle(Sync(m.pod, 100.5)) == []  # nothing new: nothing to do

    assert m.handle(Started("app", "docker://a1", 101, "docker://sha256:aa")) == [
        Emit("Normal", "Started", "Started container app"),
        Report(status(101, "Scheduled", False, [
            cs("app", "app:1", {"running": {"startedAt": t(101)}}, cid="docker://a1", image_id="docker://sha256:aa"),
            cs("side", "side:2", CREATING)]))]
    running = [cs("app", "app:1", {"running": {"startedAt": t(101)}}, cid="docker://a1", image_id="docker://sha256:aa"),
               cs("side", "side:2", {"running": {"startedAt": t(102)}}, cid="docker://s1")]
    assert m.handle(Started("side", "docker://s1", 102)) == [
        Emit("Normal", "Started", "Started container side"), Report(status(102, "Running", True, running))]

    # side crashes: backs off 10 s; the pod stays Running but not Ready.
    crashed = {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": t(102), "finishedAt": t(110)}}
    backing_off = cs("side", "side:2", {"waiting": {"reason": "CrashLoopBackOff",
                                                    "message": "back-off 10s restarting failed container"}},
                     restarts=1, cid="docker://s1", last=crashed)
    assert m.handle(Exited("side", 1, False, 110)) == [
        Emit("Warning", "BackOff", "Back-off restarting failed container side"),
        Report(status(110, "Running", False, [running[0], backing_off]))]
    assert m.next_deadline() == 120
    assert m.handle(Tick(119)) == []
    assert m.handle(Tick(120)) == [Start(side)]
    assert m.handle(Tick(120.5)) == []  # already starting

    # The restart cannot pull its image: ImagePullBackOff, 20 s this time.
    pull = {"terminated": {"exitCode": 128, "reason": "ErrImagePull", "message": "pull denied",
                           "finishedAt": t(121)}}
    assert m.handle(StartFailed("side", "ErrImagePull", "pull denied", 121)) == [
        Emit("Warning", "Failed", "Error: pull denied"),
        Emit("Warning", "BackOff", "Back-off restarting failed container side"),
        Report(status(121, "Running", False, [running[0], cs(
            "side", "side:2", {"waiting": {"reason": "ImagePullBackOff", "message": "pull denied"}},
            restarts=2, cid="docker://s1", last=pull)]))]
    assert m.next_deadline() == 141

    # Deleted with a 5 s grace period: everything stops, nothing restarts, then it is reported gone.
    deleting = pod(deletionTimestamp=t(130), deletionGracePeriodSeconds=5)
    assert m.handle(Sync(deleting, 130)) == [Emit("Normal", "Killing", "Stopping container app, side"), Stop(5.0)]
    assert m.phase == "Terminating" and m.next_deadline() is None
    assert m.handle(Sync(deleting, 131)) == []
    assert m.handle(Started("side", "docker://s2", 131)) == []
    assert m.handle(Exited("app", 0, False, 132)) == []
    assert m.handle(StartFailed("side", "StartError", "x", 132)) == []
    assert m.handle(Tick(200)) == []
    done = m.handle(Stopped(135))
    assert done == [Report(status(135, "Terminated", False, [
        cs("app", "app:1", {"terminated": {"exitCode": 137, "reason": "Killed", "finishedAt": t(135)}},
           cid="docker://a1", image_id="docker://sha256:aa"),
        # side was backing off: it never runs again, reported as kubelet does (not as a success); its
        # last failure stays in lastState.
        cs("side", "side:2", {"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown", "finishedAt": t(135),
                                             "message": "The container could not be located when the pod was terminated"}},
           restarts=2, cid="docker://s1", last=pull),
    ])), Forget()]
    assert m.forgotten
    assert [(h.event, h.phase_before, h.phase_after) for h in m.history] == [
        ("Sync", "Scheduled", "Scheduled"), ("Sync", "Scheduled", "Scheduled"),
        ("Started", "Scheduled", "Scheduled"), ("Started", "Scheduled", "Running"),
        ("Exited", "Running", "Running"), ("Tick", "Running", "Running"), ("Tick", "Running", "Running"),
        ("Tick", "Running", "Running"), ("StartFailed", "Running", "Running"),
        ("Sync", "Running", "Terminating"), ("Sync", "Terminating", "Terminating"),
        ("Started", "Terminating", "Terminating"), ("Exited", "Terminating", "Terminating"),
        ("StartFailed", "Terminating", "Terminating"), ("Tick", "Terminating", "Terminating"),
        ("Stopped", "Terminating", "Terminated")]
    assert m.history[1].at == 100.5
    assert m.history[3].note == "Emit(Started), Report"
    assert m.history[9].note == "Emit(Killing), Stop"


def test_a_pod_that_cannot_start_with_restart_never_fails_with_the_reason_and_message():
    m = PodMachine(pod(restart="Never"))
    m.handle(Sync(m.pod, 100))
    m.handle(Started("app", "id-a", 101))
    actions = m.handle(StartFailed("side", "StartError", "exec: no such file", 102))
    assert actions[0] == Emit("Warning", "Failed", "Error: exec: no such file")
    assert m.phase == "Scheduled"  # not every container runs (DESIGN §2), and app still runs: not done
    report = m.handle(Exited("app", 0, False, 103))[-1].status
    assert (report["phase"], report["reason"], report["message"]) == (
        "Failed", "StartError", "container side failed: exec: no such file")
    assert report["containerStatuses"][1]["state"] == {"terminated": {
        "exitCode": 128, "reason": "StartError", "finishedAt": t(102), "message": "exec: no such file"}}
    assert "hostIP" not in report and report["startTime"] == t(100)


def test_an_oom_kill_is_named_and_restarts_under_on_failure_but_success_does_not():
    m = PodMachine(pod(restart="OnFailure"))
    m.handle(Sync(m.pod, 0))
    m.handle(Started("app", "a", 1))
    m.handle(Started("side", "s", 1))
    report = m.handle(Exited("app", 137, True, 5))[-1].status
    assert report["containerStatuses"][0]["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert report["containerStatuses"][0]["restartCount"] == 1
    report = m.handle(Exited("side", 0, False, 6))[-1].status
    assert report["containerStatuses"][1]["state"] == {"terminated": {
        "exitCode": 0, "reason": "Completed", "finishedAt": t(6)}}
    assert report["phase"] == "Running"  # app is backing off, so the pod is not settled


def test_an_oom_kill_without_restarts_fails_the_pod_saying_why():
    m = PodMachine(pod(restart="Never"))
    m.handle(Sync(m.pod, 0))
    m.handle(Exited("side", 0, False, 2))
    report = m.handle(Exited("app", 137, True, 3))[-1].status
    assert (report["phase"], report["reason"], report["message"]) == (
        "Failed", "OOMKilled", "container app failed: the container used more memory than its limit")


def test_a_pod_taken_away_stops_at_once_and_is_forgotten_without_a_report():
    m = PodMachine(pod())
    m.handle(Sync(m.pod, 0))
    m.handle(Started("app", "a", 1))
    assert m.handle(Removed(2)) == [Emit("Normal", "Killing", "Stopping container app, side"), Stop(0.0)]
    assert m.handle(Removed(3)) == []
    assert m.handle(Stopped(4)) == [Forget()]
    assert m.phase == "Scheduled" and m.forgotten
    idle = PodMachine(pod())  # nothing started yet: nothing to announce
    assert idle.handle(Removed(0)) == [Stop(0.0)]


def test_the_grace_period_comes_from_the_deletion_then_the_spec_then_30_seconds():
    assert PodMachine(pod()).grace_seconds == 30.0
    spec = pod()
    spec["spec"]["terminationGracePeriodSeconds"] = 12
    assert PodMachine(spec).grace_seconds == 12.0
    spec["metadata"]["deletionGracePeriodSeconds"] = 0
    assert PodMachine(spec).grace_seconds == 0.0
    bare = PodMachine({"metadata": {"name": "x"}})
    assert (bare.key, bare.uid, bare.restart_policy, bare.containers) == ("default/x", "", "Always", {})


def test_deleting_a_pod_before_it_ever_started_stops_without_starting_anything():
    m = PodMachine(pod(deletionTimestamp=t(1)))
    assert m.handle(Sync(m.pod, 1)) == [Stop(30.0)]
    assert m.handle(Sync(m.pod, 2)) == []  # never started after deletion
    assert m.start_time is None


def test_back_off_doubles_from_the_initial_delay_to_the_maximum():
    policy = BackoffPolicy(initial=10.0, maximum=300.0)
    assert [policy.delay(n) for n in range(0, 8)] == [10.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0]
    assert BackoffPolicy().delay(1) == 10.0 and BackoffPolicy().delay(10) == 300.0
