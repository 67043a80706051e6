"""Hollow nodes: thousands of simulated nodes in one process, for scale tests and benchmarks.

Each hollow node registers a Node, renews its Lease and its Ready heartbeat, and runs the pods
bound to it through the agent's own :class:`~corral.agent.machine.PodMachine` with a fake runtime:
a container "starts" ``run_delay`` seconds after it is asked to, and stops at once. So pods go
Scheduled → Running, and deleted pods Terminating → Terminated, exactly as with real agents. A pod
annotated ``sim.corral.dev/run-seconds: "N"`` has its containers exit that long after they started
(with ``sim.corral.dev/exit-code``, default 0): Jobs' pods finish, and their Jobs complete or fail.

Each hollow node joins as an agent does and writes under its own identity (``system:node:NAME``,
in ``system:nodes``): its Node, its Lease and the status of its pods pass the node authoriser and
NodeRestriction like a real agent's. The join token is the one given, or one made for the purpose
with the credential the simulator was given (and revoked once every node has joined).

Cheap at 5,000 nodes: one watch of all pods (not one per node; made with the simulator's own
credential, which must be allowed to watch pods), one heartbeat loop that renews every node's
lease in bounded-concurrency batches spread over the interval (longer as the server lengthens the
leases of a large cluster), one status writer, and timers on
the event loop instead of a task per container. Each node keeps one connection of its own.

A node back after its renewals failed (the server unreachable), or found registered already (the
simulator restarted), posts its Ready heartbeat at once, as an agent does: the node controller will
have marked it Unknown, and the next status round may be minutes away at 50,000 nodes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

from corral import GIT_VERSION
from corral.agent import machine as m
from corral.agent.reporting import StatusReporter, renew_lease
from corral.api.defaults import now_rfc3339
from corral.client.rest import AlreadyExists, ApiError, Client, ConnectionFailed, Gone, NotFound

__all__ = ["HollowNodes", "HollowConfig"]

log = logging.getLogger(__name__)
RUN_SECONDS, EXIT_CODE = "sim.corral.dev/run-seconds", "sim.corral.dev/exit-code"  # finishing containers
LEASE_SECONDS = 40  # the lease duration hollow nodes ask for (an agent's default)
JOIN_TOKEN_TTL = dt.timedelta(hours=1)  # revoked once the nodes have joined; expires anyway if sim dies first
# A hollow node's status.nodeInfo: every field clients' schemas require, none describing a machine.
HOLLOW_INFO = {"kernelVersion": "", "osImage": "corral hollow node", "containerRuntimeVersion": "hollow://1",
               "kubeletVersion": GIT_VERSION, "kubeProxyVersion": "", "operatingSystem": "linux",
               "architecture": "amd64", "bootID": ""}


@dataclass(slots=True)
class HollowConfig:
    count: int
    prefix: str = "hollow"
    capacity: dict[str, str] = field(default_factory=lambda: {"cpu": "4", "memory": "32Gi", "pods": "110"})
    zones: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    run_delay: float = 1.0
    lease_interval: float = 10.0
    status_interval: float = 30.0  # Ready heartbeat on the Node (scheduling wants it fresher than 90 s)
    concurrency: int = 64
    node_identities: bool = True  # each node joins and writes as system:node:NAME
    join_token: str = ""  # default: one made (and revoked) with the simulator's credential


class HollowNodes:
    def __init__(self, client: Client, config: HollowConfig) -> None:
        self.client = client
        self.config = config
        self.names = [f"{config.prefix}-{i}" for i in range(config.count)]
        self._mine = set(self.names)
        self.machines: dict[str, m.PodMachine] = {}  # by pod uid
        self.reporter = StatusReporter(client, concurrency=config.concurrency)
        self._identities: dict[str, Client] = {}  # node name → a client presenting its certificate
        self._tasks: list[asyncio.Task] = []
        self._sem = asyncio.Semaphore(config.concurrency)
        self.started_pods = 0
        self.lease_seconds = 0  # the longest lease duration the server wrote in the last round
        self._seen_lease_seconds = 0  # ... in this round so far
        self._cut_off: set[str] = set()  # nodes whose last lease renewal failed

    # --- lifecycle -------------------------------------------------------------------------------------

    def _node(self, i: int, name: str) -> dict[str, Any]:
        labels = {"kubernetes.io/hostname": name, "corral.dev/hollow": "true", **self.config.labels}
        if self.config.zones:
            labels["topology.kubernetes.io/zone"] = self.config.zones[i % len(self.config.zones)]
        now = now_rfc3339()
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                "spec": {"taints": list(self.config.taints)} if self.config.taints else {},
                "status": {"capacity": dict(self.config.capacity), "allocatable": dict(self.config.capacity),
                           "conditions": [self._ready(now)],
                           "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                           "nodeInfo": {**HOLLOW_INFO, "machineID": name, "systemUUID": name}}}

    @staticmethod
    def _ready(now: str) -> dict[str, Any]:
        return {"type": "Ready", "status": "True", "reason": "HollowNodeReady", "lastHeartbeatTime": now,
                "lastTransitionTime": now}

    async def _limited(self, request: Callable[..., Awaitable[None]], *args: Any) -> None:
        """``request(*args)`` once the semaphore lets it: its coroutine is made only then, so one
        cancelled while it waits (the simulator stopping) leaves none behind never awaited."""
        async with self._sem:
            try:
                await request(*args)
            except (ApiError, ConnectionFailed) as exc:
                log.debug("hollow node request failed: %s", exc)

    def client_of(self, node: str) -> Client:
        """The client ``node`` writes with: its own identity, or the shared one."""
        return self._identities.get(node, self.client)

    async def _join(self) -> None:
        """A certificate for every node, signed through the join endpoint as an agent's is."""
        from corral.agent.credentials import JoinError, request_node_certificate
        from corral.pki.kubeconfig import Credentials
        from corral.pki.tokens import JOIN, new_token, token_object

        token, made = self.config.join_token, None
        if not token:
            made = new_token()
            try:
                await self.client.create(token_object(made, user="system:bootstrap", purpose=JOIN, ttl=JOIN_TOKEN_TTL,
                                                      description="corral sim: hollow nodes joining"), raw=True)
            except ApiError as exc:
                raise JoinError(f"cannot make a join token with this credential: {exc.message}; give --join-token "
                                "(`corral token create --join` prints one)") from None
            token = str(made)
        ca = await self.client.cluster_ca()
        servers = ",".join(self.client.urls)
        try:
            async with Client(credentials=Credentials(servers, ca, token=token), user_agent="corral-sim") as joiner:
                async def join(name: str) -> None:
                    async with self._sem:
                        cert, key, ca_pem = await request_node_certificate(joiner, name)
                    self._identities[name] = Client(credentials=Credentials(servers, ca_pem, cert_pem=cert, key_pem=key),
                                                    user_agent="corral-sim", connections=1)
                await asyncio.gather(*(join(n) for n in self.names))
        finally:
            if made is not None:
                try:
                    await self.client.delete("tokens", made.id)
                except NotFound:
                    pass

    async def start(self) -> None:
        """Join every node (with node identities), register it and its lease, then follow pods and
        keep heartbeating."""
        if self.config.node_identities:
            await self._join()

        async def register(i: int, name: str) -> None:
            try:
                await self.client_of(name).create(self._node(i, name))
            except AlreadyExists:
                # Registered before (the simulator restarted): Ready now, as an agent re-registering
                # is, not at the first heartbeat; the node controller may have marked it Unknown.
                await self._heartbeat_node(name)
        await asyncio.gather(*(self._limited(register, i, n) for i, n in enumerate(self.names)))
        await asyncio.gather(*(self._limited(self._renew, n) for n in self.names))
        self.lease_seconds, self._seen_lease_seconds = self._seen_lease_seconds, 0
        listing = await self.client.list("pods", None, raw=True)
        for pod in listing.items:
            self._on_pod("ADDED", pod)
        self._tasks = [
            asyncio.create_task(self._watch(listing.resource_version), name="hollow-watch"),
            asyncio.create_task(self._heartbeat_loop(), name="hollow-heartbeats"),
        ]
        self.reporter.start()

    async def stop(self) -> None:
        from corral.aio import cancel_and_wait

        await cancel_and_wait(*self._tasks)
        await self.reporter.stop()
        for client in self._identities.values():
            await client.close()

    # --- heartbeats --------------------------------------------------------------------------------------

    async def _heartbeat_node(self, name: str) -> None:
        await self.client_of(name).patch("nodes", name, {"status": {"conditions": [self._ready(now_rfc3339())]}},
                                         subresource="status", raw=True)

    async def _renew(self, name: str) -> None:
        """Renew ``name``'s lease; a node back from failed renewals (the server unreachable, a
        network cut) also posts its Ready heartbeat at once, rather than at the next status round:
        the node controller will have marked it Unknown meanwhile."""
        try:
            seconds = await renew_lease(self.client_of(name), name, duration_seconds=LEASE_SECONDS)
        except (ApiError, ConnectionFailed):
            self._cut_off.add(name)
            raise
        self._seen_lease_seconds = max(self._seen_lease_seconds, seconds)
        if name in self._cut_off:
            await self._heartbeat_node(name)
            self._cut_off.discard(name)  # only now: a failed heartbeat is tried again at the next renewal

    def intervals(self) -> tuple[float, float]:
        """Seconds between lease renewals and between Ready heartbeats: as configured, longer by as
        much as the server lengthened the leases (as agents do) when the cluster is past its
        heartbeat rate."""
        factor = max(1.0, self.lease_seconds / LEASE_SECONDS)
        return self.config.lease_interval * factor, self.config.status_interval * factor

    async def _heartbeat_loop(self) -> None:
        """Renew every lease each lease interval (and every Ready heartbeat each status interval),
        in slices spread over the interval so the server sees a steady rate, not bursts."""
        slices = 10
        last_status = time.monotonic()
        while True:
            round_start = time.monotonic()
            lease_interval, status_interval = self.intervals()
            status_due = round_start - last_status >= status_interval
            for k in range(slices):
                batch = self.names[k::slices]
                work = [self._limited(self._renew, n) for n in batch]
                if status_due:
                    work += [self._limited(self._heartbeat_node, n) for n in batch]
                await asyncio.gather(*work)
                target = round_start + (k + 1) * lease_interval / slices
                await asyncio.sleep(max(0.0, target - time.monotonic()))
            if status_due:
                last_status = round_start
            if self._seen_lease_seconds:  # none if every renewal failed: keep the last round's
                self.lease_seconds, self._seen_lease_seconds = self._seen_lease_seconds, 0

    # --- pods --------------------------------------------------------------------------------------------

    async def _watch(self, rv: str) -> None:
        while True:
            try:
                async for ev in self.client.watch("pods", None, resource_version=rv, raw=True):
                    rv = ev.resource_version or rv
                    if ev.type != "BOOKMARK":
                        self._on_pod(ev.type, ev.object)
            except Gone:
                listing = await self.client.list("pods", None, raw=True)
                rv = listing.resource_version
                for pod in listing.items:
                    self._on_pod("MODIFIED", pod)
            except (ConnectionFailed, ApiError, OSError) as exc:
                log.warning("hollow nodes lost their pod watch: %s; retrying", exc)
                await asyncio.sleep(1.0)

    def _on_pod(self, etype: str, pod: dict[str, Any]) -> None:
        uid = (pod.get("metadata") or {}).get("uid", "")
        node = (pod.get("spec") or {}).get("nodeName")
        machine = self.machines.get(uid)
        now = time.time()
        if etype == "DELETED" or node not in self._mine:
            if machine is not None:
                self._feed(machine, m.Removed(now))
            return
        if machine is None:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Terminated", "Running"):
                return  # not ours to (re)start: finished, or running before this process began
            machine = self.machines[uid] = m.PodMachine(pod, host_ip="127.0.0.1", probes=False)
        self._feed(machine, m.Sync(pod, now))

    def _feed(self, machine: m.PodMachine, event: Any) -> None:
        loop = asyncio.get_running_loop()
        for action in machine.handle(event):
            if isinstance(action, m.Start):
                name = action.container.get("name", "")
                loop.call_later(self.config.run_delay, self._started, machine, name)
            elif isinstance(action, m.Stop):
                loop.call_soon(self._feed, machine, m.Stopped(time.time()))
            elif isinstance(action, m.Report):
                meta = machine.pod.get("metadata") or {}
                node = (machine.pod.get("spec") or {}).get("nodeName") or ""
                self.reporter.report(machine.uid, meta.get("namespace", "default"), meta.get("name", ""), action.status,
                                     client=self.client_of(node))
            elif isinstance(action, m.Forget):
                self.machines.pop(machine.uid, None)
            # Emit: hollow nodes record no events.

    def _started(self, machine: m.PodMachine, container: str) -> None:
        if machine.forgotten or machine.stopping:
            return
        self.started_pods += 1
        self._feed(machine, m.Started(container, f"hollow://{machine.uid}/{container}", time.time()))
        annotations = (machine.pod.get("metadata") or {}).get("annotations") or {}
        run = annotations.get(RUN_SECONDS)
        if run is not None:
            try:
                seconds, code = float(run), int(annotations.get(EXIT_CODE, "0"))
            except ValueError:
                return
            asyncio.get_running_loop().call_later(seconds, self._exited, machine, container, code)

    def _exited(self, machine: m.PodMachine, container: str, code: int) -> None:
        if not machine.forgotten and not machine.stopping:
            self._feed(machine, m.Exited(container, code, False, time.time()))
