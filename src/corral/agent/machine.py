"""The pod state machine of an agent: events in, actions out, no I/O.

One :class:`PodMachine` per pod bound to the node. The asyncio shell (``agent.agent``) feeds it what
happened — the pod's API object changed, a container started, failed to start or exited, the pod's
containers stopped, time passed — and carries out the actions it returns: start or stop containers,
report the pod's status, record events. The simulator's hollow nodes run the very same machine with
a fake runtime.

Phases (DESIGN §2): Scheduled → Running when every container runs; Running → Succeeded when all
exited 0 and the restart policy lets them stay down; → Failed when a container could not start or
keep running and will not be restarted; Terminating (deletion requested) → Terminated when every
container has stopped, after which the server deletes the record. Restarts follow the pod's
restartPolicy with Kubernetes' back-off (10 s doubling to 5 min; configurable).

Every transition is appended to :attr:`PodMachine.history`, for ``corral describe`` and debugging.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

from corral.agent.runtimes.base import CONFIG_ERROR
from corral.api.defaults import rfc3339

__all__ = [
    "PodMachine", "Sync", "Started", "StartFailed", "Exited", "Stopped", "Tick", "Removed", "Probed",
    "Start", "Stop", "Report", "Emit", "Forget", "Transition", "BackoffPolicy",
]


# --- events -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sync:
    """The pod's API object, as the informer last saw it."""

    pod: dict[str, Any]
    now: float


@dataclass(frozen=True, slots=True)
class Started:
    container: str
    container_id: str
    now: float
    image_id: str = ""  # the runtime's id of the image it ran ("" for the process runtime: no image)


@dataclass(frozen=True, slots=True)
class StartFailed:
    container: str
    reason: str  # ErrImagePull, StartError, ...
    message: str
    now: float


@dataclass(frozen=True, slots=True)
class Exited:
    container: str
    exit_code: int
    oom_killed: bool
    now: float


@dataclass(frozen=True, slots=True)
class Stopped:
    """Every container of the pod is stopped (after a Stop action)."""

    now: float


@dataclass(frozen=True, slots=True)
class Tick:
    now: float


@dataclass(frozen=True, slots=True)
class Removed:
    """The pod is gone from the API, or bound to another node: stop and forget it."""

    now: float


@dataclass(frozen=True, slots=True)
class Probed:
    """A probe of a running container crossed its threshold: passing (``ok``) or failing."""

    container: str
    container_id: str  # the run it probed (a result about an earlier run is dropped)
    kind: str  # liveness | readiness | startup
    ok: bool
    message: str
    now: float


Event = Union[Sync, Started, StartFailed, Exited, Stopped, Tick, Removed, Probed]


# --- actions ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Start:
    container: dict[str, Any]  # the container spec


@dataclass(frozen=True, slots=True)
class Stop:
    grace_seconds: float
    # None: every container of the pod (then Stopped follows); a name: that container only, killed
    # for failing its liveness or startup probe (then its Exited follows, and the restart policy).
    container: str | None = None


@dataclass(frozen=True, slots=True)
class Report:
    status: dict[str, Any]  # the pod's whole status, to write through the status subresource


@dataclass(frozen=True, slots=True)
class Emit:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Forget:
    """The machine is finished; the shell drops it."""


Action = Union[Start, Stop, Report, Emit, Forget]


@dataclass(frozen=True, slots=True)
class Transition:
    at: float
    event: str
    phase_before: str
    phase_after: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class BackoffPolicy:
    initial: float = 10.0
    maximum: float = 300.0

    def delay(self, restarts: int) -> float:
        return min(self.initial * (2 ** max(restarts - 1, 0)), self.maximum)


@dataclass(slots=True)
class _Container:
    spec: dict[str, Any]
    state: str = "waiting"  # waiting | running | terminated
    reason: str = "ContainerCreating"
    message: str = ""
    exit_code: int | None = None
    started_at: float | None = None
    finished_at: float | None = None
    restart_count: int = 0
    container_id: str = ""
    image_id: str = ""
    restart_at: float | None = None  # when a backed-off restart is due
    starting: bool = False
    # Of the current run, set when it starts; read only while the container runs (state "running").
    ready: bool = False  # started, and its readiness probe (if any) passing
    started_ok: bool = False  # its startup probe (if any) has passed
    last: dict[str, Any] | None = None  # lastState, as reported

    @property
    def name(self) -> str:
        return self.spec.get("name", "")


@dataclass(slots=True)
class PodMachine:
    pod: dict[str, Any]
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    host_ip: str = ""
    phase: str = "Scheduled"
    reason: str = ""
    message: str = ""
    start_time: float | None = None
    containers: dict[str, _Container] = field(default_factory=dict)
    # spec.initContainers: run one at a time, in order, each to success, before the containers start.
    init: dict[str, _Container] = field(default_factory=dict)
    history: list[Transition] = field(default_factory=list)
    probes: bool = True  # False (hollow nodes): probes are not run, so they count as passing
    stopping: bool = False
    deleting: bool = False
    forgotten: bool = False
    stop_grace: float | None = None  # the time its stop gives the containers: a shorter one stops them again

    def __post_init__(self) -> None:
        # What an agent reported before it restarted (the server's copy of the pod carries it): its
        # restart counts and last states go on, rather than starting again from zero.
        status = self.pod.get("status") or {}
        reported = {cs.get("name"): cs for cs in (*(status.get("initContainerStatuses") or ()),
                                                  *(status.get("containerStatuses") or ())) if isinstance(cs, dict)}
        spec = self.pod.get("spec") or {}
        for c in spec.get("initContainers") or ():
            self.init[c.get("name", "")] = _Container(c, reason="PodInitializing")
        for c in spec.get("containers") or ():
            self.containers[c.get("name", "")] = _Container(c, reason="PodInitializing" if self.init else
                                                           "ContainerCreating")
        for container in (*self.init.values(), *self.containers.values()):
            before = reported.get(container.name)
            if before is not None:
                count = before.get("restartCount")
                container.restart_count = count if isinstance(count, int) and count > 0 else 0
                last = before.get("lastState")
                container.last = last if isinstance(last, dict) and last else None

    # --- properties ---------------------------------------------------------------------------------

    @property
    def key(self) -> str:
        meta = self.pod.get("metadata") or {}
        return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"

    @property
    def uid(self) -> str:
        return (self.pod.get("metadata") or {}).get("uid", "")

    @property
    def restart_policy(self) -> str:
        return (self.pod.get("spec") or {}).get("restartPolicy", "Always")

    @property
    def grace_seconds(self) -> float:
        meta, spec = self.pod.get("metadata") or {}, self.pod.get("spec") or {}
        value = meta.get("deletionGracePeriodSeconds")
        return float(value if value is not None else spec.get("terminationGracePeriodSeconds", 30))

    @property
    def initialized(self) -> bool:
        """Every init container has run to success (true at once without any)."""
        return all(c.state == "terminated" and c.exit_code == 0 for c in self.init.values())

    def _all(self) -> list[_Container]:
        return [*self.init.values(), *self.containers.values()]

    def _container(self, name: str) -> _Container | None:
        return self.init.get(name) or self.containers.get(name)

    def _next_init(self) -> _Container | None:
        return next((c for c in self.init.values() if not (c.state == "terminated" and c.exit_code == 0)), None)

    def next_deadline(self) -> float | None:
        """When the machine next wants a Tick (a back-off running out), or None."""
        due = [c.restart_at for c in self._all() if c.restart_at is not None]
        return min(due) if due else None

    # --- the transition function ---------------------------------------------------------------------

    def handle(self, event: Event) -> list[Action]:
        before = self.phase
        actions: list[Action] = []
        if isinstance(event, Sync):
            actions = self._sync(event)
        elif isinstance(event, Started):
            actions = self._started(event)
        elif isinstance(event, StartFailed):
            actions = self._start_failed(event)
        elif isinstance(event, Exited):
            actions = self._exited(event)
        elif isinstance(event, Stopped):
            actions = self._stopped(event)
        elif isinstance(event, Tick):
            actions = self._tick(event)
        elif isinstance(event, Removed):
            actions = self._removed()
        elif isinstance(event, Probed):
            actions = self._probed(event)
        note = ", ".join(type(a).__name__ + (f"({a.reason})" if isinstance(a, Emit) else "") for a in actions)
        self.history.append(Transition(event.now, type(event).__name__, before, self.phase, note))
        return actions

    def _sync(self, event: Sync) -> list[Action]:
        self.pod = event.pod
        meta = event.pod.get("metadata") or {}
        if meta.get("deletionTimestamp") and not self.deleting:
            self.deleting = True
            return self._begin_stop(terminating=True)
        if self.deleting and not self.forgotten and self.stop_grace is not None \
                and self.grace_seconds < self.stop_grace:
            self.stop_grace = self.grace_seconds  # deleted again with less time: the kill comes sooner
            return [Stop(self.stop_grace)]
        if self.start_time is None and not self.deleting:
            self.start_time = event.now
            return self._start_next() + [self._report(event.now)]
        return []

    def _start_next(self) -> list[Action]:
        """The next init container, or once they have all succeeded, every container."""
        first = self._next_init()
        if first is not None:
            return self._start(first)
        actions: list[Action] = []
        for c in self.containers.values():
            c.reason = "ContainerCreating"  # each is waiting here (PodInitializing while init containers ran)
            actions += self._start(c)
        return actions

    def _start(self, c: _Container) -> list[Action]:
        c.starting = True
        c.restart_at = None
        return [Start(c.spec)]

    def _started(self, event: Started) -> list[Action]:
        c = self._container(event.container)
        if c is None or self.stopping:
            return []
        c.starting = False
        c.state, c.reason, c.message = "running", "", ""
        c.container_id, c.image_id, c.started_at, c.exit_code = event.container_id, event.image_id, event.now, None
        c.started_ok = not (self.probes and c.spec.get("startupProbe"))
        c.ready = c.started_ok and not (self.probes and c.spec.get("readinessProbe"))
        actions: list[Action] = [Emit("Normal", "Started", f"Started container {c.name}")]
        if c.name not in self.init and all(x.state == "running" for x in self.containers.values()):
            self.phase, self.reason, self.message = "Running", "", ""
        return actions + [self._report(event.now)]

    def _start_failed(self, event: StartFailed) -> list[Action]:
        c = self._container(event.container)
        if c is None or self.stopping:
            return []
        c.starting = False
        emit = Emit("Warning", "Failed", f"Error: {event.message}")
        if event.reason == CONFIG_ERROR:
            # Never started, so not a restart, whatever the policy: it waits for its ConfigMap or
            # Secret and is tried again, as kubelet does.
            c.restart_at = event.now + self.backoff.delay(1)
            c.state, c.reason, c.message = "waiting", event.reason, event.message
            return [emit, self._report(event.now)]
        if self._restarts(failed=True):
            c.restart_count += 1
            c.restart_at = event.now + self.backoff.delay(c.restart_count)
            back = "ImagePullBackOff" if event.reason == "ErrImagePull" else "CrashLoopBackOff"
            c.state, c.reason, c.message = "waiting", back, event.message
            c.last = {"terminated": {"exitCode": 128, "reason": event.reason, "message": event.message,
                                     "finishedAt": rfc3339(event.now)}}
            return [emit, Emit("Warning", "BackOff", f"Back-off restarting failed container {c.name}"),
                    self._report(event.now)]
        c.state, c.reason, c.message, c.exit_code = "terminated", event.reason, event.message, 128
        c.finished_at = event.now
        self._settle(init_failed=c if c.name in self.init else None)
        return [emit, self._report(event.now)]

    def _exited(self, event: Exited) -> list[Action]:
        c = self._container(event.container)
        if c is None or self.stopping:
            return []
        reason = "OOMKilled" if event.oom_killed else ("Completed" if event.exit_code == 0 else "Error")
        c.state, c.reason, c.exit_code, c.finished_at = "terminated", reason, event.exit_code, event.now
        c.message = "the container used more memory than its limit" if event.oom_killed else ""
        if c.name in self.init:
            if event.exit_code == 0:  # this one is done: the next, or the containers
                return self._start_next() + [self._report(event.now)]
            if self.restart_policy == "Never":  # as Kubernetes: a failed init container fails the pod
                self._settle(init_failed=c)
                return [self._report(event.now)]
        if self._restarts(failed=event.exit_code != 0):  # (a succeeded init container returned above)
            c.last = {"terminated": {"exitCode": event.exit_code, "reason": reason,
                                     "startedAt": rfc3339(c.started_at or event.now),
                                     "finishedAt": rfc3339(event.now)}}
            c.restart_count += 1
            c.restart_at = event.now + self.backoff.delay(c.restart_count)
            c.state, c.reason = "waiting", "CrashLoopBackOff"
            c.message = f"back-off {self.backoff.delay(c.restart_count):g}s restarting failed container"
            # The phase stays as it is: Kubernetes keeps a crash-looping pod Running.
            return [Emit("Warning", "BackOff", f"Back-off restarting failed container {c.name}"),
                    self._report(event.now)]
        self._settle()
        return [self._report(event.now)]

    def started(self, name: str) -> bool:
        """Whether container ``name`` runs and has passed its startup probe (liveness and readiness
        probes begin then)."""
        c = self._container(name)
        return c is not None and c.state == "running" and c.started_ok

    def _probed(self, event: Probed) -> list[Action]:
        c = self._container(event.container)
        if c is None or self.stopping or c.state != "running" or c.container_id != event.container_id:
            return []  # about a run that is over: nothing to do
        if event.kind == "readiness":  # every failure is said (the recorder counts repeats); a change reported
            warn = [] if event.ok else [Emit("Warning", "Unhealthy", f"Readiness probe failed: {event.message}")]
            if c.ready == (event.ok and c.started_ok):
                return warn
            c.ready = event.ok and c.started_ok
            return warn + [self._report(event.now)]
        if event.kind == "startup" and event.ok:
            c.started_ok = True
            c.ready = not c.spec.get("readinessProbe")
            return [self._report(event.now)]
        if event.ok:
            return []
        # A failing liveness (or startup) probe: the container is killed, and restarted (or not)
        # as its pod's restartPolicy says, with the usual back-off.
        what = event.kind.title()
        probe = c.spec.get(f"{event.kind}Probe") or {}
        grace = probe.get("terminationGracePeriodSeconds")
        c.ready = False
        return [Emit("Warning", "Unhealthy", f"{what} probe failed: {event.message}"),
                Emit("Normal", "Killing", f"Container {c.name} failed {event.kind} probe, will be restarted"),
                Stop(float(grace) if grace is not None else self.grace_seconds, c.name), self._report(event.now)]

    def _restarts(self, *, failed: bool) -> bool:
        policy = self.restart_policy
        return policy == "Always" or (policy == "OnFailure" and failed)

    def _settle(self, init_failed: _Container | None = None) -> None:
        """Every container is done for good: Succeeded or Failed (or an init container failed for good)."""
        if init_failed is not None:
            c = init_failed
            self.phase, self.reason = "Failed", c.reason
            self.message = f"init container {c.name} failed: {c.message or f'exit code {c.exit_code}'}"
            return
        if any(c.state != "terminated" or c.restart_at is not None for c in self.containers.values()):
            return
        failed = [c for c in self.containers.values() if c.exit_code != 0]
        if failed:
            c = failed[0]
            self.phase = "Failed"
            self.reason = c.reason
            detail = c.message or f"exit code {c.exit_code}"
            self.message = f"container {c.name} failed: {detail}"
        else:
            self.phase, self.reason, self.message = "Succeeded", "", ""

    def _tick(self, event: Tick) -> list[Action]:
        if self.stopping:
            return []
        actions: list[Action] = []
        for c in self._all():
            if c.restart_at is not None and c.restart_at <= event.now and not c.starting:
                actions += self._start(c)
        return actions

    def _begin_stop(self, *, terminating: bool) -> list[Action]:
        self.stopping = True
        for c in self._all():
            c.restart_at = None
        if terminating:
            self.phase = "Terminating"
        running = [c for c in self._all() if c.state == "running" or c.starting]
        grace = self.stop_grace = self.grace_seconds if terminating else 0.0
        actions: list[Action] = []
        if running:
            shown = self.containers.values() if any(c.name in self.containers for c in running) else running
            names = ", ".join(c.name for c in shown)
            actions.append(Emit("Normal", "Killing", f"Stopping container {names}"))
        return actions + [Stop(grace)]

    def _stopped(self, event: Stopped) -> list[Action]:
        if self.forgotten:
            return []  # a second stop's, given less time, after the first's: already reported
        for c in self._all():
            if c.state != "terminated":
                # A running container was killed (137). A waiting one (never started, or backing off
                # after a crash, whose details stay in lastState) never runs again: kubelet reports it
                # ContainerStatusUnknown, 137, not a success it never had.
                killed = c.state == "running"
                c.state, c.finished_at, c.exit_code = "terminated", event.now, 137
                c.reason, c.message = ("Killed", "") if killed else (
                    "ContainerStatusUnknown", "The container could not be located when the pod was terminated")
        if not self.deleting:
            self.forgotten = True
            return [Forget()]
        self.phase = "Terminated"
        self.forgotten = True
        return [self._report(event.now), Forget()]

    def _removed(self) -> list[Action]:
        if self.stopping:
            return []
        self.deleting = False
        return self._begin_stop(terminating=False)

    # --- status ---------------------------------------------------------------------------------------

    def _report(self, now: float) -> Report:
        statuses = [self._container_status(c, now) for c in self.containers.values()]
        init_statuses = [self._container_status(c, now) for c in self.init.values()]
        ready = "True" if self.phase == "Running" and all(c.state == "running" and c.ready
                                                          for c in self.containers.values()) else "False"
        ts = rfc3339(now)
        scheduled = next((c for c in ((self.pod.get("status") or {}).get("conditions") or ())
                          if c.get("type") == "PodScheduled"), {"type": "PodScheduled", "status": "True",
                                                                 "lastTransitionTime": ts})
        initialized = {"type": "Initialized", "status": "True", "lastTransitionTime": ts}
        if not self.initialized:
            initialized.update(status="False", reason="ContainersNotInitialized",
                               message="containers with incomplete status: [" + " ".join(
                                   c.name for c in self.init.values()
                                   if not (c.state == "terminated" and c.exit_code == 0)) + "]")
        status: dict[str, Any] = {
            "phase": self.phase,
            "conditions": [
                scheduled,
                initialized,
                {"type": "ContainersReady", "status": ready, "lastTransitionTime": ts},
                {"type": "Ready", "status": ready, "lastTransitionTime": ts},
            ],
            "containerStatuses": statuses,
            "qosClass": (self.pod.get("status") or {}).get("qosClass", "BestEffort"),
        }
        if init_statuses:
            status["initContainerStatuses"] = init_statuses
        return self._report_rest(status)

    def _report_rest(self, status: dict[str, Any]) -> Report:
        if self.host_ip:
            status["hostIP"] = status["podIP"] = self.host_ip
            status["podIPs"] = [{"ip": self.host_ip}]
        if self.start_time is not None:
            status["startTime"] = rfc3339(self.start_time)
        if self.reason:
            status["reason"] = self.reason
        if self.message:
            status["message"] = self.message
        return Report(status)

    @staticmethod
    def _container_status(c: _Container, now: float) -> dict[str, Any]:
        if c.state == "running":
            state = {"running": {"startedAt": rfc3339(c.started_at or now)}}
        elif c.state == "terminated":
            state = {"terminated": {"exitCode": c.exit_code, "reason": c.reason,
                                    "finishedAt": rfc3339(c.finished_at or now)}}
            if c.message:
                state["terminated"]["message"] = c.message
        else:
            state = {"waiting": {"reason": c.reason, **({"message": c.message} if c.message else {})}}
        # imageID, like name, image, ready and restartCount, is required by clients' schemas (the
        # official Python client refuses a pod without it): "" until a runtime names one.
        status = {"name": c.name, "image": c.spec.get("image", ""), "imageID": c.image_id,
                  "ready": c.state == "running" and c.ready, "started": c.state == "running" and c.started_ok,
                  "restartCount": c.restart_count, "state": state}
        if c.container_id:
            status["containerID"] = c.container_id
        if c.last:
            status["lastState"] = c.last
        return status
