"""``pods/{name}/log``: a container's output, read from the agent of the pod's node and streamed on."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from corral.api.wire.decoding import DecodeError, decode_json
from corral.server import errors
from corral.server.agents.connector import AgentConnector
from corral.server.http.params import flag, int_param

__all__ = ["proxy_logs"]


async def proxy_logs(request: web.Request, api: Any, agents: AgentConnector, namespace: str,
                     name: str) -> web.StreamResponse:
    """``GET pods/{name}/log``: stream the container's output from the agent of the pod's node."""
    import aiohttp

    from corral.api.resources import by_kind

    pod = (await api.current(by_kind("Pod"), namespace, name)).obj
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        raise errors.bad_request(f'pod "{name}" is not on a node yet: no logs to show')
    containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or ()]
    inits = [c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or ()]
    container = request.query.get("container") or (containers[0] if len(containers) == 1 else "")
    if not container:
        raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: {containers}"
                                 + (f" or one of the init containers: {inits}" if inits else ""))
    if container not in containers and container not in inits:
        raise errors.bad_request(f"container {container} is not valid for pod {name}, choose one of: {containers}"
                                 + (f" or one of the init containers: {inits}" if inits else ""))
    node = api.cache.get(by_kind("Node").key(None, node_name))
    url = agents.url(node_name, node.obj if node is not None else None, "containerLogs", namespace, name, container)
    params = {}
    if flag(request, "follow"):
        params["follow"] = "true"
    if flag(request, "previous"):
        params["previous"] = "true"
    since = int_param(request, "sinceSeconds")
    if since is not None:
        if since < 1:
            raise errors.bad_request(f"sinceSeconds must be at least 1, got {since}")
        params["sinceSeconds"] = str(since)
    tail = int_param(request, "tailLines")
    if tail is not None:
        params["tailLines"] = str(max(tail, 0))
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5)) as session:
            # The agent must prove to be this node: its certificate names it (checked in the handshake).
            async with session.get(url, params=params, ssl=agents.ssl_context(), server_hostname=node_name) as upstream:
                if upstream.status != 200:
                    text = (await upstream.content.read(4096)).decode("utf-8", "replace")
                    reason = {400: "BadRequest", 404: "NotFound", 429: "TooManyRequests"}.get(upstream.status,
                                                                                              "InternalError")
                    try:  # the agent answers {"message": ...}
                        answer = decode_json(text.encode())
                        text = answer.get("message", text) if isinstance(answer, dict) else text
                    except DecodeError:
                        pass
                    raise errors.ApiError(upstream.status if upstream.status < 500 else 502, reason, text.strip())
                resp = web.StreamResponse(headers={"Content-Type": "text/plain; charset=utf-8"})
                resp.enable_chunked_encoding()
                await resp.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await resp.write(chunk)
                return resp
    except aiohttp.ClientError as exc:
        raise errors.ApiError(502, "InternalError", f"cannot reach the agent of node {node_name}: {exc}") from None
