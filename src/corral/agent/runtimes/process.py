"""The process runtime: each container is a real local process.

A container's ``command`` + ``args`` run with its ``env`` in a working directory under the agent's
data directory, in a session of its own (so stopping it reaches its children), with stdout and
stderr appended to a log file. A pid file (pid + the kernel's start time, which tells a reused pid
apart) lets an agent that restarts find the processes it started; they keep running while the agent
is away. The image is not used, and resource limits are not enforced: this runtime is for trusted
local workloads, development and tests; use ``docker`` for isolation.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any, AsyncIterator

import corral
from corral.agent.runtimes.base import ContainerRef, ExitInfo, RecoveredContainer, StartError

__all__ = ["ProcessRuntime"]

_POLL = 0.1


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    if fields and fields[0] == "Z":
        return None  # a zombie has finished
    return fields[19] if len(fields) > 19 else None


class ProcessRuntime:
    name = "process"
    version = f"corral-process://{corral.__version__}"

    def __init__(self, data_dir: str) -> None:
        self.root = Path(data_dir) / "pods"
        self.root.mkdir(parents=True, exist_ok=True)
        self._procs: dict[str, asyncio.subprocess.Process] = {}

    def _dir(self, pod_uid: str) -> Path:
        return self.root / pod_uid

    def log_path(self, pod_uid: str, container: str) -> Path:
        return self._dir(pod_uid) / f"{container}.log"

    async def start(self, pod: dict[str, Any], container: dict[str, Any]) -> ContainerRef:
        meta = pod.get("metadata") or {}
        uid, name = meta.get("uid", ""), container.get("name", "")
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        argv = list(container.get("command") or []) + list(container.get("args") or [])
        if not container.get("command"):
            raise StartError("StartError", f"container {name}: the process runtime runs the container's "
                                           "command, and it has none (set `command`)")
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "PYTHONPATH")}
        env.update({"HOSTNAME": meta.get("name", ""), "POD_NAME": meta.get("name", ""),
                    "POD_NAMESPACE": meta.get("namespace", "default")})
        for e in container.get("env") or ():
            if e.get("name"):
                env[e["name"]] = str(e.get("value", ""))
        workdir = self._dir(uid) / name
        workdir.mkdir(parents=True, exist_ok=True)
        if container.get("workingDir"):
            workdir = workdir / container["workingDir"].lstrip("/")
            workdir.mkdir(parents=True, exist_ok=True)
        program = argv[0]
        if "/" not in program and shutil.which(program, path=env.get("PATH")) is None:
            raise StartError("StartError", f'exec: "{program}": executable file not found in $PATH')
        log_path = self.log_path(uid, name)
        with open(log_path, "ab") as log:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv, cwd=str(workdir), env=env, stdin=asyncio.subprocess.DEVNULL,
                    stdout=log, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
                )
            except OSError as exc:
                raise StartError("StartError", f'exec: "{program}": {exc.strerror or exc}') from None
        ref = ContainerRef(uid, key, name, f"process://{proc.pid}")
        self._procs[ref.id] = proc
        (self._dir(uid) / f"{name}.pid").write_text(json.dumps({
            "pid": proc.pid, "start": _start_time(proc.pid), "pod": key, "container": name}))
        return ref

    @staticmethod
    def _pid(ref: ContainerRef) -> int:
        return int(ref.id.removeprefix("process://"))

    def _alive(self, ref: ContainerRef) -> bool:
        proc = self._procs.get(ref.id)
        if proc is not None:
            return proc.returncode is None
        return _start_time(self._pid(ref)) is not None

    async def wait(self, ref: ContainerRef) -> ExitInfo:
        proc = self._procs.get(ref.id)
        if proc is None:  # adopted after an agent restart: not our child, so poll
            while self._alive(ref):
                await asyncio.sleep(0.5)
            return ExitInfo(-1)
        code = await proc.wait()
        self._procs.pop(ref.id, None)
        return ExitInfo(128 - code if code < 0 else code)

    async def stop(self, ref: ContainerRef, grace_seconds: float) -> None:
        pid = self._pid(ref)
        if not self._alive(ref):
            return
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + max(grace_seconds, 0.0)
        while time.monotonic() < deadline and self._alive(ref):
            await asyncio.sleep(_POLL)
        if self._alive(ref):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                return
            while self._alive(ref):
                await asyncio.sleep(_POLL / 4)

    async def logs(self, pod_uid: str, container: str, *, tail: int | None, follow: bool) -> AsyncIterator[bytes]:
        path = self.log_path(pod_uid, container)
        if not path.exists():
            return
        with open(path, "rb") as f:
            data = f.read()
            if tail is not None:
                lines = data.splitlines(keepends=True)
                data = b"".join(lines[-tail:]) if tail > 0 else b""
            if data:
                yield data
            if not follow:
                return
            pid_file = self._dir(pod_uid) / f"{container}.pid"
            while True:
                chunk = f.read()
                if chunk:
                    yield chunk
                    continue
                running = False
                if pid_file.exists():
                    info = json.loads(pid_file.read_text())
                    running = _start_time(info["pid"]) == info.get("start")
                if not running:
                    rest = f.read()
                    if rest:
                        yield rest
                    return
                await asyncio.sleep(0.2)

    async def recover(self) -> list[RecoveredContainer]:
        found = []
        for pid_file in self.root.glob("*/*.pid"):
            try:
                info = json.loads(pid_file.read_text())
            except (OSError, ValueError):
                continue
            ref = ContainerRef(pid_file.parent.name, info.get("pod", ""), info.get("container", ""),
                               f"process://{info.get('pid')}")
            running = info.get("start") is not None and _start_time(int(info["pid"])) == info["start"]
            found.append(RecoveredContainer(ref, running))
        return found

    async def remove_pod(self, pod_uid: str) -> None:
        await asyncio.to_thread(shutil.rmtree, self._dir(pod_uid), True)

    async def images(self) -> list[dict[str, Any]]:
        return []

    async def close(self) -> None:
        return None
