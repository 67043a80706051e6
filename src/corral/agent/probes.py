"""Probes: the agent's checks of its running containers, as kubelet runs them.

For each probe a container declares (``startupProbe``, ``livenessProbe``, ``readinessProbe``), one
task per run of the container: after ``initialDelaySeconds``, every ``periodSeconds`` it runs the
probe, given ``timeoutSeconds``, and counts results in a row; ``successThreshold`` successes or
``failureThreshold`` failures in a row are told to the pod's state machine (a
:class:`~corral.agent.machine.Probed` event), which reports ``ready`` and ``started`` and kills a
container whose liveness (or startup) probe fails. Liveness and readiness probes wait for the
startup probe to pass; the startup probe stops once it has.

Handlers: ``exec`` (the command in the container, through the runtime; exit 0 passes), ``httpGet``
(2xx and 3xx pass; HTTPS without verifying the certificate, as kubelet), ``tcpSocket`` (a connection
opens). The address is the pod's IP, as the runtime reaches it (``port_address``: the container's own
for docker; for the process runtime the node's, and only a port the pod declares); a named port is
looked up in the container's ports; ``grpc`` (gRPC's health check service; SERVING passes).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

import aiohttp

from corral.agent import machine as m
from corral.agent.runtimes.base import ContainerRef, Runtime, StreamError

__all__ = ["Prober", "KINDS"]

log = logging.getLogger(__name__)

KINDS = (("startup", "startupProbe"), ("liveness", "livenessProbe"), ("readiness", "readinessProbe"))
MAX_MESSAGE = 1024  # of an exec probe's output or an HTTP answer, in the event that reports a failure


def _as_reported(machine: m.PodMachine) -> dict[str, Any]:
    """The pod with the IP this node gives it (the server's copy may not carry it yet, and a probe
    of another pod's address would pass for this one)."""
    pod = machine.pod
    if machine.host_ip:
        pod = {**pod, "status": {**(pod.get("status") or {}), "podIP": machine.host_ip}}
    return pod


def _port(container: dict[str, Any], port: int | str) -> int | None:
    if isinstance(port, int):
        return port
    return next((p.get("containerPort") for p in container.get("ports") or () if p.get("name") == port), None)


class Prober:
    """Runs the probes of the containers the agent started; ``feed(entry, event)`` tells the machine."""

    def __init__(self, runtime: Runtime, feed: Callable[[Any, m.Event], None], clock: Callable[[], float]) -> None:
        self.runtime = runtime
        self._feed = feed
        self._clock = clock
        self._tasks: dict[tuple[str, str], list[asyncio.Task]] = {}  # (pod uid, container) → its probes
        self._session: aiohttp.ClientSession | None = None

    def watch(self, entry: Any, ref: ContainerRef, container: dict[str, Any]) -> None:
        """Begin probing a container that has just started (or been adopted)."""
        self.forget(ref.pod_uid, ref.container)
        tasks = [asyncio.create_task(self._loop(entry, ref, container, kind, container[field]),
                                     name=f"probe-{kind}-{ref.pod_key}-{ref.container}")
                 for kind, field in KINDS if isinstance(container.get(field), dict)]
        if tasks:
            self._tasks[(ref.pod_uid, ref.container)] = tasks

    def forget(self, pod_uid: str, container: str | None = None) -> None:
        """Stop probing one container of a pod (it exited), or all of them (``container`` None)."""
        keys = [k for k in self._tasks if k[0] == pod_uid and (container is None or k[1] == container)]
        for key in keys:
            for task in self._tasks.pop(key):
                task.cancel()

    async def close(self) -> None:
        for key in list(self._tasks):
            self.forget(*key)
        if self._session is not None:
            await self._session.close()

    async def _loop(self, entry: Any, ref: ContainerRef, container: dict[str, Any], kind: str,
                    probe: dict[str, Any]) -> None:
        period = max(float(probe.get("periodSeconds") or 10), 0.1)
        successes_needed = int(probe.get("successThreshold") or 1)
        failures_needed = int(probe.get("failureThreshold") or 3)
        await asyncio.sleep(float(probe.get("initialDelaySeconds") or 0))
        successes = failures = 0
        told: bool | None = None
        while True:
            if kind != "startup" and not entry.machine.started(ref.container):
                await asyncio.sleep(min(period, 1.0))  # the startup probe has not passed yet
                continue
            ok, message = await self.check(_as_reported(entry.machine), ref, container, probe)
            successes, failures = (successes + 1, 0) if ok else (0, failures + 1)
            verdict = True if successes >= successes_needed else False if failures >= failures_needed else None
            if verdict is not None and (verdict != told or not verdict):
                told = verdict
                self._feed(entry, m.Probed(ref.container, ref.id, kind, verdict, message, self._clock()))
                if kind == "startup" and verdict:
                    return  # started: liveness and readiness take over
                if not verdict and kind in ("liveness", "startup"):
                    failures = 0  # the container is being killed: this task ends with it
            await asyncio.sleep(period)

    async def check(self, pod: dict[str, Any], ref: ContainerRef, container: dict[str, Any],
                    probe: dict[str, Any]) -> tuple[bool, str]:
        """Run ``probe`` once: (passed, what happened)."""
        timeout = max(float(probe.get("timeoutSeconds") or 1), 0.1)
        try:
            if isinstance(probe.get("exec"), dict):
                return await self._exec(pod, ref, container, probe["exec"].get("command") or [], timeout)
            handler = next((probe[k] for k in ("httpGet", "tcpSocket", "grpc") if isinstance(probe.get(k), dict)), None)
            if not isinstance(handler, dict):
                return False, "the probe has no handler corral runs"
            port = _port(container, handler.get("port", 0))
            if port is None:
                return False, f"port {handler.get('port')!r} is not a named port of the container"
            host = handler.get("host") or (await self.runtime.port_address(ref, pod, port, probe=True))[0]
            if isinstance(probe.get("httpGet"), dict):
                return await self._http(host, port, handler, timeout)
            if isinstance(probe.get("grpc"), dict):
                return await _grpc_health(host, port, handler.get("service") or "", timeout)
            return await self._tcp(host, port, timeout)
        except StreamError as exc:
            return False, str(exc)

    async def _exec(self, pod: dict[str, Any], ref: ContainerRef, container: dict[str, Any], command: list[str],
                    timeout: float) -> tuple[bool, str]:
        session = await self.runtime.exec(ref, pod, container, command, stdin=False, tty=False)
        output = bytearray()

        async def run() -> int:
            async for _, chunk in session.output():
                if len(output) < MAX_MESSAGE:
                    output.extend(chunk[:MAX_MESSAGE - len(output)])
            return await session.wait()

        try:
            code = await asyncio.wait_for(run(), timeout)
        except asyncio.TimeoutError:
            return False, f"command timed out after {timeout:g}s"
        finally:
            await session.close()
        said = output.decode("utf-8", "replace").strip()
        return code == 0, said or f"command exited with {code}"

    async def _http(self, host: str, port: int, handler: dict[str, Any], timeout: float) -> tuple[bool, str]:
        if self._session is None:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=False, force_close=True))
        scheme = (handler.get("scheme") or "HTTP").lower()
        path = handler.get("path") or "/"
        url = f"{scheme}://{host if ':' not in host else f'[{host}]'}:{port}{path if path.startswith('/') else '/' + path}"
        headers = {"User-Agent": "kube-probe/corral", "Accept": "*/*"}
        headers.update({h["name"]: h.get("value", "") for h in handler.get("httpHeaders") or () if h.get("name")})
        try:
            async with self._session.get(url, headers=headers, allow_redirects=False,
                                         timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                body = (await resp.content.read(MAX_MESSAGE)).decode("utf-8", "replace")
                if 200 <= resp.status < 400:
                    return True, ""
                return False, f"HTTP probe failed with statuscode: {resp.status}" + (f": {body}" if body else "")
        except asyncio.TimeoutError:
            return False, f'Get "{url}": context deadline exceeded (timeout {timeout:g}s)'
        except (aiohttp.ClientError, OSError) as exc:
            return False, f'Get "{url}": {exc}'

    async def _tcp(self, host: str, port: int, timeout: float) -> tuple[bool, str]:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            return False, f"dial tcp {host}:{port}: {exc or 'i/o timeout'}"
        writer.close()
        return True, ""


_SERVING = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


async def _grpc_health(host: str, port: int, service: str, timeout: float) -> tuple[bool, str]:
    """gRPC's standard health check (``grpc.health.v1.Health/Check``), as kubelet's grpc probe asks
    it: SERVING passes. The two one-field messages are written and read here, not generated."""
    from corral.aio import without_grpc_fork_handlers

    without_grpc_fork_handlers()
    import grpc
    import grpc.aio

    name = service.encode()
    request = b"\x0a" + _varint(len(name)) + name if name else b""
    target = f"{host if ':' not in host else f'[{host}]'}:{port}"
    async with grpc.aio.insecure_channel(target) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=None,
                                    response_deserializer=None)
        try:
            answer = await check(request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            return False, f"failed to connect service {target!r} within {timeout:g}s: {exc.code().name}: {exc.details()}"
    status = answer[1] if len(answer) >= 2 and answer[0] == 0x08 else 0  # field 1, a varint (the enum fits a byte)
    if status == 1:
        return True, ""
    return False, f"service unhealthy (responded with \"{_SERVING.get(status, status)}\")"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)
