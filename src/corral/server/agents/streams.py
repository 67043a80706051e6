"""``pods/exec``, ``pods/attach`` and ``pods/portforward``: the user's stream, relayed to the pod's agent.

The user has been authenticated and authorised (``create`` on ``pods/exec``, ``pods/attach`` or
``pods/portforward``, as Kubernetes asks since WebSocket upgrades became the default) before this
runs. The server then opens its own WebSocket to the agent of the pod's node — the authenticated
channel of ``corral logs``: the server's client certificate, the agent's certificate checked to
name that node — and relays:

- **exec and attach** (``v5.channel.k8s.io``, or ``v4`` for the official Python client): messages
  both ways as they are; the agent speaks v5 and a v4 client never sends v5's close signal.
- **port-forward** (``SPDY/3.1+portforward.k8s.io``, kubectl ≥ 1.31): the SPDY session ends here
  (:mod:`corral.streaming.spdy`); each forwarded connection (an ``error`` and a ``data`` stream
  with the same ``requestid``) becomes one plain byte tunnel to the agent, which connects to the
  pod's port. Or ``v4.channel.k8s.io`` (the official Python client): one connection per port
  named in the query, on channels 2i (data) and 2i+1 (errors).

kubectl's older SPDY-only upgrade is refused with a 400 saying which protocol to use.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

from corral.aio import cancel_and_wait
from corral.api.resources import by_kind
from corral.server import errors
from corral.server.agents.connector import AgentConnector
from corral.server.http.params import is_true
from corral.streaming import channels, spdy

__all__ = ["exec_stream", "portforward_stream", "PORTFORWARD_PROTOCOL"]

log = logging.getLogger(__name__)

PORTFORWARD_PROTOCOL = "SPDY/3.1+portforward.k8s.io"
AGENT_PORTFORWARD_PROTOCOL = "portforward.corral.dev"
MAX_MESSAGE_BYTES = 1 << 20
_DATA_CHUNK = 32 * 1024
MAX_PENDING = 64  # data frames held per connection while its agent tunnel opens
MAX_TUNNELS = 128  # forwarded connections open at once in one port-forward session (and error streams waiting)
MAX_CHANNEL_PORTS = 64  # ports of one channel-protocol port-forward (two channels each, of 256)


def _offered(request: web.Request) -> list[str]:
    header = request.headers.get("Sec-WebSocket-Protocol", "")
    return [p.strip() for p in header.split(",") if p.strip()]


def _require_websocket(request: web.Request, protocols: tuple[str, ...], what: str) -> None:
    if request.headers.get("Upgrade", "").lower() != "websocket":
        raise errors.bad_request(f"{what} is served over WebSocket ({', '.join(protocols)}), as kubectl 1.31 and "
                                 "newer speak it; this request asked for "
                                 f"{request.headers.get('Upgrade') or 'no upgrade'}")
    if not set(_offered(request)) & set(protocols):
        raise errors.bad_request(f"{what}: none of the WebSocket subprotocols offered ({', '.join(_offered(request)) or 'none'}) "
                                 f"is spoken here ({', '.join(protocols)})")


async def _pod_on_node(api: Any, namespace: str, name: str) -> tuple[dict[str, Any], str, dict[str, Any] | None]:
    pod = (await api.current(by_kind("Pod"), namespace, name)).obj
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        raise errors.bad_request(f'pod "{name}" is not on a node yet')
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        raise errors.bad_request(f"cannot connect to a container in a completed pod; current phase is {phase}")
    node = api.cache.get(by_kind("Node").key(None, node_name))
    return pod, node_name, node.obj if node is not None else None


async def _connect(agents: AgentConnector, session: aiohttp.ClientSession, node_name: str,
                   node: dict[str, Any] | None, parts: tuple[str, ...], params: list[tuple[str, str]],
                   protocol: str) -> aiohttp.ClientWebSocketResponse:
    url = agents.url(node_name, node, *parts)
    try:
        return await session.ws_connect(url, params=params, protocols=(protocol,), ssl=agents.ssl_context(),
                                        server_hostname=node_name, max_msg_size=MAX_MESSAGE_BYTES, heartbeat=30)
    except aiohttp.WSServerHandshakeError as exc:
        status = 429 if exc.status == 429 else 502
        raise errors.ApiError(status, "TooManyRequests" if status == 429 else "InternalError",
                              f"the agent of node {node_name} refused the stream ({exc.status} {exc.message})") from None
    except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
        raise errors.ApiError(502, "InternalError", f"cannot reach the agent of node {node_name}: {exc}") from None


def _bytes_of(msg: aiohttp.WSMessage) -> bytes | None:
    """A client's channel message: binary, or text (the official Python client writes str stdin as
    text frames, the channel byte first)."""
    if msg.type == WSMsgType.BINARY:
        return msg.data
    if msg.type == WSMsgType.TEXT:
        return msg.data.encode()
    return None


def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=5))


async def exec_stream(request: web.Request, api: Any, agents: AgentConnector, namespace: str, name: str, *,
                      attach: bool = False) -> web.StreamResponse:
    """``GET pods/{name}/exec?command=…&container=&stdin=&stdout=&stderr=&tty=`` over WebSocket; with
    ``attach``, ``pods/{name}/attach`` (the same without a command: the container's own stdio)."""
    what = "attach" if attach else "exec"
    # What is wrong with the request itself first: a client whose upgrade failed asks again without
    # one to learn why (corral's CLI does), and must hear the same reason.
    pod, node_name, node = await _pod_on_node(api, namespace, name)
    containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or ()]
    container = request.query.get("container") or (containers[0] if containers else "")
    if container not in containers:
        raise errors.bad_request(f"container {container} is not valid for pod {name}, choose one of: {containers}")
    command = request.query.getall("command", [])
    if not command and not attach:
        raise errors.bad_request("you must specify at least one command for the container")
    _require_websocket(request, channels.PROTOCOLS, what)
    params = [("command", c) for c in command] + [(k, "true") for k in ("stdin", "tty") if is_true(request.query.get(k))]
    async with _session() as session:
        upstream = await _connect(agents, session, node_name, node, (what, namespace, name, container), params,
                                  channels.V5)
        ws = web.WebSocketResponse(protocols=channels.PROTOCOLS, max_msg_size=MAX_MESSAGE_BYTES)
        await ws.prepare(request)
        await _relay(ws, upstream)
    return ws


async def _relay(client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse) -> None:
    """Channel messages both ways (the client's text frames as bytes) until either side closes; then
    the other is closed too."""

    async def down() -> None:
        async for msg in upstream:
            if msg.type == WSMsgType.BINARY:
                await client.send_bytes(msg.data)

    async def up() -> None:
        async for msg in client:
            data = _bytes_of(msg)
            if data is not None:
                await upstream.send_bytes(data)

    tasks = [asyncio.ensure_future(down()), asyncio.ensure_future(up())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(*tasks)
        await upstream.close()
        await client.close()


async def portforward_stream(request: web.Request, api: Any, agents: AgentConnector, namespace: str,
                             name: str) -> web.StreamResponse:
    """``GET pods/{name}/portforward``: SPDY/3.1 tunnelled through a WebSocket, kubectl's way; or the
    channel protocol (``v4.channel.k8s.io``, ``?ports=P&ports=Q``), the official Python client's."""
    _, node_name, node = await _pod_on_node(api, namespace, name)
    _require_websocket(request, (PORTFORWARD_PROTOCOL, channels.V4), "port-forward")
    channel_ports = []
    if PORTFORWARD_PROTOCOL not in _offered(request):
        raw = request.query.getall("ports", [])
        channel_ports = [_port(p) for text in raw for p in text.split(",")]
        if not channel_ports or len(channel_ports) > MAX_CHANNEL_PORTS:
            raise errors.bad_request(f"port-forward over {channels.V4} needs 1 to {MAX_CHANNEL_PORTS} ports "
                                     "(?ports=P)")
    ws = web.WebSocketResponse(protocols=(PORTFORWARD_PROTOCOL, channels.V4), max_msg_size=MAX_MESSAGE_BYTES)
    await ws.prepare(request)
    async with _session() as session:
        def connect(port: int):
            return _connect(agents, session, node_name, node, ("portforward", namespace, name), [("port", str(port))],
                            AGENT_PORTFORWARD_PROTOCOL)

        if ws.ws_protocol == PORTFORWARD_PROTOCOL:
            await _Forwarder(ws, connect).run()
        else:
            await _forward_channels(ws, channel_ports, connect)
    return ws


def _port(text: str) -> int:
    text = text.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 5 and 0 < int(text) < 65536):
        raise errors.bad_request(f"invalid port {text[:20]!r}: a port is an integer in 1..65535")
    return int(text)


async def _forward_channels(ws: web.WebSocketResponse, ports: list[int], connect) -> None:
    """Kubernetes' WebSocket port-forward: port i's bytes on channel 2i, its errors on 2i+1, each
    channel's first message the port (two bytes, little-endian); one connection per port."""
    upstreams: list[aiohttp.ClientWebSocketResponse | None] = []
    for i, port in enumerate(ports):
        prefix = port.to_bytes(2, "little")
        await ws.send_bytes(bytes([2 * i]) + prefix)
        await ws.send_bytes(bytes([2 * i + 1]) + prefix)
        try:
            upstreams.append(await connect(port))
        except errors.ApiError as exc:
            await ws.send_bytes(bytes([2 * i + 1]) + exc.message.encode())
            upstreams.append(None)

    async def down(i: int, upstream: aiohttp.ClientWebSocketResponse) -> None:
        async for msg in upstream:
            if msg.type == WSMsgType.BINARY:
                await ws.send_bytes(bytes([2 * i]) + msg.data)
            elif msg.type == WSMsgType.TEXT and msg.data.startswith("error: "):
                await ws.send_bytes(bytes([2 * i + 1]) + msg.data[7:].encode())

    async def up() -> None:
        async for msg in ws:
            data = _bytes_of(msg)
            if data and data[0] % 2 == 0:
                upstream = upstreams[data[0] // 2] if data[0] // 2 < len(upstreams) else None
                if upstream is not None and not upstream.closed and len(data) > 1:
                    await upstream.send_bytes(data[1:])

    tasks = [asyncio.ensure_future(up())] + [asyncio.ensure_future(down(i, u)) for i, u in enumerate(upstreams)
                                            if u is not None]
    try:
        pending = set(tasks)  # over when the client leaves, or when every pod-side connection has ended
        while tasks[0] in pending and len(pending) > 1:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    finally:
        await cancel_and_wait(*tasks)
        for upstream in upstreams:
            if upstream is not None:
                await upstream.close()
        await ws.close()


class _Forwarder:
    """One kubectl port-forward session: SPDY in, a byte tunnel to the agent per forwarded connection."""

    def __init__(self, ws: web.WebSocketResponse, connect) -> None:
        self.ws = ws
        self.connect = connect
        self.reader = spdy.Reader()
        self.writer = spdy.Writer()
        self.error_streams: dict[str, int] = {}  # requestid → the error stream's id
        self.tunnels: dict[int, _Tunnel] = {}  # data stream id → its tunnel
        self.tasks: set[asyncio.Task] = set()

    async def send(self, frame: bytes) -> None:
        if not self.ws.closed:
            await self.ws.send_bytes(frame)

    async def run(self) -> None:
        try:
            async for msg in self.ws:
                if msg.type != WSMsgType.BINARY:
                    continue
                try:
                    frames = self.reader.feed(msg.data)
                except spdy.ProtocolError as exc:
                    log.info("port-forward ended: %s", exc)
                    await self.send(self.writer.goaway(0, 1))
                    break
                for frame in frames:
                    if await self.handle(frame) is False:
                        return
        finally:
            for tunnel in self.tunnels.values():
                await tunnel.close()
            await cancel_and_wait(*self.tasks)
            await self.ws.close()

    async def handle(self, frame: spdy.Frame) -> bool:
        if isinstance(frame, spdy.Ping):
            await self.send(self.writer.ping(frame.id))
        elif isinstance(frame, spdy.GoAway):
            return False
        elif isinstance(frame, spdy.SynStream):
            await self.open(frame)
        elif isinstance(frame, spdy.Data):
            tunnel = self.tunnels.get(frame.stream_id)
            if tunnel is not None:
                await tunnel.from_client(frame.data, frame.fin)
        elif isinstance(frame, spdy.RstStream):
            tunnel = self.tunnels.pop(frame.stream_id, None)
            if tunnel is not None:
                await tunnel.close()
        return True

    async def open(self, frame: spdy.SynStream) -> None:
        kind, request_id = frame.headers.get("streamtype"), frame.headers.get("requestid", "")
        if len(self.tunnels) >= MAX_TUNNELS or len(self.error_streams) >= MAX_TUNNELS:
            await self.send(self.writer.rst_stream(frame.stream_id, spdy.RST_REFUSED_STREAM))
            return
        await self.send(self.writer.syn_reply(frame.stream_id))
        if kind == "error":
            self.error_streams[request_id] = frame.stream_id
            return
        if kind != "data":
            await self.send(self.writer.rst_stream(frame.stream_id, spdy.RST_PROTOCOL_ERROR))
            return
        tunnel = _Tunnel(self, frame.stream_id, self.error_streams.pop(request_id, None))
        self.tunnels[frame.stream_id] = tunnel
        task = asyncio.ensure_future(tunnel.run(frame.headers.get("port", "")))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


class _Tunnel:
    """One forwarded connection: the data stream's bytes to and from the agent; what went wrong, if
    anything, on the error stream; both streams ended with FIN when the pod's side has ended."""

    def __init__(self, forwarder: _Forwarder, data_id: int, error_id: int | None) -> None:
        self.forwarder = forwarder
        self.data_id = data_id
        self.error_id = error_id
        self.upstream: aiohttp.ClientWebSocketResponse | None = None
        self.pending: list[bytes | None] = []  # what the client sent before the agent answered (None: its FIN)
        self.ready = asyncio.Event()

    async def run(self, port_text: str) -> None:
        send = self.forwarder.send
        error = ""
        try:
            try:
                self.upstream = await self.forwarder.connect(_port(port_text))
            except errors.ApiError as exc:  # not a port, or the agent out of reach
                error = exc.message
                return
            while self.pending:  # what came meanwhile, in order (more may arrive while sending)
                await self._to_agent(self.pending.pop(0))
            self.ready.set()
            async for msg in self.upstream:
                if msg.type == WSMsgType.BINARY:
                    for at in range(0, len(msg.data), _DATA_CHUNK):
                        await send(spdy.Writer.data(self.data_id, msg.data[at:at + _DATA_CHUNK]))
                elif msg.type == WSMsgType.TEXT and msg.data.startswith("error: "):
                    error = f"an error occurred forwarding {port_text} -> {port_text}: {msg.data[7:]}"
        finally:
            self.ready.set()
            if error and self.error_id is not None:
                await send(spdy.Writer.data(self.error_id, error.encode()))
            await send(spdy.Writer.data(self.data_id, b"", fin=True))
            if self.error_id is not None:
                await send(spdy.Writer.data(self.error_id, b"", fin=True))
            self.forwarder.tunnels.pop(self.data_id, None)
            await self.close()

    async def _to_agent(self, data: bytes | None) -> None:
        if self.upstream is None or self.upstream.closed:
            return
        if data is None:
            await self.upstream.send_str("eof")
        elif data:
            await self.upstream.send_bytes(data)

    async def from_client(self, data: bytes, fin: bool) -> None:
        if not self.ready.is_set():
            if len(self.pending) >= MAX_PENDING:  # a client that will not wait for the agent
                await self.close()
                return
            self.pending.append(data)
            if fin:
                self.pending.append(None)
            return
        await self._to_agent(data)
        if fin:
            await self._to_agent(None)

    async def close(self) -> None:
        if self.upstream is not None and not self.upstream.closed:
            await self.upstream.close()
