"""The corral server process: store, watch cache, HTTP API, health, metrics, compaction.

:class:`Server` is what ``corral server`` runs and what tests start in-process. Components that
run inside the server (scheduler, controllers) use ``server.store`` and ``server.cache`` directly,
without an HTTP hop.

Several servers may share one etcd: each serves the whole API from its own watch cache, and a
leader election (:mod:`corral.server.control.leader`) picks the one that runs the scheduler, the
controllers and compaction. On SQLite there is one server, and it runs them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import logging
import os
import time
from datetime import datetime
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from corral.aio import cancel_and_wait, wait_for_termination
from corral.api.defaults import apply_create_defaults, rfc3339
from corral.api.kinds.coordination import HeartbeatScale
from corral.api.resources import (NODE_LEASE_NAMESPACE, OLD_NODE_LEASE_NAMESPACE, SYSTEM_NAMESPACES,
                                  SYSTEM_PRIORITY_CLASSES, by_kind)
from corral.controllers.nodes.limits import EvictionLimits
from corral.server import errors
from corral.server.watch import HISTORY_BYTES, WatchCache
from corral.agent.throughput import THROUGHPUT_PATH
from corral.server.discovery import discovery_documents, openapi_documents
from corral.server.http.routes import MAX_BODY_BYTES, RESOURCE, USER, VERB, add_resource_routes
from corral.server.scheduling import SchedulingRoutes
from corral.ui import UI_PREFIX, handler as ui_handler
from corral.server.flowcontrol import (DEFAULT_READS, DEFAULT_WRITES, RETRY_AFTER_SECONDS, InflightLimits, Queued,
                                      TooManyRequests)
from corral.server.admission import Admission
from corral.server.agents import AgentConnector
from corral.server.http.audit import DEFAULT_MAX_BYTES as DEFAULT_AUDIT_MAX_BYTES, AuditLog
from corral.server.http.refused import request_log
from corral.server.authn import ANONYMOUS_PATHS, BOOTSTRAPPERS, Authenticator, UserInfo
from corral.server.authz import Attributes, Decision, NodeAuthorizer, RBACAuthorizer, RememberedAttributes, forbidden
from corral.server.authz.review import Reviews
from corral.server.authz.node import node_name
from corral.server.authz.bootstrap import CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES
from corral.server.authn.certificates import (ServerPKI, is_wildcard, prepare_tls, primary_address,
                                              write_first_credentials)
from corral.server.authn.join import join_handler
from corral.server.metrics import ServerMetrics
from corral.server.rest import ResourceAPI
from corral.pki import CA_PATH, JOIN_PATH, MASTERS_GROUP, NODE_PREFIX, NODES_GROUP
from corral.pki.kubeconfig import Credentials
from corral.store import (DEFAULT_MAX_VALUE_BYTES, Conflict, KeyExists, KeyNotFound, Store, StoreFull, TooLarge,
                          Unavailable, open_store)
from corral.store.encrypted import KEY_FILE, open_encrypted
from corral.store.etcd import EtcdTLS

__all__ = ["Server", "ServerConfig", "DEFAULT_ADDRESS", "default_data_dir"]

log = logging.getLogger(__name__)

DEFAULT_ADDRESS = "127.0.0.1:7443"
RENEW_CHECK_SECONDS = 12 * 3600.0
SPACE_HISTORY = 1000  # revisions of history kept when the store is full and compacts at once
THROUGHPUT_MAX_BYTES = 64 * 2**20  # one throughput test's download or upload, at most
THROUGHPUT_AT_ONCE = 4  # throughput tests running at once (agents measure once in 10 minutes)
THROUGHPUT_SECONDS = 60.0
_ZEROS = bytes(1 << 16)
ATTRIBUTES = web.RequestKey("attributes", Attributes)  # what an authorised request asked, for the audit log
MAX_JUDGED = 8192  # remembered judgements of token-authenticated requests before starting over


def default_data_dir() -> str:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "corral")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    data_dir: str = ""
    store_url: str = ""  # default: sqlite://{data_dir}/corral.db
    etcd_tls: EtcdTLS | None = None  # how to reach an etcd store over TLS
    address: str = DEFAULT_ADDRESS
    history_revisions: int = 100_000  # store history kept for watches and paged lists
    history_bytes: int = HISTORY_BYTES  # ... and at most this much of superseded versions (or the live data's size)
    compact_interval: float = 60.0
    event_ttl: float = 3600.0  # Events older than this are deleted (kube-apiserver's --event-ttl)
    sqlite_synchronous: str = "FULL"
    scheduler: bool = True  # run the scheduler in this process
    scheduler_process: bool = False  # ... in a child process of its own (corral.scheduler.process; the CLI's
    # default where two cores are usable, see corral.server.control.cores)
    scheduler_config: str | None = None  # a SchedulerConfiguration YAML file
    controllers: bool = True  # run the controllers (node lifecycle, workloads, ...) in this process
    node_grace_seconds: float = 40.0  # lease older than this: node NotReady (scaled with the node count)
    heartbeats: HeartbeatScale = HeartbeatScale()  # agents' renewal interval, and the rate past which it grows
    eviction_seconds: float = 300.0  # NotReady longer than this: its pods are placed again
    eviction_limits: EvictionLimits = EvictionLimits()  # how many lost nodes a second, per zone
    local_agent: bool = False  # also run an agent (process runtime) for this machine, as `make up` does
    leader_elect: bool | None = None  # None: elect when the store is etcd (several servers may share it)
    identity: str = ""  # this server's name in the leader Lease (default: host name + a random suffix)
    advertise_url: str = ""  # how other servers reach this one (default: the URL it listens on)
    lease_seconds: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    tls_sans: tuple[str, ...] = ()  # more names and addresses for the serving certificate
    user_kubeconfig: bool = True  # also write ~/.config/corral/kubeconfig when there is none
    audit_log: str = ""  # default: {data_dir}/audit.log; "off": none
    audit_log_max_bytes: int = DEFAULT_AUDIT_MAX_BYTES  # rotated past this size
    encryption_key_file: str = ""  # the keys Secrets are sealed with at rest; default: {data_dir}/encryption.key
    max_object_size: int = DEFAULT_MAX_VALUE_BYTES  # the largest object stored, encoded; 0: no limit
    quota_bytes: int = 2 * 2**30  # SQLite: data past which writes are refused (507); 0: none
    max_requests_inflight: int = DEFAULT_READS  # reads in flight per lane (users; the cluster's own)
    max_mutating_requests_inflight: int = DEFAULT_WRITES  # writes in flight per lane

    def elects_leader(self) -> bool:
        if self.leader_elect is not None:
            return self.leader_elect
        return self.resolved_store_url().startswith("etcd://")

    def resolved_store_url(self) -> str:
        if self.store_url:
            return self.store_url
        return f"sqlite://{os.path.join(self.data_dir or default_data_dir(), 'corral.db')}"


def _split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"address must be HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


class Server:
    """One corral server: ``await start()``, serve, ``await stop()``."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.store: Store | None = None
        self.cache: WatchCache | None = None
        self.api: ResourceAPI | None = None
        self.metrics = ServerMetrics()
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task] = []
        self.scheduler = None
        self.controllers = None  # the leader's (corral.controllers.manager)
        self.elector = None
        self.agent = None
        self.url = ""
        self.join_url = ""
        self._scheduler_config = None
        self._detach_scheduler = None
        self.pki: ServerPKI | None = None
        self.authn: Authenticator | None = None
        self.rbac: RBACAuthorizer | None = None
        self.node_authz: NodeAuthorizer | None = None
        self.admin: Credentials | None = None
        self._asked = RememberedAttributes()  # what each (user, method, path, query) asks, for authz and audit
        # Token-authenticated requests allowed before, by (Authorization header, method, path, raw
        # query): the verified token, what it asked and the RBAC generation that allowed it. The
        # whole judgement (token, attributes, node authoriser, RBAC) otherwise cost ~4 us a request.
        self._judged: dict[tuple[str, str, str, str], tuple[Any, Attributes, int]] = {}
        self._leader_tasks: list[asyncio.Task] = []
        self._space_needed = asyncio.Event()  # a write was refused for space, or history outgrew its bytes: compact now
        self._trimmed_to = 0  # the watch cache let go of history up to here for its size: so may the store
        self._throughput_running = 0
        self.audit: AuditLog | None = None

    async def start(self) -> None:
        scheduler_config = None
        if self.config.scheduler:
            from corral.scheduler.profiles import load_config, with_heartbeats

            # Fail before opening anything (a scheduler process reads the same file again).
            scheduler_config = with_heartbeats(load_config(self.config.scheduler_config),
                                               self.config.heartbeats.interval, self.config.heartbeats.max_per_second)
        election = None
        if self.config.elects_leader():
            from corral.server.control.leader import ElectionConfig

            election = ElectionConfig(lease_seconds=self.config.lease_seconds, renew_deadline=self.config.renew_deadline,
                                      retry_period=self.config.retry_period)
        host, port = _split_address(self.config.address)
        self.store = await open_store(self.config.resolved_store_url(), synchronous=self.config.sqlite_synchronous,
                                      etcd_tls=self.config.etcd_tls)
        self.store.max_value_bytes = self.config.max_object_size
        if hasattr(self.store, "quota_bytes"):  # SQLite; etcd enforces its own
            self.store.quota_bytes = self.config.quota_bytes
        os.makedirs(self.data_dir, mode=0o700, exist_ok=True)
        key_file = self.config.encryption_key_file or os.path.join(self.data_dir, KEY_FILE)
        try:
            self.store = await open_encrypted(self.store, key_file)
        except (OSError, ValueError) as exc:
            await self.store.close()  # its lock too: the server is not starting
            if isinstance(exc, ValueError):
                raise
            raise ValueError(f"cannot read the encryption key file {key_file}: {exc.strerror or exc}") from None
        advertised = urlsplit(self.config.advertise_url).hostname if self.config.advertise_url else None
        self.pki = await prepare_tls(self.store, self.data_dir, listen_host=host,
                                     extra_hosts=(*self.config.tls_sans, *([advertised] if advertised else [])))
        if self.config.audit_log != "off":
            path = self.config.audit_log or os.path.join(self.data_dir, "audit.log")
            try:
                self.audit = AuditLog(path, max_bytes=self.config.audit_log_max_bytes)
            except OSError as exc:
                raise ValueError(f"cannot open the audit log {path}: {exc.strerror or exc}") from None
        self.cache = WatchCache(self.store, history_bytes=self.config.history_bytes)
        self.cache.on_trim.append(self._history_trimmed)
        await self.cache.start()
        self.authn = Authenticator(self.cache.get)
        self.inflight = InflightLimits(reads=self.config.max_requests_inflight,
                                       writes=self.config.max_mutating_requests_inflight)
        self.rbac = RBACAuthorizer(self.cache.items, self.cache.get)
        self.cache.on_event.append(self.rbac.on_store_event)
        self.cache.on_reload.append(self.rbac.invalidate)
        self.node_authz = NodeAuthorizer(self.cache.get, lease_namespace=NODE_LEASE_NAMESPACE,
                                         non_resource_paths=frozenset({THROUGHPUT_PATH}), items=self.cache.items)
        self.cache.on_event.append(self.node_authz.on_store_event)
        self.cache.on_reload.append(self.node_authz.reload)
        # Every server of the cluster holds the CA's key: continue tokens signed with a key derived
        # from it hold on every server.
        self.api = ResourceAPI(self.store, self.cache, continue_key=hashlib.sha256(
            b"corral continue tokens\0" + self.pki.ca.key_pem).digest())
        nodes_prefix = by_kind("Node").store_prefix
        self.api.admit = Admission(self.cache.get, self.cache.items, self.authorize, node_lease_seconds=lambda asked: (
            self.config.heartbeats.lease_seconds(asked, self.config.node_grace_seconds,
                                                 self.cache.count(nodes_prefix)))).admit
        await self._bootstrap()
        app = self.build_app()
        # (request_log: a request the HTTP parser refuses is counted, and its bytes never logged)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, logger=request_log)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, backlog=1024, reuse_address=True,
                           ssl_context=self.pki.ssl_context)
        await site.start()
        sock = site._server.sockets[0]  # type: ignore[union-attr]
        bound_port = sock.getsockname()[1]
        local = "127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host
        self.url = f"https://{local if ':' not in local else f'[{local}]'}:{bound_port}"
        # Where other machines' agents reach it: the advertised URL, or, listening on every
        # interface, the address of the default route (which the serving certificate names).
        primary = primary_address() if is_wildcard(host) and not self.config.advertise_url else None
        self.join_url = self.config.advertise_url or (f"https://{primary}:{bound_port}" if primary else self.url)
        await write_first_credentials(self.pki, self.store, self.data_dir, self.url,
                                      user_kubeconfig=self.config.user_kubeconfig, settled=self.cache.wait_consistent)
        self.admin = Credentials(self.url, self.pki.ca.cert_pem, self.pki.admin_token, source=self.pki.admin_kubeconfig)
        self._tasks.append(asyncio.create_task(self._renew_loop(), name="certificate renewal"))
        self._scheduler_config = scheduler_config
        if election is not None:
            import socket
            import uuid

            from corral.server.control.leader import LeaderElector

            identity = self.config.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
            self.elector = LeaderElector(self.store, identity, url=self.config.advertise_url or self.url,
                                         on_started=self._start_leading,
                                         on_stopped=self._stop_leading, config=election)
            self.elector.start()
        else:
            await self._start_leading()
        if self.config.local_agent:
            await self._start_local_agent()

    @property
    def data_dir(self) -> str:
        return self.config.data_dir or default_data_dir()

    def client(self, *, user_agent: str = "corral-client") -> Any:
        """A client of this server with the admin credential (for tests and in-process tools)."""
        from corral.client.rest import Client

        return Client(credentials=self.admin, user_agent=user_agent)

    def node_credentials(self, node_name: str) -> Credentials:
        """A node's client certificate, issued directly (for the agent this process runs itself)."""
        return self.issue_credentials(NODE_PREFIX + node_name, [NODES_GROUP], serving_name=node_name)

    def issue_credentials(self, user: str, groups: list[str], *, serving_name: str = "") -> Credentials:
        """A client certificate of the cluster CA for ``user``, issued in this process."""
        issued = self.pki.ca.issue_client(user, groups, serving_name=serving_name)  # type: ignore[union-attr]
        return Credentials(self.url, self.pki.ca.cert_pem, cert_pem=issued.cert_pem,  # type: ignore[union-attr]
                           key_pem=issued.key_pem, source="issued in-process")

    async def _renew_loop(self) -> None:
        """The serving certificate is renewed while the server runs, long before it expires."""
        while True:
            await asyncio.sleep(RENEW_CHECK_SECONDS)
            try:
                if self.pki.renew_serving():
                    log.info("renewed the serving certificate")
            except OSError:  # pragma: no cover - logged, retried next round
                log.exception("renewing the serving certificate failed")

    async def _start_local_agent(self) -> None:
        """An agent for this machine, talking to this server over HTTPS like any other agent."""
        from corral.agent.agent import Agent, AgentConfig
        from corral.agent.node_info import default_node_name, host_capacity
        from corral.agent.runtimes.process import ProcessRuntime
        from corral.client.rest import Client

        data_dir = os.path.join(self.data_dir, "agent")
        name = default_node_name()
        self._agent_client = Client(credentials=self.node_credentials(name), user_agent="corral-agent")
        self.agent = Agent(self._agent_client, ProcessRuntime(data_dir), AgentConfig(
            name=name, data_dir=data_dir, capacity=host_capacity(data_dir),
            address="127.0.0.1", port=0))
        await self.agent.start()

    async def _start_leading(self) -> None:
        """What only one server runs: scheduler, controllers, compaction (the leader's, or the only one's)."""
        await self.cache.wait_consistent()  # everything the last leader wrote, before acting on it
        if self._scheduler_config is not None:
            self._start_scheduler(self._scheduler_config)
        if self.config.controllers:
            from corral.controllers.manager import ControllerManager

            self.controllers = ControllerManager(self.api, node_grace_seconds=self.config.node_grace_seconds,
                                                 eviction_seconds=self.config.eviction_seconds,
                                                 heartbeats=self.config.heartbeats,
                                                 eviction_limits=self.config.eviction_limits)
            self.controllers.start()
        self._leader_tasks = [asyncio.create_task(self._compact_loop(), name="compaction")]

    async def _stop_leading(self) -> None:
        await cancel_and_wait(*self._leader_tasks)
        self._leader_tasks = []
        if self.controllers is not None:
            await self.controllers.stop()
            self.controllers = None
        if self.scheduler is not None:
            self._detach_scheduler()
            await self.scheduler.stop()
            if hasattr(self.scheduler, "metrics"):
                self.scheduler.metrics.unregister()
            self.scheduler = None

    def _start_scheduler(self, config) -> None:
        """The scheduler inside the server: fed by the watch cache, writing through the REST layer."""
        from corral.scheduler.cluster import InProcessWriter
        from corral.scheduler.scheduler import Scheduler
        from corral.scheduler.sources import attach_in_process

        fence = self.elector.fence if self.elector is not None else None
        if self.config.scheduler_process:
            from corral.scheduler.process import SchedulerProcess, child_args

            heartbeats = self.config.heartbeats
            self.scheduler = SchedulerProcess(self.cache, InProcessWriter(self.api, fence), child_args(
                self.config.scheduler_config, heartbeats.interval, heartbeats.max_per_second))
            self._detach_scheduler = self.scheduler.detach
            self.scheduler.start()
            return
        self.scheduler = Scheduler(config, InProcessWriter(self.api, fence), registry=self.metrics.registry)
        self._detach_scheduler = attach_in_process(self.scheduler, self.cache)
        self.scheduler.start()

    async def stop(self) -> None:
        if self.agent is not None:
            await self.agent.stop()
            await self._agent_client.close()
        if self.elector is not None:
            await self.elector.stop()  # stops the leader's components and gives the Lease up
        else:
            await self._stop_leading()
        await cancel_and_wait(*self._tasks)
        if self.cache is not None:
            await self.cache.stop()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.store is not None:
            await self.store.close()
        if self.audit is not None:
            self.audit.close()

    async def _bootstrap(self) -> None:
        """Objects every cluster has: the system namespaces and priority classes, the default
        roles and their bindings. A missing one is created again; an existing one is left as the
        administrator made it."""
        ns_res, pc_res = by_kind("Namespace"), by_kind("PriorityClass")
        wanted: list[tuple[Any, str, dict[str, Any]]] = [
            (ns_res, name, {"metadata": {"name": name}}) for name in SYSTEM_NAMESPACES
        ] + [
            (pc_res, name, {"metadata": {"name": name}, "value": value,
                            "description": "Used for system critical pods."})
            for name, value in SYSTEM_PRIORITY_CLASSES.items()
        ] + [
            (by_kind(obj["kind"]), obj["metadata"]["name"], copy.deepcopy(obj))
            for obj in (*CLUSTER_ROLES, *CLUSTER_ROLE_BINDINGS)
        ]
        for resource, name, obj in wanted:
            if self.cache.get(resource.key(None, name)) is None:  # type: ignore[union-attr]
                apply_create_defaults(resource, obj, None)
                try:
                    await self.store.create(resource.key(None, name), obj)  # type: ignore[union-attr]
                except KeyExists:
                    pass
        # Node Leases moved to Kubernetes' kube-node-lease (kubectl describe node looks there). The
        # old ones are not copied: a copy would be a stale heartbeat until its agent renews it in
        # the new place; without one, a node is judged by its Ready condition's heartbeat meanwhile.
        leases = by_kind("Lease")
        for record in list(self.cache.items(leases.store_prefix, leases.key(OLD_NODE_LEASE_NAMESPACE, ""))):  # type: ignore[union-attr]
            try:
                await self.store.delete(record.key, record.revision)  # type: ignore[union-attr]
            except (KeyNotFound, Conflict):
                pass

    def _history_trimmed(self, revision: int) -> None:
        """The watch cache's history outgrew its bytes (large objects updated often): the store's
        history up to the same revision goes at once, not at the next regular compaction."""
        self._trimmed_to = max(self._trimmed_to, revision)
        self._space_needed.set()

    async def _compact_loop(self) -> None:
        """Compact every ``compact_interval``; while the store is full, every second as well,
        keeping only the newest history, so what deletions and superseded updates left behind frees
        its space at once rather than in a minute."""
        assert self.store is not None
        loop = asyncio.get_running_loop()
        regular = loop.time() + self.config.compact_interval
        while True:
            full = self.store.full() is not None
            try:
                await asyncio.wait_for(self._space_needed.wait(),
                                       max(0.0, min(regular - loop.time(), 1.0 if full else float("inf"))))
            except asyncio.TimeoutError:
                pass
            self._space_needed.clear()
            try:
                if self.store.full() is not None:
                    await self.compact(self.store.revision_before(min(self.config.history_revisions, SPACE_HISTORY)))
                if self._trimmed_to > self.store.compacted_revision:
                    await self.compact(self._trimmed_to)
                if loop.time() >= regular:
                    regular = loop.time() + self.config.compact_interval
                    await self.expire_events()
                    await self.compact()
            except Exception:  # pragma: no cover - logged, retried next round
                log.exception("compaction failed")

    async def expire_events(self, now: float | None = None) -> int:
        """Delete the Events older than ``event_ttl`` (by their last time, else their creation), as
        kube-apiserver lets them expire: each scheduled pod leaves one, and a soak of 33,000 pods
        had kept every one (memory and store growing without end). Returns how many went."""
        assert self.store is not None and self.cache is not None
        cutoff = rfc3339((time.time() if now is None else now) - self.config.event_ttl)
        expired = 0
        for record in self.cache.items(by_kind("Event").store_prefix):
            obj = record.obj
            stamp = obj.get("lastTimestamp") or (obj.get("metadata") or {}).get("creationTimestamp") or ""
            if not isinstance(stamp, str) or _stamp_order(stamp) >= cutoff:
                continue
            try:
                await self.store.delete(record.key, record.revision)
                expired += 1
            except (KeyNotFound, Conflict):  # gone or changed meanwhile: judged again next round
                pass
        return expired

    async def compact(self, revision: int | None = None) -> int:
        """Compact store history (default: keep ``history_revisions``) and the cache's window."""
        assert self.store is not None and self.cache is not None
        target = revision if revision is not None else self.store.revision_before(self.config.history_revisions)
        if target <= self.store.compacted_revision:
            return self.store.compacted_revision
        await self.store.compact(target)
        self.cache.forget_before(target)
        return target

    # --- the aiohttp application -----------------------------------------------------------------------

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[self._middleware])
        docs = discovery_documents()
        openapi: dict[str, bytes] = {}

        def static(body: bytes):
            async def handler(request: web.Request) -> web.Response:
                return web.Response(body=body, content_type="application/json")
            return handler

        for path, body in docs.items():
            app.router.add_get(path, static(body))

        async def openapi_handler(request: web.Request) -> web.Response:
            if not openapi:
                openapi.update(openapi_documents())
            body = openapi.get(request.path.rstrip("/"))
            if body is None:
                raise errors.ApiError(404, "NotFound", f"no OpenAPI document at {request.path}")
            accept = request.headers.get("Accept", "")
            if accept and not any(t in accept for t in ("application/json", "*/*", "application/*")):
                raise errors.ApiError(406, "NotAcceptable",
                                      f"the OpenAPI documents are served as application/json only; asked for {accept!r}")
            return web.Response(body=body, content_type="application/json")

        app.router.add_get("/openapi/v2", openapi_handler)
        app.router.add_get("/openapi/v3", openapi_handler)
        app.router.add_get(r"/openapi/v3/{tail:.+}", openapi_handler)
        for path in ("/healthz", "/livez"):
            app.router.add_get(path, self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        SchedulingRoutes(self).add_to(app)  # explain and plan
        app.router.add_get("/ui", ui_handler)
        app.router.add_get(UI_PREFIX + "{name:.*}", ui_handler)
        app.router.add_get(CA_PATH, self._ca_certificate)
        app.router.add_post(JOIN_PATH, self._join)
        app.router.add_get(THROUGHPUT_PATH, self._throughput_download)
        app.router.add_post(THROUGHPUT_PATH, self._throughput_upload)
        add_resource_routes(app, self.api, Reviews(self.authorize, self.rbac),  # type: ignore[arg-type]
                            AgentConnector(self.pki.ca), self.inflight)  # type: ignore[union-attr]
        return app

    def _authenticate(self, request: web.Request) -> UserInfo | None:
        """The first step of every request, before any handler reads its body: who is asking (401
        for nobody). ``None`` for the public paths, which anyone may ask."""
        path = request.path
        if path in ANONYMOUS_PATHS or path == "/ui" or path.startswith(UI_PREFIX):
            return None  # the dashboard's own files: its data it asks of the API with a token
        header = request.headers.get("Authorization")
        if header:
            judged = self._judged.get((header, request.method, path, request.query_string))
            # Allowed before, and nothing it rests on changed: the token's object, its expiry, RBAC.
            if judged is not None and judged[2] == self.rbac.generation and self.authn.holds(judged[0]):  # type: ignore[union-attr]
                request[USER] = user = judged[0].user
                request[ATTRIBUTES] = judged[1]  # set before authorisation only here: it is decided
                return user
        transport = request.transport
        user = self.authn.authenticate(  # type: ignore[union-attr]
            header, lambda: transport.get_extra_info("peercert") if transport is not None else None)
        if user is None:
            raise errors.ApiError(401, "Unauthorized", "Unauthorized")
        request[USER] = user
        return user

    def _authorize_request(self, request: web.Request, user: UserInfo) -> None:
        """May ``user`` do what the request asks (403 naming the user, the verb and the resource)?
        Judged from the method, path and query: still before the body is read."""
        if ATTRIBUTES in request:
            return  # judged before (see _authenticate)
        path = request.path
        if path == JOIN_PATH:
            return  # the join handler decides: a join token, or a node renewing its own certificate
        if user.in_group(BOOTSTRAPPERS):
            raise errors.ApiError(403, "Forbidden", f'User "{user.name}" may only join a node with a join token')
        attributes = request[ATTRIBUTES] = self._asked(user.name, user.groups, request.method, path,
                                                       request.query_string, lambda: request.query)
        if MASTERS_GROUP not in user.groups:  # else allowed everything, as kube-apiserver's privileged group
            decision = self.authorize(attributes)
            if not decision.allowed:
                raise forbidden(attributes, decision.reason)
            if node_name(user.name, user.groups) is not None:
                return  # the node authoriser looks at objects (where a pod is bound): never remembered
        header = request.headers.get("Authorization")
        verified = self.authn.verified(header) if header else None  # type: ignore[union-attr]
        if verified is not None and verified.user is user:
            if len(self._judged) >= MAX_JUDGED:
                self._judged.clear()
            self._judged[(header, request.method, path, request.query_string)] = (
                verified, attributes, self.rbac.generation)  # type: ignore[union-attr]

    def _audit(self, request: web.Request, code: int) -> None:
        user = request.get(USER)
        name, groups = (user.name, user.groups) if user is not None else ("system:anonymous", ("system:unauthenticated",))
        a = request.get(ATTRIBUTES) or self._asked(name, groups, request.method, request.path, request.query_string,
                                                   lambda: request.query)
        resource = (a.resource + (f"/{a.subresource}" if a.subresource else "")) if a.is_resource else a.path
        self.audit.record(user=name, groups=groups, verb=a.verb, resource=resource,  # type: ignore[union-attr]
                          namespace=a.namespace, name=a.name, code=code)

    def authorize(self, attributes: Attributes) -> Decision:
        """The node authoriser for node credentials, then RBAC: the first that allows wins."""
        decided = self.node_authz.authorize(attributes)  # type: ignore[union-attr]
        if decided is not None:
            return decided
        return self.rbac.authorize(attributes)  # type: ignore[union-attr]

    @web.middleware
    async def _middleware(self, request: web.Request, handler) -> web.StreamResponse:
        start = time.perf_counter()
        try:
            # authenticate → limit → authorise → (the handler) decode → admit: one path for all.
            user = self._authenticate(request)
            if user is None:  # the public paths: health, version, the CA
                response = await handler(request)
            else:
                try:
                    lane = self.inflight.enter(request, user.name, user.groups)
                except Queued as queued:  # no seat free for this user now: wait for one, in turn
                    lane = await self.inflight.wait(queued)
                try:
                    self._authorize_request(request, user)
                    response = await handler(request)
                finally:
                    self.inflight.leave(lane)
        except errors.ApiError as exc:
            response = web.Response(body=exc.body(), status=exc.code, content_type="application/json")
            if exc.code == 429:
                response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        except web.HTTPException as exc:
            reason = {404: "NotFound", 405: "MethodNotAllowed", 413: "RequestEntityTooLarge"}.get(
                exc.status, "BadRequest" if exc.status < 500 else "InternalError")
            message = "the server could not find the requested resource" if exc.status == 404 else exc.reason
            response = web.Response(body=errors.status_body(exc.status, reason, message),
                                    status=exc.status, content_type="application/json")
        except Unavailable as exc:
            response = web.Response(body=errors.status_body(503, "ServiceUnavailable", str(exc)),
                                    status=503, content_type="application/json")
        except StoreFull as exc:
            self._space_needed.set()
            message = (f"{exc}: creates and updates are refused until deletions free space (the server compacts "
                       "its history at once); see --quota-backend-bytes")
            response = web.Response(body=errors.status_body(507, "InsufficientStorage", message),
                                    status=507, content_type="application/json")
        except TooLarge as exc:
            message = (f"the object would take {exc.size} bytes; the server stores objects of at most {exc.limit} "
                       "bytes (--max-object-size)")
            response = web.Response(body=errors.status_body(413, "RequestEntityTooLarge", message),
                                    status=413, content_type="application/json")
        except asyncio.TimeoutError:
            response = web.Response(body=errors.status_body(504, "Timeout", "the server timed out"),
                                    status=504, content_type="application/json")
        except Exception as exc:
            log.exception("internal error serving %s %s", request.method, request.path)
            response = web.Response(body=errors.status_body(500, "InternalError", f"internal error: {exc}"),
                                    status=500, content_type="application/json")
        verb = request.get(VERB, "other")
        if self.audit is not None and (request.method not in ("GET", "HEAD") or response.status in (401, 403)):
            self._audit(request, response.status)
        self.metrics.served(verb, request.get(RESOURCE, ""), response.status, time.perf_counter() - start)
        return response

    async def _join(self, request: web.Request) -> web.Response:
        return await join_handler(request, self.pki.ca, request[USER])  # type: ignore[union-attr]

    async def _ca_certificate(self, request: web.Request) -> web.Response:
        """The cluster CA, for anyone: a joining agent checks it against its ``--ca-cert-hash``."""
        return web.Response(body=self.pki.ca.cert_pem, content_type="application/x-pem-file")  # type: ignore[union-attr]

    async def _throughput_download(self, request: web.Request) -> web.StreamResponse:
        """Bytes for an agent to time its download with (at most 64 MiB), written from one shared
        buffer of zeros (a test held its whole body: 30 clients that never read took 1.1 GB), at
        most ``THROUGHPUT_AT_ONCE`` tests at a time, each given ``THROUGHPUT_SECONDS``."""
        try:
            n = max(0, min(int(request.query.get("bytes", "1048576")), THROUGHPUT_MAX_BYTES))
        except ValueError:
            raise errors.bad_request("bytes must be an integer") from None
        with self._throughput_slot():
            resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
            resp.content_length = n
            await resp.prepare(request)
            zeros, left = memoryview(_ZEROS), n
            try:
                async with asyncio.timeout(THROUGHPUT_SECONDS):
                    while left > 0:
                        chunk = zeros[:min(left, len(zeros))]
                        await resp.write(chunk)
                        left -= len(chunk)
                    await resp.write_eof()
            except TimeoutError:  # a client that does not read: let its connection go
                if request.transport is not None:
                    request.transport.abort()
            return resp

    async def _throughput_upload(self, request: web.Request) -> web.Response:
        """Reads and drops an agent's upload (streamed, so the API body limit does not apply; at
        most 64 MiB, then 413)."""
        with self._throughput_slot():
            total = 0
            async with asyncio.timeout(THROUGHPUT_SECONDS):
                async for chunk in request.content.iter_chunked(1 << 16):
                    total += len(chunk)
                    if total > THROUGHPUT_MAX_BYTES:
                        raise errors.too_large(THROUGHPUT_MAX_BYTES)
            return web.json_response({"bytes": total})

    @contextlib.contextmanager
    def _throughput_slot(self):
        if self._throughput_running >= THROUGHPUT_AT_ONCE:
            raise TooManyRequests(f"{THROUGHPUT_AT_ONCE} throughput tests are running; try again later")
        self._throughput_running += 1
        try:
            yield
        finally:
            self._throughput_running -= 1

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        if self.cache is None or not self.cache.ready.is_set():
            return web.Response(text="watch cache not ready", status=503)
        full = self.store.full() if self.store is not None else None
        if full is not None:  # as kube-apiserver's readyz fails on etcd's NOSPACE alarm
            return web.Response(text=f"{full}: writes are refused", status=503)
        return web.Response(text="ok")

    async def _metrics(self, request: web.Request) -> web.Response:
        assert self.store is not None and self.cache is not None
        self.metrics.revision.set(self.store.revision)
        self.metrics.watchers.set(self.cache.watcher_count())
        self.metrics.cached_events.set(self.cache.event_count())
        self.metrics.leader.set(1 if self.elector is None or self.elector.leading else 0)
        from corral.api.resources import RESOURCES

        for r in RESOURCES:
            self.metrics.objects.labels(r.plural).set(self.cache.count(r.store_prefix))
        if self.scheduler is not None:
            self.scheduler.update_gauges()
        if self.controllers is not None:
            self.metrics.controller_events(self.controllers.event_recorders())
            self.metrics.node_zones(self.controllers.node_lifecycle())
        body = generate_latest(self.metrics.registry)
        if hasattr(self.scheduler, "metrics_text"):  # a scheduler process: its own registry's, asked of it
            body += await self.scheduler.metrics_text()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def _stamp_order(stamp: str) -> str:
    """A timestamp in the form ``rfc3339`` writes (``2026-11-24T12:00:00Z``), which orders as text;
    others (fractions, offsets) are parsed and rewritten; one that does not parse orders last."""
    if len(stamp) == 20 and stamp.endswith("Z"):
        return stamp
    try:
        return rfc3339(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return "~"  # after every date: never expired on a guess


def tune_gc_for_server(registry: Any = None) -> Any:
    """For a long-running server process, once start-up has loaded the watch cache and the
    scheduler's tables: the cyclic garbage collector runs when the process is idle, and looks at each
    object once (:class:`corral.memory.IdleCollector`, which it returns, started); its passes are
    ``corral_server_gc_*`` in ``registry``."""
    from corral.memory import CollectorMetrics, IdleCollector

    collector = IdleCollector()
    collector.start()
    if registry is not None:
        registry.register(CollectorMetrics(collector, "corral_server"))
    return collector


async def serve_forever(config: ServerConfig, *, ready_message: bool = True) -> None:
    """Run a server until SIGINT/SIGTERM: what ``corral server`` does."""
    server = Server(config)
    await server.start()
    collector = tune_gc_for_server(server.metrics.registry)
    if ready_message:
        everywhere = " and every other address of this machine" if is_wildcard(_split_address(config.address)[0]) else ""
        print(f"corral server listening on {server.url}{everywhere} (store: {config.resolved_store_url()})", flush=True)
        print(f"admin kubeconfig: {server.pki.admin_kubeconfig}  (export KUBECONFIG={server.pki.admin_kubeconfig})",
              flush=True)
        print(f"join a node: corral agent --server {server.join_url} --token "
              f"{server.pki.join_token} --ca-cert-hash {server.pki.ca.pin}", flush=True)
        if config.scheduler:
            print("scheduler: " + ("in a child process of its own, on another core (--no-scheduler-process: inside "
                                   "the server)" if config.scheduler_process else "inside the server process"),
                  flush=True)
    try:
        await wait_for_termination()
    finally:
        running = sum(p.machine.phase == "Running" for p in server.agent.pods.values()) if server.agent is not None else 0
        await server.stop()
        await collector.stop()
        if ready_message and running:
            left = ("1 pod of this machine keeps running: the next start picks it up" if running == 1 else
                    f"{running} pods of this machine keep running: the next start picks them up")
            print(f"stopped; the {left} (delete pods before stopping to stop them)", flush=True)
