"""The process runtime: each container is a real local process.

A container's ``command`` + ``args`` run with its ``env`` in a working directory under the agent's
data directory, in a session of its own (so stopping it reaches its children), with stdout and
stderr appended to a log file. A pid file (pid + the kernel's start time, which tells a reused pid
apart) lets an agent that restarts find the processes it started; they keep running while the agent
is away.

What it contains: an agent running as root runs every container as an unprivileged user
(``run_as_user``, default ``nobody``), never as root; every container gets rlimits on the number of
processes of that user (``max_processes``: a fork bomb stops there) and on open files; its working
directory (and ``workingDir``, which cannot lead out of it) and its pod's ``../shared`` (common to
the pod's containers) are the only places it may write under the agent's directory; it may pass through the pod directories to reach it but not list them, and the
logs are the agent's alone (0600). Where control groups are writable (see
:mod:`corral.agent.runtimes.cgroups`), each container runs in its own, with its cpu and memory
limits, the pod's processes are capped at ``max_processes`` (per pod, not only per user), a
container killed for memory is OOMKilled, and whatever a container leaves running when its main
process ends is killed with it. What it does not: no network or filesystem isolation beyond Unix
permissions; without control groups, no cpu or memory limits, and the process limit counts all
processes of the user (all pods together). The image is not used. Use ``docker`` for isolation.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import hashlib
import json
import logging
import os
import pwd
import resource
import shutil
import signal
import subprocess
import termios
import time
from pathlib import Path
from typing import Any, AsyncIterator

import corral
from corral.agent.runtimes import cgroups as cg
from corral.agent.runtimes.base import (CONFIG_ERROR, ContainerRef, ExecSession, ExitInfo, Mount, RecoveredContainer, StartError,
                                       StreamError)
from corral.agent.runtimes.sessions import AttachedSession, PipeSession, PtySession, exit_code, set_window_size
from corral.agent.volumes import inside

__all__ = ["ProcessRuntime", "DEFAULT_MAX_PROCESSES", "DEFAULT_MAX_OPEN_FILES", "pods_root"]

_POLL = 0.1
DEFAULT_MAX_PROCESSES = 1024
DEFAULT_MAX_OPEN_FILES = 4096
FALLBACK_ROOT = "/var/lib/corral/pods"
VOLUMES_DIR = "volumes"  # <pod>/volumes/<name>: made by the agent (corral.agent.volumes)
SHARED_DIR = "shared"  # <pod>/shared: writable by the pod's user, seen by its containers as ../shared
log = logging.getLogger(__name__)


def _within_hard(limit: int, value: int) -> int:
    """``value``, or the agent's own hard limit if that is lower (a child can only lower it)."""
    hard = resource.getrlimit(limit)[1]
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def _enter(workdir: str, user: pwd.struct_passwd | None, limits: tuple[tuple[int, int], ...],
           groups: tuple[str, ...] = (), *, terminal: int = -1) -> None:
    """In the child, between fork and exec (system calls only): into the working directory while
    still the agent (the pod directories above it are the agent's alone) and into its control
    groups, then the pod's user, then the limits. Done here rather than with ``cwd=``/``user=``,
    whose order uvloop neither promises nor (for ``user``) supports."""
    os.chdir(workdir)
    cg.join(groups)
    if user is not None:
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)
    for limit, value in limits:
        resource.setrlimit(limit, (value, value))
    if terminal >= 0:  # a session of its own whose controlling terminal is the pty
        if os.getsid(0) != os.getpid():  # uvloop starts the new session after this, not before,
            os.setsid()
        fcntl.ioctl(terminal, termios.TIOCSCTTY, 0)  # and makes the pty stdin after it too: its own fd


def _listener_uid(port: int) -> int | None:
    """The owner of the socket listening on TCP ``port`` (IPv4 or IPv6, any address), or None."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                lines = f.readlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 7 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                return int(fields[7])
    return None


def _session_usage(sessions: dict[int, str]) -> dict[str, tuple[float, int]]:
    """(CPU seconds, resident bytes) of the processes of each session (leader pid → key)."""
    ticks, page = os.sysconf("SC_CLK_TCK"), os.sysconf("SC_PAGE_SIZE")
    totals: dict[str, list[float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        key = sessions.get(int(fields[3])) if len(fields) > 21 else None
        if key is not None:
            total = totals.setdefault(key, [0.0, 0])
            total[0] += sum(int(x) for x in fields[11:15]) / ticks
            total[1] += int(fields[21]) * page
    return {key: (cpu, int(rss)) for key, (cpu, rss) in totals.items()}


def pods_root(data_dir: str, run_as_user: str | None = None) -> Path:
    """Where a process runtime on ``data_dir`` keeps its pods' directories (as it would choose)."""
    return _pods_root(Path(data_dir), _resolve_user(run_as_user))


def _pods_root(data_dir: Path, user: pwd.struct_passwd | None) -> Path:
    """``DATA_DIR/pods`` when pods run as the agent's own user; otherwise a directory of this agent's
    own under /var/lib/corral, named after its data directory: the agent makes its data directory
    private (0700, for its keys), so another user could never reach a path inside it — not its own
    working directory by its absolute path, nor its volumes, which a container reaches by links."""
    if user is None:
        return data_dir / "pods"
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:16]
    fallback = Path(FALLBACK_ROOT) / digest
    log.info("pods' directories are in %s: user %s cannot reach %s", fallback, user.pw_name, data_dir)
    return fallback


def _resolve_user(name: str | None) -> pwd.struct_passwd | None:
    """Who containers run as: ``name``, else ``nobody`` when the agent is root, else the agent's
    own user (``None``: an unprivileged agent cannot become anyone else)."""
    if os.geteuid() != 0:
        if name and name != pwd.getpwuid(os.geteuid()).pw_name:
            raise ValueError(f"--run-as-user {name}: only an agent running as root can run pods as another user")
        return None
    try:
        user = pwd.getpwnam(name or "nobody")
    except KeyError:
        raise ValueError(f"--run-as-user {name or 'nobody'}: no such user on this machine") from None
    if user.pw_uid == 0:
        raise ValueError("--run-as-user: pods may not run as root")
    return user


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

    def __init__(self, data_dir: str, *, run_as_user: str | None = None, max_processes: int = DEFAULT_MAX_PROCESSES,
                 max_open_files: int = DEFAULT_MAX_OPEN_FILES, cgroups: bool = True) -> None:
        self._procs: dict[str, asyncio.subprocess.Process] = {}
        self.user = _resolve_user(run_as_user)  # None: the agent's own user
        self.root = _pods_root(Path(data_dir), self.user)
        self.root.mkdir(parents=True, exist_ok=True)
        # Others may pass through (a pod's user reaches its own directory by its absolute path) but
        # not list: which pods run here, and their logs (0600), are the agent's to know.
        os.chmod(self.root, 0o711 if self.user is not None else 0o700)
        self._limits = tuple((limit, _within_hard(limit, value)) for limit, value in (
            (resource.RLIMIT_NPROC, max_processes), (resource.RLIMIT_NOFILE, max_open_files)))
        self.max_processes = max_processes
        self.cgroups: cg.Cgroups | None = None
        self.cgroups_missing = "turned off (--no-cgroups)"  # why there are none, when there are none
        if cgroups:
            self.cgroups, self.cgroups_missing = cg.detect(data_dir)
        if self.cgroups is not None:
            log.info("pods run in control groups (%s): cpu and memory limits, %d processes per pod",
                     self.cgroups.version, max_processes)
        else:
            log.warning("pods' cpu and memory limits are not enforced: %s", self.cgroups_missing)

    def _dir(self, pod_uid: str) -> Path:
        return self.root / pod_uid

    def log_path(self, pod_uid: str, container: str, *, previous: bool = False) -> Path:
        return self._dir(pod_uid) / (f"{container}.previous.log" if previous else f"{container}.log")

    @staticmethod
    def _environment(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
        """The container's environment: a few of the agent's variables, the pod's names, its ``env``."""
        meta = pod.get("metadata") or {}
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TZ", "PYTHONPATH")}
        env.update({"HOSTNAME": meta.get("name", ""), "POD_NAME": meta.get("name", ""),
                    "POD_NAMESPACE": meta.get("namespace", "default")})
        for e in container.get("env") or ():
            if e.get("name"):
                env[e["name"]] = str(e.get("value", ""))
        return env

    def _as_user(self, env: dict[str, str], workdir: Path) -> None:
        if self.user is not None:
            if env.get("HOME") == os.environ.get("HOME"):  # not the agent's home: its own directory
                env["HOME"] = str(workdir)
            env["USER"] = env["LOGNAME"] = self.user.pw_name

    def _workdir(self, pod_uid: str, container: dict[str, Any]) -> Path | None:
        """The container's working directory (its own directory, or ``workingDir`` inside it);
        None when ``workingDir`` would lead out of it."""
        base = self._dir(pod_uid) / container.get("name", "")
        if not container.get("workingDir"):
            return base
        workdir = (base / container["workingDir"].lstrip("/")).resolve()
        return workdir if workdir.is_relative_to(base.resolve()) else None

    def volumes_dir(self, pod_uid: str) -> Path:
        return self._dir(pod_uid) / VOLUMES_DIR

    def _mount(self, base: Path, mount: Mount) -> None:
        """A volume where the container finds it: its mount path inside the container's own directory
        (there is no other root to mount on), a link to the volume."""
        link = inside(base, mount.path.lstrip("/"))
        if link is None:
            raise StartError(CONFIG_ERROR, f'mountPath "{mount.path}" leads out of the container\'s '
                                                           "directory")
        link.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.is_dir():
            shutil.rmtree(link)
        os.symlink(mount.host_path, link)

    async def start(self, pod: dict[str, Any], container: dict[str, Any], mounts: tuple[Mount, ...] = ()) -> ContainerRef:
        meta = pod.get("metadata") or {}
        uid, name = meta.get("uid", ""), container.get("name", "")
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        argv = list(container.get("command") or []) + list(container.get("args") or [])
        if not container.get("command"):
            raise StartError("StartError", f"container {name}: the process runtime runs the container's "
                                           "command, and it has none (set `command`)")
        env = self._environment(pod, container)
        self._dir(uid).mkdir(exist_ok=True)
        os.chmod(self._dir(uid), 0o711 if self.user is not None else 0o700)
        if self.volumes_dir(uid).exists():
            os.chmod(self.volumes_dir(uid), 0o711)
        shared = self._dir(uid) / SHARED_DIR  # the pod's containers' common ground (Kubernetes' emptyDir)
        shared.mkdir(exist_ok=True, mode=0o700)
        if self.user is not None:
            os.chown(shared, self.user.pw_uid, self.user.pw_gid)
        base = self._dir(uid) / name
        base.mkdir(exist_ok=True, mode=0o700)
        workdir = self._workdir(uid, container)
        if workdir is None:
            raise StartError("StartError", f'container {name}: workingDir "{container["workingDir"]}" leads out '
                                           "of the container's directory")
        workdir.mkdir(parents=True, exist_ok=True)
        if self.user is not None:
            for d in {base, workdir}:
                os.chown(d, self.user.pw_uid, self.user.pw_gid)
        for mount in mounts:
            self._mount(base, mount)
        self._as_user(env, workdir)
        program = argv[0]
        if "/" not in program and shutil.which(program, path=env.get("PATH")) is None:
            raise StartError("StartError", f'exec: "{program}": executable file not found in $PATH')
        groups: tuple[str, ...] = ()
        if self.cgroups is not None:
            try:
                groups = self.cgroups.prepare(uid, name, limits=cg.limits_of(container),
                                              max_processes=self.max_processes)
            except OSError as exc:
                raise StartError("StartError", f"container {name}: cannot set up its control group: "
                                               f"{exc.strerror or exc}") from None
        log_path = self.log_path(uid, name)
        if log_path.exists() and log_path.stat().st_size:  # a restart: the last run's output becomes "previous"
            os.replace(log_path, self.log_path(uid, name, previous=True))
        stdin = self._stdin_fifo(uid, name) if container.get("stdin") else asyncio.subprocess.DEVNULL
        with open(os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as log:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *argv, env=env, stdin=stdin,
                    stdout=log, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
                    preexec_fn=functools.partial(_enter, str(workdir), self.user, self._limits, groups),
                )
            except OSError as exc:
                raise StartError("StartError", f'exec: "{program}": {exc.strerror or exc}') from None
            finally:
                if isinstance(stdin, int) and stdin >= 0:
                    os.close(stdin)  # the container holds its own
        ref = ContainerRef(uid, key, name, f"process://{proc.pid}")
        self._procs[ref.id] = proc
        (self._dir(uid) / f"{name}.pid").write_text(json.dumps({
            "pid": proc.pid, "start": _start_time(proc.pid), "pod": key, "container": name}))
        return ref

    def _stdin_path(self, pod_uid: str, container: str) -> Path:
        return self._dir(pod_uid) / f"{container}.stdin"

    def _stdin_fifo(self, pod_uid: str, container: str) -> int:
        """A container with ``stdin: true`` reads a named pipe that ``kubectl attach -i`` writes to;
        the container holds both of its ends, so its stdin stays open between attachments (as
        Kubernetes' without ``stdinOnce``). The pipe is the agent's alone (0600)."""
        path = self._stdin_path(pod_uid, container)
        if not path.exists():
            os.mkfifo(path, 0o600)
        return os.open(path, os.O_RDWR)

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
            return ExitInfo(-1, await self._finish(ref))
        code = await proc.wait()
        self._procs.pop(ref.id, None)
        return ExitInfo(exit_code(code), await self._finish(ref))

    async def _finish(self, ref: ContainerRef) -> bool:
        """The container's main process has ended: end what it left running and drop its group
        (so a restart starts with fresh counters). Whether the kernel killed it for memory."""
        if self.cgroups is None:
            return False
        oom = self.cgroups.oom_killed(ref.pod_uid, ref.container)
        deadline = time.monotonic() + 2.0
        while self.cgroups.pids(ref.pod_uid, ref.container) and time.monotonic() < deadline:
            self.cgroups.kill(ref.pod_uid, ref.container)
            await asyncio.sleep(0.02)
        self.cgroups.remove(ref.pod_uid, ref.container)
        return oom

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

    def logs_unavailable(self, *, previous: bool, since_seconds: int | None) -> str | None:
        if since_seconds is not None:
            return ("the process runtime keeps a container's output without times: --since is not available "
                    "on this node (use --tail, or the docker runtime)")
        return None

    async def logs(self, pod_uid: str, container: str, *, tail: int | None, follow: bool,
                   previous: bool = False, since_seconds: int | None = None) -> AsyncIterator[bytes]:
        path = self.log_path(pod_uid, container, previous=previous)
        follow = follow and not previous  # the previous run is over
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

    async def exec(self, ref: ContainerRef, pod: dict[str, Any], container: dict[str, Any], command: list[str], *,
                   stdin: bool, tty: bool) -> ExecSession:
        """The command as the container runs: its user, environment, working directory, rlimits and
        control groups (so its processes count against the container's limits)."""
        if not command:
            raise StreamError("you must specify at least one command for the container")
        if not self._alive(ref):
            raise StreamError(f"container {ref.container} is not running")
        env = self._environment(pod, container)
        workdir = self._workdir(ref.pod_uid, container)
        if workdir is None or not workdir.is_dir():
            raise StreamError(f"container {ref.container} has no working directory to run in")
        self._as_user(env, workdir)
        if tty:
            env.setdefault("TERM", "xterm")
        if "/" not in command[0] and shutil.which(command[0], path=env.get("PATH")) is None:
            raise StreamError(f'exec: "{command[0]}": executable file not found in $PATH')
        groups = self.cgroups.procs_files(ref.pod_uid, ref.container) if self.cgroups is not None else ()
        master = slave = -1
        try:
            if tty:
                master, slave = os.openpty()
                set_window_size(master, 80, 24)
                streams = {"stdin": slave, "stdout": slave, "stderr": slave}
            else:
                pipe = asyncio.subprocess.PIPE
                streams = {"stdin": pipe if stdin else asyncio.subprocess.DEVNULL, "stdout": pipe, "stderr": pipe}
            enter = functools.partial(_enter, str(workdir), self.user, self._limits, groups, terminal=slave)
            proc = await asyncio.create_subprocess_exec(*command, env=env, start_new_session=True, preexec_fn=enter,
                                                        **streams)
        except (OSError, subprocess.SubprocessError) as exc:
            if master >= 0:
                os.close(master)
            raise StreamError(f'exec: "{command[0]}": {getattr(exc, "strerror", None) or exc}') from None
        finally:
            if slave >= 0:
                os.close(slave)
        return PtySession(proc, master) if tty else PipeSession(proc)

    async def attach(self, ref: ContainerRef, pod: dict[str, Any], container: dict[str, Any], *, stdin: bool,
                     tty: bool) -> ExecSession:
        """The container's output from now on (what it appends to its log) and, with ``stdin: true``
        in its spec, its stdin. The process runtime gives containers no terminal: ``tty`` is ignored."""
        if not self._alive(ref):
            raise StreamError(f"container {ref.container} is not running")
        writer = -1
        if stdin and container.get("stdin"):
            try:
                writer = os.open(self._stdin_path(ref.pod_uid, ref.container), os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                raise StreamError(f"cannot open the stdin of container {ref.container}: {exc.strerror}") from None
        return AttachedSession(self.log_path(ref.pod_uid, ref.container), lambda: self._alive(ref), writer)

    async def port_address(self, ref: ContainerRef, pod: dict[str, Any], port: int, *,
                           probe: bool = False) -> tuple[str, int]:
        """Pods of this runtime share the node's network, so a pod's port is the node's: forwarded
        only when the pod declares it (``containerPort``) and the socket listening on it is the pods'
        user's — never the agent's, another service's of the node, or root's. Forwarded from the
        node's loopback; probed, as kubelet probes, at the pod's IP (the node's address)."""
        declared = {p.get("containerPort") for c in (pod.get("spec") or {}).get("containers") or ()
                    for p in c.get("ports") or ()}
        if port not in declared:
            raise StreamError(f"port {port} is not a containerPort of the pod: the process runtime forwards only "
                              "ports the pod declares")
        owner = _listener_uid(port)
        if owner is None:
            raise StreamError(f"nothing is listening on port {port} of the pod")
        expected = self.user.pw_uid if self.user is not None else os.geteuid()
        if owner != expected:
            raise StreamError(f"port {port} is not the pod's: another user's process listens on it")
        return ((pod.get("status") or {}).get("podIP") or "127.0.0.1") if probe else "127.0.0.1", port

    async def usage(self, refs: list[ContainerRef]) -> dict[str, tuple[float, int]]:
        """Each container is the session its main process leads (it starts one): its processes'
        CPU time (with that of the children they have waited for) and resident memory, from /proc."""
        sessions = {self._pid(ref): ref.id for ref in refs if self._alive(ref)}
        if not sessions:
            return {}
        return await asyncio.to_thread(_session_usage, sessions)

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
        if self.cgroups is not None:
            self.cgroups.remove(pod_uid)

    async def images(self) -> list[dict[str, Any]]:
        return []

    async def close(self) -> None:
        if self.cgroups is not None:
            self.cgroups.close()
