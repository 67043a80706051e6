"""The runtime interface: how the agent starts, watches, stops and reads the logs of containers.

Implementations: ``process`` (each container is a local process) and ``docker`` (the Docker Engine
API). The simulator uses a fake. All methods are async; a runtime never talks to the API server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Protocol

__all__ = ["CONFIG_ERROR", "Runtime", "ContainerRef", "Mount", "ExitInfo", "StartError", "RecoveredContainer", "ExecSession", "StreamError"]


@dataclass(frozen=True, slots=True)
class ContainerRef:
    pod_uid: str
    pod_key: str  # namespace/name
    container: str
    id: str  # runtime-specific: process://PID or docker://ID
    image_id: str = ""  # docker://sha256:… for the docker runtime; none for the process runtime


@dataclass(frozen=True, slots=True)
class Mount:
    """A directory (or file) of the node the container sees at ``path`` (the agent made it; see
    :mod:`corral.agent.volumes`)."""

    host_path: str
    path: str
    read_only: bool


@dataclass(frozen=True, slots=True)
class ExitInfo:
    exit_code: int
    oom_killed: bool = False


@dataclass(frozen=True, slots=True)
class RecoveredContainer:
    """A container found running after an agent restart."""

    ref: ContainerRef
    running: bool


CONFIG_ERROR = "CreateContainerConfigError"  # a ConfigMap, Secret, key or volume the container needs is missing


class StartError(Exception):
    """A container could not be started; ``reason`` is Kubernetes' (ErrImagePull, StartError, ...)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class StreamError(Exception):
    """An exec, attach or port-forward the runtime cannot carry out; the message is the user's."""


class ExecSession(Protocol):
    """A command running in a container (``kubectl exec``), as the agent drives it."""

    def output(self) -> AsyncIterator[tuple[int, bytes]]:
        """(1 for stdout | 2 for stderr, bytes) as the command writes them, until its output ends
        (with a TTY everything is stdout)."""

    async def write(self, data: bytes) -> None:
        """To the command's stdin (ignored when it was started without one)."""

    async def close_stdin(self) -> None: ...

    def resize(self, width: int, height: int) -> None:
        """The terminal's new size (TTY only; ignored otherwise)."""

    async def wait(self) -> int:
        """The command's exit code, once it has ended."""

    async def close(self) -> None:
        """End the command and whatever it started, if still running. Idempotent."""


class Runtime(Protocol):
    name: str
    version: str

    async def start(self, pod: dict[str, Any], container: dict[str, Any], mounts: tuple[Mount, ...] = ()) -> ContainerRef:
        """Start one container of ``pod``, with ``mounts``; raises :class:`StartError`."""

    def volumes_dir(self, pod_uid: str) -> Path:
        """Where the agent keeps the pod's volumes (somewhere its containers can reach); removed by
        :meth:`remove_pod`."""

    async def wait(self, ref: ContainerRef) -> ExitInfo:
        """Return when the container exits."""

    async def stop(self, ref: ContainerRef, grace_seconds: float) -> None:
        """SIGTERM, wait up to ``grace_seconds``, SIGKILL. Idempotent."""

    async def logs(self, pod_uid: str, container: str, *, tail: int | None, follow: bool,
                   previous: bool = False, since_seconds: int | None = None) -> AsyncIterator[bytes]:
        """The container's output (stdout and stderr) since it last started, optionally following it;
        ``previous``: the output of the run before that (a crashed container's last words);
        ``since_seconds``: only what it wrote in the last so many seconds (where
        :meth:`logs_unavailable` allows it)."""

    def logs_unavailable(self, *, previous: bool, since_seconds: int | None) -> str | None:
        """Why this runtime cannot give these logs (the agent answers 400 with it), or None."""
        return None

    async def exec(self, ref: ContainerRef, pod: dict[str, Any], container: dict[str, Any], command: list[str], *,
                   stdin: bool, tty: bool) -> ExecSession:
        """Run ``command`` in the running container ``ref`` (its user, environment, working directory
        and limits); raises :class:`StreamError` when it cannot start."""

    async def attach(self, ref: ContainerRef, pod: dict[str, Any], container: dict[str, Any], *, stdin: bool,
                     tty: bool) -> ExecSession:
        """The running container's own output from now on and, if its spec has ``stdin: true``, its
        stdin (``kubectl attach``); the session's end leaves the container running."""

    async def port_address(self, ref: ContainerRef, pod: dict[str, Any], port: int, *,
                           probe: bool = False) -> tuple[str, int]:
        """Where the agent connects to reach ``port`` of the pod (``kubectl port-forward``; with
        ``probe``, a probe's ``httpGet``, ``tcpSocket`` or ``grpc``); raises :class:`StreamError` when
        the runtime will not forward it."""

    async def usage(self, refs: list[ContainerRef]) -> dict[str, tuple[float, int]]:
        """For each running container of ``refs``, by its id: (CPU seconds it has used so far, bytes
        of memory it holds now). Containers it cannot measure are left out."""

    async def recover(self) -> list[RecoveredContainer]:
        """Containers this runtime started before the agent restarted."""

    async def remove_pod(self, pod_uid: str) -> None:
        """Remove what is left of a pod (stopped containers, its network, its files)."""

    async def images(self) -> list[dict[str, Any]]:
        """The images this node holds, as Node.status.images entries."""

    async def close(self) -> None: ...
