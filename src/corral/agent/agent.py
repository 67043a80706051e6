"""The agent's asyncio shell around the pod state machine.

It registers the Node, renews its Lease and heartbeat every 10 s (less often in a cluster past
10,000 nodes, as the server lengthens the lease; a failed one is tried again within seconds), measures network throughput against the server
at start and every 10 minutes, watches the pods bound to it (field selector ``spec.nodeName``),
feeds every change and every runtime outcome to each pod's :class:`~corral.agent.machine.PodMachine`,
and carries out the actions the machine returns:
starting and stopping containers through the runtime, writing the pod's status, recording events.
It also serves container logs, exec and port-forward for ``kubectl logs|exec|cp|port-forward``
(through the server, which alone may call it).

After a restart it adopts the containers its runtime still runs for pods still bound here, and
stops the others (their pods were deleted or placed elsewhere while it was away).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from corral.aio import cancel_and_wait
from corral.agent import machine as m
from corral.agent.configuration import PodConfiguration
from corral.agent.probes import Prober
from corral.agent.node_info import default_address, node_object
from corral.agent.reporting import StatusReporter, renew_lease
from corral.agent.runtimes.base import ContainerRef, Runtime, StartError
from corral.agent.streams import StreamEndpoints
from corral.agent.usage import UsageSampler
from corral.api.defaults import now_rfc3339
from corral.client.informer import Informer
from corral.client.rest import AlreadyExists, ApiError, Client, ConnectionFailed, NotFound
from corral.pki import AGENT_CLIENT_USER
from corral.pki.ca import peer_subject
from corral.pki.kubeconfig import load_cert_pair
from corral.scheduler.cluster import EventRecorder, HttpWriter

__all__ = ["Agent", "AgentConfig"]

log = logging.getLogger(__name__)

# Log requests answered at once (each a stream the API server opened for a user, bounded there per
# user too); past it, 429 with Retry-After.
MAX_LOG_STREAMS = 64
# A heartbeat that failed is tried again after 0.2 s, then twice as long each time up to 7 s (never
# later than the next heartbeat would be), as kubelet's lease controller retries: a node is Ready
# again within seconds of the server's return, not a whole interval later.
RETRY_FIRST, RETRY_MOST = 0.2, 7.0


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok")


@web.middleware
async def _only_the_api_server(request: web.Request, handler) -> web.StreamResponse:
    """Another node, or a user with a certificate of the cluster CA, gets nothing here."""
    transport = request.transport
    cert = transport.get_extra_info("peercert") if transport is not None else None
    user, _ = peer_subject(cert)
    if user != AGENT_CLIENT_USER:
        return web.json_response({"message": f'"{user}" may not use the agent endpoint'}, status=403)
    return await handler(request)


@dataclass(slots=True)
class AgentConfig:
    name: str
    data_dir: str
    capacity: dict[str, str]
    reserved: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)
    address: str | None = None  # InternalIP the server reaches the agent's log endpoint on
    port: int = 10250  # 0: any free port
    listen_address: str | None = None  # where the endpoint listens (default: the address above, never all of them)
    heartbeat_seconds: float = 10.0
    lease_duration_seconds: int = 40
    throughput_interval_seconds: float = 600.0
    throughput_bytes: int = 8 * 1024 * 1024
    restart_backoff: m.BackoffPolicy = field(default_factory=m.BackoffPolicy)
    metrics_interval_seconds: float = 10.0  # how often usage is measured (kubectl top's resolution)
    config_sync_seconds: float = 10.0  # how often ConfigMap and Secret volumes are brought up to date


@dataclass(slots=True)
class _Pod:
    machine: m.PodMachine
    refs: dict[str, ContainerRef] = field(default_factory=dict)
    tasks: set[asyncio.Task] = field(default_factory=set)
    prepared: dict[str, dict[str, Any]] = field(default_factory=dict)  # containers as started: env resolved

    @property
    def namespace(self) -> str:
        return (self.machine.pod.get("metadata") or {}).get("namespace", "default")

    @property
    def name(self) -> str:
        return (self.machine.pod.get("metadata") or {}).get("name", "")

    @property
    def uid(self) -> str:
        return self.machine.uid


class Agent:
    def __init__(self, client: Client, runtime: Runtime, config: AgentConfig) -> None:
        self.client = client
        self.runtime = runtime
        self.config = config
        self.pods: dict[str, _Pod] = {}  # by pod uid
        self.events = EventRecorder(HttpWriter(client), component="corral-agent", host=config.name)
        self.informer = Informer(client, "pods", field_selector=f"spec.nodeName={config.name}", raw=True)
        self._tasks: list[asyncio.Task] = []
        self.reporter = StatusReporter(client)
        self._site: web.TCPSite | None = None
        self._runner: web.AppRunner | None = None
        self.streams = StreamEndpoints(self)  # exec and port-forward
        self.usage = UsageSampler(self, config.metrics_interval_seconds)
        self.log_streams = 0  # log requests being answered; at most max_log_streams
        self.max_log_streams = MAX_LOG_STREAMS
        self.port = config.port
        self.throughput: dict[str, str] = {}
        self.lease_seconds = config.lease_duration_seconds  # as the server last wrote it
        self._recovered: dict[tuple[str, str], Any] = {}  # (pod uid, container) → RecoveredContainer
        self.prober = Prober(runtime, self._feed, time.time)
        self.configuration = PodConfiguration(
            lambda resource, namespace, name: client.get(resource, name, namespace, raw=True),
            runtime.volumes_dir, node_allocatable=lambda: self._node()["status"]["allocatable"])

    # --- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        if not self.config.address:
            self.config.address = default_address(toward=urlsplit(self.client.base_url).hostname)
        if hasattr(self.runtime, "on_event"):
            loop = asyncio.get_running_loop()
            self.runtime.on_event = lambda pod, *event: loop.call_soon_threadsafe(self._runtime_event, pod, *event)
        await self._serve_logs()
        await self._register()
        for rc in await self.runtime.recover():
            self._recovered[(rc.ref.pod_uid, rc.ref.container)] = rc
        self.informer.on_add(self._on_pod)
        self.informer.on_update(lambda old, new: self._on_pod(new))
        self.informer.on_delete(self._on_pod_gone)
        self.informer.start()
        await self.informer.wait_synced()
        await self._drop_unclaimed()
        self.events.start()
        self.reporter.start()
        self._tasks = [
            asyncio.create_task(self._heartbeat_loop(), name="agent-heartbeat"),
            asyncio.create_task(self._tick_loop(), name="agent-ticks"),
            asyncio.create_task(self._throughput_loop(), name="agent-throughput"),
            asyncio.create_task(self.usage.run(), name="agent-usage"),
            asyncio.create_task(self._config_loop(), name="agent-configuration"),
        ]

    async def stop(self) -> None:
        """Stop the agent's loops; containers keep running (a restarted agent adopts them)."""
        await self.informer.stop()
        await cancel_and_wait(*self._tasks, *[t for p in self.pods.values() for t in p.tasks])
        await self.prober.close()
        await self.events.stop()
        await self.reporter.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.runtime.close()

    # --- the node --------------------------------------------------------------------------------------

    def _node(self) -> dict[str, Any]:
        return node_object(self.config.name, capacity=self.config.capacity, reserved=self.config.reserved,
                           labels=self.config.labels, taints=self.config.taints, address=self.config.address,
                           port=self.port, runtime_version=self.runtime.version)

    async def _register(self) -> None:
        node = self._node()
        node["status"]["images"] = await self.runtime.images()
        node["status"]["conditions"] = [self._ready_condition()]
        try:
            await self.client.create(node)
        except AlreadyExists:
            # Re-registration: labels, taints and capacity follow the flags; the rest is kept.
            live = await self.client.get("nodes", self.config.name, raw=True)
            live["metadata"]["labels"] = {**(live["metadata"].get("labels") or {}), **node["metadata"]["labels"]}
            # Taints: the flags' own, plus those the control plane set (node.kubernetes.io/...).
            system = [t for t in live["spec"].get("taints") or () if t["key"].startswith("node.kubernetes.io/")]
            live["spec"]["taints"] = system + node["spec"].get("taints", [])
            await self.client.update(live)
            await self.client.patch("nodes", self.config.name, {"status": node["status"]}, subresource="status", raw=True)
        log.info("node %s registered", self.config.name)

    @staticmethod
    def _ready_condition() -> dict[str, Any]:
        now = now_rfc3339()
        return {"type": "Ready", "status": "True", "reason": "AgentReady", "message": "corral agent is posting ready status",
                "lastHeartbeatTime": now, "lastTransitionTime": now}

    async def _heartbeat_loop(self) -> None:
        retry, failing_since = RETRY_FIRST, None
        while True:
            try:
                await self.heartbeat()
            except (ConnectionFailed, ApiError, OSError) as exc:
                if failing_since is None:
                    failing_since = time.monotonic()
                    log.warning("heartbeat failed: %s; trying again from %.1fs on, at most %.0fs apart",
                                exc, retry, RETRY_MOST)
                else:
                    log.debug("heartbeat failed again: %s", exc)
                wait, retry = min(retry, self.heartbeat_interval), min(retry * 2, RETRY_MOST)
            else:
                if failing_since is not None:
                    log.info("heartbeat renewed after %.0fs of failures", time.monotonic() - failing_since)
                retry, failing_since = RETRY_FIRST, None
                wait = self.heartbeat_interval
            await asyncio.sleep(wait)

    @property
    def heartbeat_interval(self) -> float:
        """Seconds to the next heartbeat: ``--heartbeat``, longer by as much as the server lengthened
        the lease it asked for (a large cluster's heartbeats slow down)."""
        return self.config.heartbeat_seconds * max(1.0, self.lease_seconds / self.config.lease_duration_seconds)

    async def heartbeat(self) -> None:
        """Renew the Lease and the Node's Ready condition."""
        name = self.config.name
        self.lease_seconds = await renew_lease(self.client, name, duration_seconds=self.config.lease_duration_seconds)
        try:
            node = await self.client.get("nodes", name, raw=True)
        except NotFound:
            # Someone deleted this node while its agent runs: it registers again, as kubelet does.
            log.warning("node %s was deleted; registering it again", name)
            await self._register()
            return
        conditions = [c for c in (node.get("status") or {}).get("conditions") or () if c.get("type") != "Ready"]
        ready = self._ready_condition()
        old = next((c for c in (node.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"), None)
        if old is not None and old.get("status") == "True":
            ready["lastTransitionTime"] = old.get("lastTransitionTime", ready["lastTransitionTime"])
        await self.client.patch("nodes", name, {"status": {"conditions": conditions + [ready]}}, subresource="status",
                                raw=True)

    async def _throughput_loop(self) -> None:
        from corral.agent.throughput import measure

        while True:
            try:
                self.throughput = await measure(self.client, self.config.throughput_bytes)
                await self.client.patch("nodes", self.config.name, {"status": {"network": {"throughput": self.throughput}}},
                                        subresource="status", raw=True)
            except (ConnectionFailed, ApiError, OSError) as exc:
                log.warning("throughput measurement failed: %s", exc)
            await asyncio.sleep(self.config.throughput_interval_seconds)

    # --- pods: events in ------------------------------------------------------------------------------

    def _on_pod(self, pod: dict[str, Any]) -> None:
        uid = (pod.get("metadata") or {}).get("uid", "")
        if (pod.get("spec") or {}).get("nodeName") != self.config.name:
            self._on_pod_gone(pod)
            return
        entry = self.pods.get(uid)
        if entry is None:
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Terminated"):
                return  # finished before we saw it (an agent restart): nothing to run
            entry = self.pods[uid] = _Pod(m.PodMachine(pod, backoff=self.config.restart_backoff,
                                                       host_ip=self._host_ip()))
        self._feed(entry, m.Sync(pod, time.time()))

    def _host_ip(self) -> str:
        return self._node()["status"]["addresses"][0]["address"]

    async def _config_loop(self) -> None:
        """ConfigMap and Secret volumes follow their objects, as kubelet updates them in place."""
        while True:
            await asyncio.sleep(self.config.config_sync_seconds)
            try:
                await self.configuration.refresh([entry.machine.pod for entry in list(self.pods.values())])
            except Exception:  # never let one bad round stop the updates
                log.exception("refreshing pods' volumes failed")

    def _runtime_event(self, pod: dict[str, Any], etype: str, reason: str, message: str) -> None:
        entry = self.pods.get((pod.get("metadata") or {}).get("uid", ""))
        if entry is not None:
            self.events.record(entry, etype, reason, message)

    def _on_pod_gone(self, pod: dict[str, Any]) -> None:
        entry = self.pods.get((pod.get("metadata") or {}).get("uid", ""))
        if entry is not None:
            self._feed(entry, m.Removed(time.time()))

    def _feed(self, entry: _Pod, event: m.Event) -> None:
        for action in entry.machine.handle(event):
            self._act(entry, action)

    async def _tick_loop(self) -> None:
        while True:
            now = time.time()
            for entry in list(self.pods.values()):
                due = entry.machine.next_deadline()
                if due is not None and due <= now:
                    self._feed(entry, m.Tick(now))
            await asyncio.sleep(0.25)

    # --- pods: actions out ----------------------------------------------------------------------------

    def _spawn(self, entry: _Pod, coro) -> None:
        task = asyncio.create_task(coro)
        entry.tasks.add(task)
        task.add_done_callback(entry.tasks.discard)

    def _act(self, entry: _Pod, action: Any) -> None:
        if isinstance(action, m.Start):
            self._spawn(entry, self._start(entry, action.container))
        elif isinstance(action, m.Stop) and action.container is not None:  # killed: its Exited follows
            ref = entry.refs.get(action.container)
            if ref is not None:
                self._spawn(entry, self.runtime.stop(ref, action.grace_seconds))
        elif isinstance(action, m.Stop):
            self._spawn(entry, self._stop(entry, action.grace_seconds))
        elif isinstance(action, m.Report):
            self.reporter.report(entry.uid, entry.namespace, entry.name, action.status)
        elif isinstance(action, m.Emit):
            self.events.record(entry, action.type, action.reason, action.message)
        elif isinstance(action, m.Forget):
            self.prober.forget(entry.uid)
            self.pods.pop(entry.uid, None)
            self._spawn(entry, self.runtime.remove_pod(entry.uid))

    async def _start(self, entry: _Pod, container: dict[str, Any]) -> None:
        name = container.get("name", "")
        recovered = self._recovered.pop((entry.uid, name), None)
        if recovered is not None and recovered.running:
            # Still running from before the agent restarted: adopt it instead of starting another.
            entry.refs[name] = recovered.ref
            self._feed(entry, m.Started(name, recovered.ref.id, time.time(), recovered.ref.image_id))
            self._spawn(entry, self._wait(entry, recovered.ref))
            self.prober.watch(entry, recovered.ref, container)
            return
        try:
            prepared, mounts = await self.configuration.prepare(entry.machine.pod, container, self._host_ip())
            entry.prepared[name] = prepared
            ref = await self.runtime.start(entry.machine.pod, prepared, mounts)
        except StartError as exc:
            self._feed(entry, m.StartFailed(name, exc.reason, exc.message, time.time()))
            return
        entry.refs[name] = ref
        self._feed(entry, m.Started(name, ref.id, time.time(), ref.image_id))
        self._spawn(entry, self._wait(entry, ref))
        self.prober.watch(entry, ref, prepared)

    async def _wait(self, entry: _Pod, ref: ContainerRef) -> None:
        info = await self.runtime.wait(ref)
        self.prober.forget(ref.pod_uid, ref.container)
        if entry.refs.get(ref.container) is ref:
            self._feed(entry, m.Exited(ref.container, info.exit_code, info.oom_killed, time.time()))

    async def _stop(self, entry: _Pod, grace: float) -> None:
        refs = list(entry.refs.values())
        self.prober.forget(entry.uid)
        await asyncio.gather(*(self.runtime.stop(ref, grace) for ref in refs), return_exceptions=True)
        entry.refs.clear()
        self._feed(entry, m.Stopped(time.time()))

    # --- recovery ---------------------------------------------------------------------------------------

    async def _drop_unclaimed(self) -> None:
        """After the first sync: containers left from before a restart whose pods are no longer
        ours (deleted, or placed elsewhere while we were away) are stopped and removed."""
        unclaimed, self._recovered = self._recovered, {}
        for (uid, _), rc in unclaimed.items():
            if uid in self.pods:
                continue
            await self.runtime.stop(rc.ref, 0)
            await self.runtime.remove_pod(uid)
            log.info("stopped %s of %s: the pod is no longer on this node", rc.ref.container, rc.ref.pod_key)

    # --- logs ---------------------------------------------------------------------------------------

    async def _serve_logs(self) -> None:
        """The endpoint the API server reads logs from: TLS with the node's certificate, answering
        only a client certificate of the cluster CA made out to the API server."""
        creds = getattr(self.client, "credentials", None)
        if creds is None or not (creds.cert_pem and creds.key_pem and creds.ca_pem):
            log.warning("no node certificate to serve the log endpoint with: `corral logs` will not reach this node")
            self.port = 0
            return
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        load_cert_pair(ctx, creds.cert_pem, creds.key_pem)
        ctx.load_verify_locations(cadata=creds.ca_pem.decode())
        ctx.verify_mode = ssl.CERT_REQUIRED  # no client certificate of the cluster CA: no handshake
        app = web.Application(middlewares=[_only_the_api_server])
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        app.router.add_get("/healthz", _healthz)
        app.router.add_get("/stats", self._stats)
        app.router.add_get("/metrics", self._resource_metrics)
        app.router.add_get("/metrics/resource", self._resource_metrics)
        self.streams.add_routes(app)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        host = self.config.listen_address or self.config.address
        site = web.TCPSite(self._runner, host, self.config.port, reuse_address=True, ssl_context=ctx)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stats(self, request: web.Request) -> web.Response:
        stats = self.usage.stats()
        if stats is None:
            return web.json_response({"message": f"node {self.config.name} has not measured its usage twice yet"},
                                     status=503, headers={"Retry-After": str(int(self.usage.interval) + 1)})
        return web.json_response(stats)

    async def _resource_metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.usage.prometheus().encode(),
                            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def _logs(self, request: web.Request) -> web.StreamResponse:
        ns, pod, container = (request.match_info[k] for k in ("namespace", "pod", "container"))
        tail = request.query.get("tailLines", "")
        if tail and not (tail.isascii() and tail.isdigit() and len(tail) <= 18):
            return web.json_response({"message": f"tailLines must be a non-negative integer, got {tail[:40]!r}"},
                                     status=400)
        if self.log_streams >= self.max_log_streams:
            return web.json_response({"message": f"node {self.config.name} is answering {self.log_streams} log "
                                                 "requests already; try again later"},
                                     status=429, headers={"Retry-After": "1"})
        entry = next((p for p in self.pods.values() if p.namespace == ns and p.name == pod), None)
        if entry is None:
            return web.json_response({"message": f'pod "{ns}/{pod}" is not on node {self.config.name}'}, status=404)
        if container not in entry.machine.containers and container not in entry.machine.init:
            names = ", ".join([*entry.machine.init, *entry.machine.containers])
            return web.json_response({"message": f'container "{container}" is not in pod {pod} (it has: {names})'},
                                     status=404)
        follow = request.query.get("follow", "").lower() in ("true", "1")
        previous = request.query.get("previous", "").lower() in ("true", "1")
        since_raw = request.query.get("sinceSeconds", "")
        if since_raw and not (since_raw.isascii() and since_raw.isdigit() and len(since_raw) <= 12):
            return web.json_response({"message": f"sinceSeconds must be a positive integer, got {since_raw[:40]!r}"},
                                     status=400)
        since = int(since_raw) if since_raw else None
        unavailable = self.runtime.logs_unavailable(previous=previous, since_seconds=since)
        if unavailable is not None:
            return web.json_response({"message": unavailable}, status=400)
        resp = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
        resp.enable_chunked_encoding()
        self.log_streams += 1
        try:
            await resp.prepare(request)
            async for chunk in self.runtime.logs(entry.uid, container, tail=int(tail) if tail else None,
                                                 follow=follow, previous=previous, since_seconds=since):
                await resp.write(chunk)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.log_streams -= 1
        return resp
