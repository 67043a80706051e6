"""The agent's end of ``kubectl exec`` and ``port-forward``: WebSockets from the API server only.

Served beside the container logs, on the same TLS endpoint that answers nothing but the API
server's client certificate (see ``Agent._serve_logs``). The server terminates the user's protocol
and authorises the user; what reaches here is already allowed.

- ``GET /exec/{namespace}/{pod}/{container}?command=…&stdin=&tty=``: the channel protocol, v5
  (:mod:`corral.streaming.channels`), the command run by the runtime in the container;
  ``/attach/…`` the same for the container's own stdio (its output from now on, its stdin if open).
- ``GET /portforward/{namespace}/{pod}?port=P``: one forwarded connection. Binary messages are the
  bytes, both ways; the server's text message ``eof`` says the user's side has finished writing;
  the agent closes the WebSocket when the pod's side has, after a text message ``error: …`` if the
  connection failed.

At most ``MAX_SESSIONS`` at once (429 past it), each released when it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from corral.agent.runtimes.base import StreamError
from corral.aio import cancel_and_wait
from corral.streaming import channels

if TYPE_CHECKING:
    from corral.agent.agent import Agent

__all__ = ["StreamEndpoints", "MAX_SESSIONS", "PORTFORWARD_PROTOCOL"]

MAX_SESSIONS = 64
PORTFORWARD_PROTOCOL = "portforward.corral.dev"
_CHUNK = 32 * 1024


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "").lower() in ("true", "1")


class StreamEndpoints:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.sessions = 0
        self.max_sessions = MAX_SESSIONS

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/exec/{namespace}/{pod}/{container}", self.exec)
        app.router.add_get("/attach/{namespace}/{pod}/{container}", self.exec)
        app.router.add_get("/portforward/{namespace}/{pod}", self.portforward)

    def _running(self, namespace: str, pod: str, container: str | None):
        """(pod entry, container spec, ContainerRef) of a running container, or why there is none.
        Told in the stream (after the upgrade), where the server passes it on to the user."""
        entry = next((p for p in self.agent.pods.values() if p.namespace == namespace and p.name == pod), None)
        if entry is None:
            return f'pod "{namespace}/{pod}" is not on node {self.agent.config.name}'
        specs = {c.get("name"): c for c in (entry.machine.pod.get("spec") or {}).get("containers") or ()}
        name = container if container is not None else next((n for n in entry.refs if n in specs), None)
        if name is None:
            return f"pod {pod} has no running container"
        if name not in specs:
            return f'container "{name}" is not in pod {pod} (it has: {", ".join(specs)})'
        ref = entry.refs.get(name)
        if ref is None:
            return f"container {name} is not running"
        return entry, entry.prepared.get(name, specs[name]), ref  # as started: its environment resolved

    @contextlib.contextmanager
    def _session(self):
        self.sessions += 1
        try:
            yield
        finally:
            self.sessions -= 1

    def _busy(self) -> web.Response | None:
        if self.sessions >= self.max_sessions:
            return web.json_response({"message": f"node {self.agent.config.name} has {self.sessions} exec and "
                                                 "port-forward sessions open already; try again later"},
                                     status=429, headers={"Retry-After": "1"})
        return None

    async def exec(self, request: web.Request) -> web.StreamResponse:
        busy = self._busy()
        if busy is not None:
            return busy
        ws = web.WebSocketResponse(protocols=(channels.V5,), max_msg_size=1 << 20)
        await ws.prepare(request)
        found = self._running(request.match_info["namespace"], request.match_info["pod"],
                              request.match_info["container"])
        if isinstance(found, str):
            await ws.send_bytes(channels.failure(found))
            await ws.close()
            return ws
        entry, spec, ref = found
        with self._session():
            stdin, tty = _flag(request, "stdin"), _flag(request, "tty")
            try:
                if request.path.startswith("/attach/"):
                    session = await self.agent.runtime.attach(ref, entry.machine.pod, spec, stdin=stdin, tty=tty)
                else:
                    session = await self.agent.runtime.exec(ref, entry.machine.pod, spec,
                                                            request.query.getall("command", []), stdin=stdin, tty=tty)
            except StreamError as exc:
                await ws.send_bytes(channels.failure(str(exc)))
                await ws.close()
                return ws
            feeding = asyncio.ensure_future(self._feed(ws, session))
            try:
                async for channel, data in session.output():
                    await ws.send_bytes(bytes([channel]) + data)
                code = await session.wait()
                await ws.send_bytes(channels.exit_status(code))
            except (ConnectionResetError, asyncio.CancelledError):
                pass
            finally:
                await cancel_and_wait(feeding)
                await session.close()
                await ws.close()
        return ws

    @staticmethod
    async def _feed(ws: web.WebSocketResponse, session: Any) -> None:
        """The client's stdin, resizes and close signal, until the WebSocket closes (then the command
        is ended: nobody is left to read what it says)."""
        async for msg in ws:
            if msg.type != WSMsgType.BINARY or not msg.data:
                continue
            channel, data = msg.data[0], msg.data[1:]
            if channel == channels.STDIN:
                await session.write(data)
            elif channel == channels.RESIZE:
                size = channels.resize_of(data)
                if size is not None:
                    session.resize(*size)
            elif channel == channels.CLOSE and data[:1] == bytes([channels.STDIN]):
                await session.close_stdin()
        await session.close()

    async def portforward(self, request: web.Request) -> web.StreamResponse:
        busy = self._busy()
        if busy is not None:
            return busy
        raw = request.query.get("port", "")
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 5 and 0 < int(raw) < 65536):
            return web.json_response({"message": f"port must be an integer in 1..65535, got {raw[:20]!r}"},
                                     status=400)
        ws = web.WebSocketResponse(protocols=(PORTFORWARD_PROTOCOL,), max_msg_size=1 << 20)
        await ws.prepare(request)
        found = self._running(request.match_info["namespace"], request.match_info["pod"], None)
        if isinstance(found, str):
            await ws.send_str(f"error: {found}")
            await ws.close()
            return ws
        entry, _, ref = found
        with self._session():
            try:
                host, port = await self.agent.runtime.port_address(ref, entry.machine.pod, int(raw))
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
            except (StreamError, OSError, asyncio.TimeoutError) as exc:
                reason = str(exc) if isinstance(exc, StreamError) else f"cannot connect to port {raw}: {exc or 'timeout'}"
                await ws.send_str(f"error: {reason}")
                await ws.close()
                return ws
            upstream = asyncio.ensure_future(self._to_pod(ws, writer))
            try:
                while chunk := await reader.read(_CHUNK):
                    await ws.send_bytes(chunk)
            except (ConnectionResetError, asyncio.CancelledError):
                pass
            finally:
                await cancel_and_wait(upstream)
                writer.close()
                await ws.close()
        return ws

    @staticmethod
    async def _to_pod(ws: web.WebSocketResponse, writer: asyncio.StreamWriter) -> None:
        async for msg in ws:
            if msg.type == WSMsgType.BINARY:
                writer.write(msg.data)
                await writer.drain()
            elif msg.type == WSMsgType.TEXT and msg.data == "eof" and writer.can_write_eof():
                writer.write_eof()
        writer.close()
