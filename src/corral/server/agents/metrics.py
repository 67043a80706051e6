"""``metrics.k8s.io/v1beta1`` (``kubectl top``) and ``nodes/{name}/proxy/metrics[/resource]``, from the agents.

What metrics-server does, inside the server: NodeMetrics and PodMetrics are read from the agents
that measure them (``GET /stats`` on the agent's endpoint, which answers only the server), at most
``MAX_PARALLEL`` at once, each answer kept ``FRESH_SECONDS`` (agents measure every 10 s by default;
asking more often would learn nothing). Nodes without an agent endpoint (hollow nodes) or whose
agent does not answer are left out, as metrics-server leaves out nodes it cannot scrape. Nothing is
stored. RBAC judges these requests like any other (group ``metrics.k8s.io``, resources ``nodes`` and
``pods``; ``nodes/proxy`` for the Prometheus figures).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable

import aiohttp
import msgspec
from aiohttp import web

from corral.api.resources import by_kind
from corral.api.selectors import SelectorError, parse_label_selector
from corral.server import errors
from corral.server.agents.connector import AgentConnector, agent_endpoint

__all__ = ["MetricsAPI", "GROUP", "VERSION", "FRESH_SECONDS"]

log = logging.getLogger(__name__)

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
FRESH_SECONDS = 5.0
MAX_PARALLEL = 32
TIMEOUT_SECONDS = 3.0
MAX_STATS_BYTES = 8 << 20
_decode = msgspec.json.Decoder().decode
_NODES = by_kind("Node")


def _cpu(nanocores: int) -> str:
    return f"{int(nanocores)}n"


def _memory(bytes_: int) -> str:
    return f"{int(bytes_) // 1024}Ki"


class MetricsAPI:
    def __init__(self, api: Any, agents: AgentConnector) -> None:
        self.api = api
        self.agents = agents
        self._fetched: dict[str, tuple[float, dict[str, Any] | None]] = {}  # node → (when, its stats)
        self._inflight: dict[str, asyncio.Future] = {}
        self._limit = asyncio.Semaphore(MAX_PARALLEL)

    def add_routes(self, app: web.Application) -> None:
        base = f"/apis/{GROUP}/{VERSION}"
        app.router.add_get(f"{base}/nodes", self.list_nodes)
        app.router.add_get(f"{base}/nodes/{{name}}", self.get_node)
        app.router.add_get(f"{base}/pods", self.list_pods)
        app.router.add_get(f"{base}/namespaces/{{namespace}}/pods", self.list_pods)
        app.router.add_get(f"{base}/namespaces/{{namespace}}/pods/{{name}}", self.get_pod)
        app.router.add_get("/api/v1/nodes/{name}/proxy/metrics", self.proxy_resource_metrics)
        app.router.add_get("/api/v1/nodes/{name}/proxy/metrics/resource", self.proxy_resource_metrics)

    # --- reading the agents ---------------------------------------------------------------------------

    def _nodes(self, names: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
        """Nodes by name: every node, or those of ``names`` that exist (each looked up, not scanned for)."""
        if names is None:
            return {r.obj["metadata"]["name"]: r.obj for r in self.api.cache.items(_NODES.store_prefix)}
        found = ((n, self.api.cache.get(_NODES.key(None, n))) for n in names)
        return {n: record.obj for n, record in found if record is not None}

    async def _stats(self, name: str, node: dict[str, Any]) -> dict[str, Any] | None:
        known = self._fetched.get(name)
        if known is not None and time.monotonic() - known[0] < FRESH_SECONDS:
            return known[1]
        pending = self._inflight.get(name)
        if pending is None:  # one request per node, however many users ask at once
            pending = self._inflight[name] = asyncio.ensure_future(self._fetch(name, node))
            pending.add_done_callback(lambda _: self._inflight.pop(name, None))
        return await asyncio.shield(pending)

    async def _fetch(self, name: str, node: dict[str, Any]) -> dict[str, Any] | None:
        stats = None
        async with self._limit:
            try:
                async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)) as session:
                    async with session.get(self.agents.url(name, node, "stats"), ssl=self.agents.ssl_context(),
                                           server_hostname=name) as resp:
                        if resp.status == 200:
                            stats = _decode(await resp.content.read(MAX_STATS_BYTES))
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError, msgspec.DecodeError, errors.ApiError) as exc:
                log.debug("no usage from node %s: %s", name, exc)
        self._fetched[name] = (time.monotonic(), stats if isinstance(stats, dict) else None)
        return self._fetched[name][1]

    async def _all_stats(self, nodes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The agents' answers for ``nodes`` (by name), leaving out those that give none."""
        if len(self._fetched) > 2 * self.api.cache.count(_NODES.store_prefix) + 64:
            everyone = self._nodes()  # deleted nodes' answers go, once they outnumber the living
            for gone in [n for n in self._fetched if n not in everyone]:
                del self._fetched[gone]
        wanted = [(n, node) for n, node in nodes.items() if agent_endpoint(node) is not None]
        answers = await asyncio.gather(*(self._stats(n, node) for n, node in wanted))
        return {n: stats for (n, _), stats in zip(wanted, answers) if stats is not None}

    # --- NodeMetrics ----------------------------------------------------------------------------------

    @staticmethod
    def _node_metrics(node: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
        meta = node.get("metadata") or {}
        usage = stats.get("node") or {}
        return {"metadata": {"name": meta.get("name"), "creationTimestamp": stats.get("timestamp"),
                             "labels": meta.get("labels") or {}},
                "timestamp": stats.get("timestamp"), "window": f"{stats.get('windowSeconds', 0)}s",
                "usage": {"cpu": _cpu(usage.get("cpuNanoCores", 0)), "memory": _memory(usage.get("memoryBytes", 0))}}

    async def list_nodes(self, request: web.Request) -> web.Response:
        selector = _selector(request)
        nodes = {n: obj for n, obj in self._nodes().items() if selector.matches_object(obj)}
        stats = await self._all_stats(nodes)
        items = [self._node_metrics(nodes[n], s) for n, s in sorted(stats.items())]
        return _json({"kind": "NodeMetricsList", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {}, "items": items})

    async def get_node(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        nodes = self._nodes([name])
        stats = await self._all_stats(nodes)
        if name not in stats:
            raise errors.ApiError(404, "NotFound", f'nodemetrics.metrics.k8s.io "{name}" not found',
                                  {"name": name, "group": GROUP, "kind": "nodes"})
        return _json({"kind": "NodeMetrics", "apiVersion": f"{GROUP}/{VERSION}",
                      **self._node_metrics(nodes[name], stats[name])})

    # --- PodMetrics -----------------------------------------------------------------------------------

    async def _pod_metrics(self, namespace: str | None, name: str | None, request: web.Request) -> list[dict]:
        selector = _selector(request)
        res = by_kind("Pod")
        prefix = f"{res.store_prefix}{namespace}/" if namespace else None
        pods = [r.obj for r in self.api.cache.items(res.store_prefix, prefix)]
        pods = [p for p in pods if (name is None or p["metadata"]["name"] == name) and selector.matches_object(p)
                and (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("phase") == "Running"]
        stats = await self._all_stats(self._nodes(sorted({p["spec"]["nodeName"] for p in pods})))
        measured = {(p["namespace"], p["name"]): (s, p["containers"]) for s in stats.values() for p in s.get("pods", ())}
        items = []
        for pod in sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])):
            meta = pod["metadata"]
            found = measured.get((meta["namespace"], meta["name"]))
            if found is None:
                continue
            node_stats, containers = found
            items.append({
                "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                             "creationTimestamp": node_stats.get("timestamp"), "labels": meta.get("labels") or {}},
                "timestamp": node_stats.get("timestamp"), "window": f"{node_stats.get('windowSeconds', 0)}s",
                "containers": [{"name": c["name"], "usage": {"cpu": _cpu(c.get("cpuNanoCores", 0)),
                                                             "memory": _memory(c.get("memoryBytes", 0))}}
                               for c in containers]})
        return items

    async def list_pods(self, request: web.Request) -> web.Response:
        items = await self._pod_metrics(request.match_info.get("namespace"), None, request)
        return _json({"kind": "PodMetricsList", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {}, "items": items})

    async def get_pod(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        items = await self._pod_metrics(namespace, name, request)
        if not items:
            raise errors.ApiError(404, "NotFound", f'podmetrics.metrics.k8s.io "{namespace}/{name}" not found',
                                  {"name": name, "group": GROUP, "kind": "pods"})
        return _json({"kind": "PodMetrics", "apiVersion": f"{GROUP}/{VERSION}", **items[0]})

    # --- Prometheus, through the server ---------------------------------------------------------------

    async def proxy_resource_metrics(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        node = self._nodes([name]).get(name)
        if node is None:
            raise errors.ApiError(404, "NotFound", f'nodes "{name}" not found', {"name": name, "kind": "nodes"})
        url = self.agents.url(name, node, "metrics", "resource")
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_SECONDS * 2)) as session:
                async with session.get(url, ssl=self.agents.ssl_context(), server_hostname=name) as resp:
                    body = await resp.content.read(MAX_STATS_BYTES)
                    if resp.status != 200:
                        raise errors.ApiError(502, "InternalError", f"the agent of node {name} answered {resp.status}")
                    return web.Response(body=body, headers={"Content-Type": resp.headers.get(
                        "Content-Type", "text/plain; version=0.0.4; charset=utf-8")})
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise errors.ApiError(502, "InternalError", f"cannot reach the agent of node {name}: {exc}") from None


def _selector(request: web.Request):
    try:
        return parse_label_selector(request.query.get("labelSelector"))
    except SelectorError as exc:
        raise errors.bad_request(f"labelSelector: {exc}") from None


def _json(doc: dict[str, Any]) -> web.Response:
    return web.Response(body=msgspec.json.encode(doc), content_type="application/json")
