"""The scheduler in a process of its own beside the server (``corral server --scheduler-process``).

Python runs one thread at a time, so a scheduler inside the server shares one core with everything
else the server does; in a child process it has the second core to itself. The server feeds it what
:func:`~corral.scheduler.sources.attach_in_process` feeds the scheduler inside it (namespaces,
nodes, budgets, pod groups, pods, placements: the state, then every change), as the stored JSON the
watch cache already holds, over the child's standard input; the child sends its writes (bindings,
status patches, events, deletions) back over its standard output, and the server does them through
its REST layer, as :class:`~corral.scheduler.cluster.InProcessWriter` does for the scheduler inside
it (with the leader's fence). Both directions go in batches: one frame per turn of either event loop.

If the child exits, the server starts another after ``restart_delay`` and feeds it the state anew
(pods it had assumed but not bound are pending again, and it places them). Explanations, plans
(the pods the server expanded and admitted, decided on a copy of the child's state) and the
scheduler's metrics are asked of the child, each question after every change the server had seen.

Frames: a 4-byte big-endian length, then a msgpack array whose first item names it.
Server → child: ``["changes", [[resource, key, json-or-nil], ...]]``, ``["replies", [[id, ok, result], ...]]``,
``["ask", id, what, argument]``. Child → server: ``["requests", [[id, op, args], ...]]``,
``["answer", id, ok, result]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import os
import signal
import struct
import sys
from typing import Any

import msgspec

from corral.store.base import Event, EventType

__all__ = ["SchedulerProcess", "ChannelWriter", "PodRef", "child_args"]

log = logging.getLogger(__name__)

# What the child is fed, in this order at start (namespaces and nodes before the pods that need them),
# with the Scheduler method each resource's changes go to.
RESOURCES = (("/core/namespaces/", "namespace_changed"), ("/core/nodes/", "node_changed"),
             ("/policy/poddisruptionbudgets/", "budget_changed"),
             ("/scheduling.corral.dev/podgroups/", "group_changed"), ("/core/pods/", "pod_changed"),
             ("/placement.corral.dev/placements/", "placement_changed"))
_PODS = 4  # RESOURCES' index of pods

_LENGTH = struct.Struct("!I")
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode
_READ_LIMIT = 2 ** 30  # a frame holds a batch of changes: the whole state, at start


def _frame(message: Any) -> bytes:
    data = _encode(message)
    return _LENGTH.pack(len(data)) + data


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    size = _LENGTH.unpack(await reader.readexactly(_LENGTH.size))[0]
    return _decode(await reader.readexactly(size))


class PodRef:
    """What a :class:`~corral.scheduler.cluster.ClusterWriter` reads of a pod: its namespace, name and uid."""

    __slots__ = ("namespace", "name", "uid")

    def __init__(self, namespace: str, name: str, uid: str) -> None:
        self.namespace, self.name, self.uid = namespace, name, uid


class _Child:
    """One run of the child process and what is on its way to it."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.outbox: list[Any] = []  # changes not yet sent
        self.replies: list[Any] = []
        self.asked: dict[int, asyncio.Future] = {}


class SchedulerProcess:
    """The server's side: starts the child, feeds it, does its writes, restarts it if it exits.

    ``writer`` is the server's :class:`~corral.scheduler.cluster.InProcessWriter`; ``child_args`` are
    the child's command-line options (its configuration file and the server's heartbeat settings)."""

    def __init__(self, watch_cache: Any, writer: Any, child_args: list[str], *, restart_delay: float = 1.0,
                 ask_timeout: float = 10.0) -> None:
        self.cache = watch_cache
        self.writer = writer
        self.child_args = child_args
        self.restart_delay = restart_delay
        self.ask_timeout = ask_timeout
        self._child: _Child | None = None
        self._ids = itertools.count()
        self._supervisor: asyncio.Task | None = None
        self._writes: set[asyncio.Task] = set()
        self._stopping = False

    # --- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        self.cache.on_event.append(self._on_event)
        self._supervisor = asyncio.create_task(self._supervise(), name="scheduler-process")

    def detach(self) -> None:
        """Stop following the watch cache (the first step of stopping)."""
        if self._on_event in self.cache.on_event:
            self.cache.on_event.remove(self._on_event)

    async def stop(self) -> None:
        from corral.aio import cancel_and_wait

        self._stopping = True
        self.detach()
        await cancel_and_wait(self._supervisor)
        await self._end(self._child)
        await cancel_and_wait(*self._writes)

    @property
    def pid(self) -> int | None:
        """The running child's process id (None between two runs)."""
        return self._child.proc.pid if self._child is not None else None

    async def _supervise(self) -> None:
        while not self._stopping:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "corral.scheduler.process", *self.child_args,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=_READ_LIMIT)
            child = self._child = _Child(proc)
            # The state now, then (from _on_event) every change the watch cache applies after it.
            child.outbox = [[i, record.key[len(prefix):], record.value]
                            for i, (prefix, _) in enumerate(RESOURCES) for record in self.cache.items(prefix)]
            self._send_changes(child)
            try:
                await self._serve(child)
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                self._child = None
                for fut in child.asked.values():
                    if not fut.done():
                        fut.set_exception(RuntimeError("the scheduler process exited"))
                await self._end(child)
            if not self._stopping:
                log.warning("the scheduler process exited (code %s); starting another in %.0f s",
                            proc.returncode, self.restart_delay)
                await asyncio.sleep(self.restart_delay)

    async def _end(self, child: _Child | None) -> None:
        if child is None or child.proc.returncode is not None:
            return
        try:
            child.proc.stdin.close()  # the child exits when its input ends
            await asyncio.wait_for(child.proc.wait(), 5)
        except (asyncio.TimeoutError, ConnectionError):
            child.proc.kill()
            await child.proc.wait()

    # --- to the child -----------------------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        child = self._child
        if child is None:  # between two runs: the next one is fed the state as it is then
            return
        key = event.record.key
        for i, (prefix, _) in enumerate(RESOURCES):
            if key.startswith(prefix):
                if not child.outbox:
                    asyncio.get_running_loop().call_soon(self._send_changes, child)
                child.outbox.append([i, key[len(prefix):],
                                     None if event.type is EventType.DELETED else event.record.value])
                return

    def _send_changes(self, child: _Child) -> None:
        if not child.outbox:  # sent already, ahead of a question
            return
        batch, child.outbox = child.outbox, []
        self._write(child, ["changes", batch])

    def _write(self, child: _Child, message: Any) -> None:
        if child.proc.returncode is None and not child.proc.stdin.is_closing():
            child.proc.stdin.write(_frame(message))

    async def ask(self, what: str, argument: Any = None, *, timeout: float | None = None) -> Any:
        """The child's answer to ``what`` ("explain" a pod, a "plan", the "plan_version", its
        "metrics"), given once it has every change this server has seen (those waiting for the end
        of this loop turn go first). Raises :class:`LookupError` for a question it refused."""
        child = self._child
        if child is None:
            raise RuntimeError("the scheduler process is starting again")
        ask_id = next(self._ids)
        fut = child.asked[ask_id] = asyncio.get_running_loop().create_future()
        self._send_changes(child)
        self._write(child, ["ask", ask_id, what, argument])
        try:
            return await asyncio.wait_for(fut, self.ask_timeout if timeout is None else timeout)
        finally:
            child.asked.pop(ask_id, None)

    async def explain_with_extenders(self, pod: dict[str, Any]) -> dict[str, Any]:
        return await self.ask("explain", pod)

    async def metrics_text(self) -> bytes:
        """The child's metrics in Prometheus' text format (nothing while it starts again)."""
        try:
            return await self.ask("metrics")
        except (RuntimeError, asyncio.TimeoutError):
            return b""

    def update_gauges(self) -> None:
        """The child updates its gauges when asked for its metrics."""

    # --- from the child ---------------------------------------------------------------------------------

    async def _serve(self, child: _Child) -> None:
        while True:
            message = await _read_frame(child.proc.stdout)
            if message[0] == "requests":
                binds = []  # the frame's bindings are written together, in one task
                for request_id, op, args in message[1]:
                    if op == "bind":
                        binds.append((request_id, args))
                    else:
                        self._spawn(self._do(child, request_id, op, args))
                if binds:
                    self._spawn(self._bind(child, binds))
            elif message[0] == "answer":
                _, ask_id, ok, result = message
                fut = child.asked.get(ask_id)
                if fut is None or fut.done():
                    continue
                if ok:
                    fut.set_result(result)
                else:  # a question the scheduler refused (a pod it cannot explain)
                    fut.set_exception(LookupError(result))

    def _spawn(self, write: Any) -> None:
        task = asyncio.create_task(write)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _bind(self, child: _Child, binds: list[tuple[int, list]]) -> None:
        """Bindings (``[request_id, [namespace, name, uid, node]]``), through the writer's ``bind_many``."""
        try:
            statuses = await self.writer.bind_many([(PodRef(namespace, name, uid), node)
                                                    for _, (namespace, name, uid, node) in binds])
            replies = [[request_id, True, [int(status.code), list(status.reasons), status.plugin]]
                       for (request_id, _), status in zip(binds, statuses)]
        except Exception as exc:  # the child's writer raises it there, as the in-process writer would here
            replies = [[request_id, False, f"{type(exc).__name__}: {exc}"] for request_id, _ in binds]
        self._reply(child, replies)

    async def _do(self, child: _Child, request_id: int, op: str, args: list) -> None:
        w = self.writer
        try:
            if op == "patch_status":
                namespace, name, uid, patch, strategic = args
                result = await w.patch_status(PodRef(namespace, name, uid), patch, strategic=strategic)
            elif op == "delete_pod":
                result = await w.delete_pod(PodRef(*args))
            elif op == "create_event":
                result = await w.create_event(*args)
            elif op == "patch_event":
                result = await w.patch_event(*args)
            elif op == "patch_object_status":
                result = await w.patch_object_status(*args)
            else:
                raise ValueError(f"unknown request {op!r}")
            reply = [request_id, True, result]
        except Exception as exc:  # the child's writer raises it there, as the in-process writer would here
            reply = [request_id, False, f"{type(exc).__name__}: {exc}"]
        self._reply(child, [reply])

    def _reply(self, child: _Child, replies: list) -> None:
        if not child.replies:
            asyncio.get_running_loop().call_soon(self._send_replies, child)
        child.replies += replies

    def _send_replies(self, child: _Child) -> None:
        batch, child.replies = child.replies, []
        self._write(child, ["replies", batch])


# --- the child --------------------------------------------------------------------------------------------


class WriteFailed(RuntimeError):
    """A write the server did for the child failed there (its message says how)."""


class ChannelWriter:
    """The child's :class:`~corral.scheduler.cluster.ClusterWriter`: each write a request to the server."""

    def __init__(self, out: asyncio.StreamWriter) -> None:
        self.out = out
        self._ids = itertools.count()
        self._waiting: dict[int, asyncio.Future] = {}
        self._outbox: list[Any] = []

    def _request(self, op: str, args: list) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        request_id = next(self._ids)
        fut = self._waiting[request_id] = loop.create_future()
        if not self._outbox:
            loop.call_soon(self._send)
        self._outbox.append([request_id, op, args])
        return fut

    def _send(self) -> None:
        batch, self._outbox = self._outbox, []
        self.out.write(_frame(["requests", batch]))

    def replied(self, batch: list) -> None:
        for request_id, ok, result in batch:
            fut = self._waiting.pop(request_id, None)
            if fut is None or fut.done():
                continue
            if ok:
                fut.set_result(result)
            else:
                fut.set_exception(WriteFailed(result))

    async def bind(self, pod: Any, node: str) -> Any:
        from corral.scheduler.framework.status import Code, Status

        code, reasons, plugin = await self._request("bind", [pod.namespace, pod.name, pod.uid, node])
        return Status(Code(code), tuple(reasons), plugin)

    async def patch_status(self, pod: Any, patch: dict[str, Any], *, strategic: bool = False) -> None:
        await self._request("patch_status", [pod.namespace, pod.name, pod.uid, patch, strategic])

    async def delete_pod(self, pod: Any) -> bool:
        return await self._request("delete_pod", [pod.namespace, pod.name, pod.uid])

    async def create_event(self, namespace: str, event: dict[str, Any]) -> int:
        return await self._request("create_event", [namespace, event])

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        await self._request("patch_event", [namespace, name, patch])

    async def patch_object_status(self, kind: str, namespace: str, name: str, patch: dict[str, Any]) -> None:
        await self._request("patch_object_status", [kind, namespace, name, patch])


def child_args(config_path: str | None, node_heartbeat_seconds: float, max_node_heartbeats: float) -> list[str]:
    """The child's options for the server's scheduler configuration and heartbeat settings."""
    args = ["--node-heartbeat", repr(node_heartbeat_seconds), "--max-node-heartbeats", repr(max_node_heartbeats)]
    return [*args, "--config", config_path] if config_path else args


async def _answer(scheduler: Any, what: str, argument: Any) -> Any:
    if what == "explain":
        return await scheduler.explain_with_extenders(argument)
    if what == "plan":
        from corral.plan.place import place_asked

        return await place_asked(scheduler, argument)
    if what == "plan_version":
        from corral.plan.place import version_of

        return version_of(scheduler)
    if what == "metrics":
        from prometheus_client import generate_latest

        scheduler.update_gauges()
        return generate_latest(scheduler.metrics.registry)
    raise LookupError(f"unknown question {what!r}")


async def _reply(out: asyncio.StreamWriter, scheduler: Any, ask_id: int, what: str, argument: Any) -> None:
    try:
        answer = ["answer", ask_id, True, await _answer(scheduler, what, argument)]
    except Exception as exc:  # a question it cannot answer (a pod explain refuses)
        answer = ["answer", ask_id, False, str(exc)]
    out.write(_frame(answer))


async def _run_child(args: argparse.Namespace) -> None:
    import gc

    from prometheus_client import CollectorRegistry, ProcessCollector

    from corral.memory import CollectorMetrics, IdleCollector
    from corral.scheduler.profiles import load_config, with_heartbeats
    from corral.scheduler.scheduler import Scheduler

    config = with_heartbeats(load_config(args.config), args.node_heartbeat, args.max_node_heartbeats)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_READ_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    # The frames go to what standard output was; anything printed goes to standard error instead.
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, channel)
    writer = ChannelWriter(asyncio.StreamWriter(transport, protocol, None, loop))
    registry = CollectorRegistry()
    ProcessCollector(namespace="scheduler", registry=registry)  # scheduler_process_cpu_seconds_total, ...
    scheduler = Scheduler(config, writer, registry=registry)
    handlers = [getattr(scheduler, method) for _, method in RESOURCES]
    decode = msgspec.json.Decoder().decode
    started = False
    answering: set[asyncio.Task] = set()
    gc.set_threshold(50_000, 20, 100)  # while the state comes in: young collections rarely
    collector = IdleCollector()  # from the whole state on (see corral.memory)
    registry.register(CollectorMetrics(collector, "corral_scheduler"))
    try:
        while True:
            message = await _read_frame(reader)
            kind = message[0]
            if kind == "changes":
                for i, key, value in message[1]:
                    obj = None if value is None else decode(value)
                    if i == _PODS:  # a bound pod is held as this JSON (see PodInfo.obj)
                        handlers[i](key, obj, value)
                    else:
                        handlers[i](key, obj)
                if not started:  # the first frame is the whole state: out of the collector's view
                    # (before scheduling, not at the first pod, which its full pass held up: 40 ms
                    # at 5,000 nodes, 0.28 s at 50,000; nodes that join later are looked at when
                    # the process is idle)
                    collector.start()
                    scheduler.start()
                    started = True
            elif kind == "replies":
                writer.replied(message[1])
            elif kind == "ask":
                # Answered in a task of its own: the changes that come meanwhile are still taken in
                # (a plan of thousands of pods takes seconds, yielding as it goes).
                task = asyncio.create_task(_reply(writer.out, scheduler, *message[1:]))
                answering.add(task)
                task.add_done_callback(answering.discard)
    except asyncio.IncompleteReadError:  # the server closed our input: its scheduler is stopping
        pass
    finally:
        await scheduler.stop()
        await collector.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m corral.scheduler.process",
                                     description="The scheduler as a child of `corral server --scheduler-process` "
                                                 "(fed over standard input; not run by hand).")
    parser.add_argument("--config", default=None, help="a SchedulerConfiguration YAML file")
    parser.add_argument("--node-heartbeat", type=float, required=True)
    parser.add_argument("--max-node-heartbeats", type=float, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="scheduler process: %(levelname)s %(name)s: %(message)s")
    # A Ctrl-C in the server's terminal reaches this process too: the server stops it (by closing its
    # input) as it stops, where an end of its own here would read as a crash to start another after.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import uvloop

    uvloop.run(_run_child(args))


if __name__ == "__main__":
    main()
