"""The docker runtime: containers in a Docker engine, through the Docker Engine API (docker SDK).

Per pod: one bridge network (``corral-<uid>``); per container spec: one container on it, labelled
with the pod's uid, namespace and name and the container's name (that is how the agent finds them
again after a restart), with the spec's cpu and memory limits, its env and working directory, and
its hostPorts published. ``command`` replaces the image's ENTRYPOINT and ``args`` its CMD, as in
Kubernetes. A missing image is pulled (unless ``imagePullPolicy: Never``).

The SDK is synchronous: every call runs in a thread; waiting for containers to exit uses a pool of
its own so that many long waits never starve the default executor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import time
from pathlib import Path
from typing import Any, AsyncIterator

from corral.agent.runtimes.base import (ContainerRef, ExecSession, ExitInfo, Mount, RecoveredContainer, StartError,
                                       StreamError)
from corral.agent.runtimes.docker_exec import open_attach, open_exec
from corral.api.quantity import QuantityError, to_milli, to_units

__all__ = ["DockerRuntime", "DEFAULT_PIDS_LIMIT"]

DEFAULT_PIDS_LIMIT = 1024  # processes per container

LABEL_UID = "corral.dev/pod-uid"
LABEL_NAMESPACE = "corral.dev/pod-namespace"
LABEL_POD = "corral.dev/pod-name"
LABEL_CONTAINER = "corral.dev/container"


def _image_id(container) -> str:
    """The image a container runs, as Kubernetes reported Docker's: ``docker://sha256:…``."""
    image = (getattr(container, "attrs", None) or {}).get("Image") or ""
    return f"docker://{image}" if image else ""


class DockerRuntime:
    name = "docker"

    def __init__(self, data_dir: str, base_url: str | None = None, *, pids_limit: int = DEFAULT_PIDS_LIMIT) -> None:
        import docker

        self.data_dir = data_dir
        self.pids_limit = pids_limit
        self.base_url = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        self.client = docker.DockerClient(base_url=self.base_url, timeout=120)
        self._waits = concurrent.futures.ThreadPoolExecutor(max_workers=512, thread_name_prefix="docker-wait")
        # Set by the agent: on_event(pod, type, reason, message), called from a worker thread.
        self.on_event = None
        self.version = "docker://unknown"
        try:
            self.version = f"docker://{self.client.version().get('Version', 'unknown')}"
        except Exception:  # reported at the first start instead
            pass

    # --- helpers -----------------------------------------------------------------------------------------

    @staticmethod
    def _names(pod: dict[str, Any]) -> tuple[str, str, str, str]:
        meta = pod.get("metadata") or {}
        return meta.get("uid", ""), meta.get("namespace", "default"), meta.get("name", ""), \
            f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"

    def _network(self, uid: str) -> str:
        import docker.errors

        name = f"corral-{uid[:12]}"
        try:
            self.client.networks.get(name)
        except docker.errors.NotFound:
            self.client.networks.create(name, driver="bridge", labels={LABEL_UID: uid})
        return name

    def _emit(self, pod: dict[str, Any], etype: str, reason: str, message: str) -> None:
        if self.on_event is not None:
            self.on_event(pod, etype, reason, message)

    def _ensure_image(self, pod: dict[str, Any], image: str, policy: str) -> None:
        import docker.errors

        try:
            self.client.images.get(image)
            if policy != "Always":
                return
        except docker.errors.ImageNotFound:
            if policy == "Never":
                raise StartError("ErrImageNeverPull",
                                 f'image "{image}" is not present and imagePullPolicy is Never') from None
        except docker.errors.APIError as exc:
            raise StartError("ErrImagePull", f'image "{image}": {exc.explanation or exc}') from None
        self._emit(pod, "Normal", "Pulling", f'Pulling image "{image}"')
        try:
            repo, _, tag = image.rpartition(":") if ":" in image.rsplit("/", 1)[-1] else (image, "", "latest")
            self.client.images.pull(repo, tag=tag)
        except docker.errors.APIError as exc:
            raise StartError("ErrImagePull", f'failed to pull image "{image}": {exc.explanation or exc}') from None
        self._emit(pod, "Normal", "Pulled", f'Successfully pulled image "{image}"')

    @staticmethod
    def _limits(container: dict[str, Any]) -> dict[str, Any]:
        limits = ((container.get("resources") or {}).get("limits")) or {}
        out: dict[str, Any] = {}
        try:
            if "memory" in limits:
                out["mem_limit"] = to_units(limits["memory"])
                out["memswap_limit"] = out["mem_limit"]  # no swap beyond the limit: OOM as Kubernetes does
            if "cpu" in limits:
                out["nano_cpus"] = to_milli(limits["cpu"]) * 1_000_000
        except QuantityError:
            pass
        return out

    def volumes_dir(self, pod_uid: str) -> Path:
        return Path(self.data_dir) / "volumes" / pod_uid

    def _start_sync(self, pod: dict[str, Any], container: dict[str, Any], mounts: tuple[Mount, ...]) -> ContainerRef:
        import docker.errors

        uid, namespace, pod_name, key = self._names(pod)
        name = container.get("name", "")
        image = container.get("image", "")
        self._ensure_image(pod, image, container.get("imagePullPolicy", "IfNotPresent"))
        cname = f"corral-{namespace}-{pod_name}-{name}-{uid[:8]}"
        try:
            old = self.client.containers.get(cname)  # a previous attempt's leftover: its output is kept
            previous = self._previous_log(uid, name)
            os.makedirs(os.path.dirname(previous), mode=0o700, exist_ok=True)
            with open(os.open(previous, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
                f.write(old.logs(stdout=True, stderr=True))
            old.remove(force=True)
        except docker.errors.NotFound:
            pass
        ports = {f"{p['containerPort']}/{p.get('protocol', 'TCP').lower()}": p["hostPort"]
                 for p in container.get("ports") or () if p.get("hostPort")}
        env = {e["name"]: str(e.get("value", "")) for e in container.get("env") or () if e.get("name")}
        env.update({"POD_NAME": pod_name, "POD_NAMESPACE": namespace})
        try:
            created = self.client.containers.create(
                image, name=cname, entrypoint=container.get("command") or None,
                command=container.get("args") or None, environment=env,
                working_dir=container.get("workingDir") or None, hostname=pod_name[:63],
                labels={LABEL_UID: uid, LABEL_NAMESPACE: namespace, LABEL_POD: pod_name, LABEL_CONTAINER: name},
                network=self._network(uid), ports=ports or None, detach=True, **self._limits(container),
                # Contained as Docker contains by default (its default capabilities only: nothing
                # added), plus a process limit and no privilege gained through setuid binaries.
                pids_limit=self.pids_limit, security_opt=["no-new-privileges"],
                # The pod's volumes, as the agent wrote them: ConfigMaps and Secrets read-only.
                volumes={m.host_path: {"bind": m.path, "mode": "ro" if m.read_only else "rw"} for m in mounts} or None,
                stdin_open=bool(container.get("stdin")), tty=bool(container.get("tty")),
            )
            created.start()
        except docker.errors.APIError as exc:
            message = exc.explanation or str(exc)
            if "executable file not found" in message or "no such file or directory" in message:
                raise StartError("StartError", message) from None
            raise StartError("RunContainerError", message) from None
        return ContainerRef(uid, key, name, f"docker://{created.id}", _image_id(created))

    # --- the interface -------------------------------------------------------------------------------

    async def start(self, pod: dict[str, Any], container: dict[str, Any], mounts: tuple[Mount, ...] = ()) -> ContainerRef:
        return await asyncio.to_thread(self._start_sync, pod, container, mounts)

    @staticmethod
    def _id(ref: ContainerRef) -> str:
        return ref.id.removeprefix("docker://")

    def _wait_sync(self, ref: ContainerRef) -> ExitInfo:
        import docker.errors

        try:
            c = self.client.containers.get(self._id(ref))
            result = c.wait()
            c.reload()
            return ExitInfo(int(result.get("StatusCode", -1)), bool(c.attrs.get("State", {}).get("OOMKilled")))
        except docker.errors.NotFound:
            return ExitInfo(-1)

    async def wait(self, ref: ContainerRef) -> ExitInfo:
        return await asyncio.get_running_loop().run_in_executor(self._waits, self._wait_sync, ref)

    def _stop_sync(self, ref: ContainerRef, grace: float) -> None:
        import docker.errors

        try:
            self.client.containers.get(self._id(ref)).stop(timeout=max(int(grace), 0))
        except docker.errors.NotFound:
            pass

    async def stop(self, ref: ContainerRef, grace_seconds: float) -> None:
        await asyncio.to_thread(self._stop_sync, ref, grace_seconds)

    def _exec_create(self, ref: ContainerRef, command: list[str], stdin: bool, tty: bool) -> str:
        import docker.errors

        try:
            return self.client.api.exec_create(self._id(ref), command, stdin=stdin, tty=tty, stdout=True,
                                               stderr=True, environment={"TERM": "xterm"} if tty else None)["Id"]
        except docker.errors.NotFound:
            raise StreamError(f"container {ref.container} is not running") from None
        except docker.errors.APIError as exc:
            raise StreamError(exc.explanation or str(exc)) from None

    async def exec(self, ref: ContainerRef, pod: dict[str, Any], container: dict[str, Any], command: list[str], *,
                   stdin: bool, tty: bool) -> ExecSession:
        """Docker's exec: in the container's namespaces, as its user, with its environment."""
        if not command:
            raise StreamError("you must specify at least one command for the container")
        exec_id = await asyncio.to_thread(self._exec_create, ref, command, stdin, tty)
        session = await open_exec(self.base_url, self.client.api, exec_id, tty=tty)
        if tty:
            session.resize(80, 24)
        return session

    async def attach(self, ref: ContainerRef, pod: dict[str, Any], container: dict[str, Any], *, stdin: bool,
                     tty: bool) -> ExecSession:
        return await open_attach(self.base_url, self.client.api, self._id(ref), stdin=stdin and bool(container.get("stdin")),
                                 tty=bool(container.get("tty")))

    def _address_sync(self, ref: ContainerRef) -> str:
        import docker.errors

        try:
            attrs = self.client.containers.get(self._id(ref)).attrs
        except docker.errors.NotFound:
            raise StreamError(f"container {ref.container} is not running") from None
        for network in ((attrs.get("NetworkSettings") or {}).get("Networks") or {}).values():
            if network.get("IPAddress"):
                return network["IPAddress"]
        raise StreamError("the pod has no network address")

    async def port_address(self, ref: ContainerRef, pod: dict[str, Any], port: int, *,
                           probe: bool = False) -> tuple[str, int]:
        """The pod's own address on its network: every port of it is the pod's, none the node's
        (for a probe too)."""
        return await asyncio.to_thread(self._address_sync, ref), port

    def _usage_sync(self, refs: list[ContainerRef]) -> dict[str, tuple[float, int]]:
        import docker.errors

        out = {}
        for ref in refs:
            try:
                stats = self.client.api.stats(self._id(ref), stream=False, one_shot=True)
            except docker.errors.APIError:
                continue
            cpu = ((stats.get("cpu_stats") or {}).get("cpu_usage") or {}).get("total_usage")
            memory = stats.get("memory_stats") or {}
            if cpu is None or "usage" not in memory:
                continue  # not running
            cached = (memory.get("stats") or {}).get("inactive_file", (memory.get("stats") or {}).get("cache", 0))
            out[ref.id] = (cpu / 1e9, max(memory["usage"] - cached, 0))  # the working set, as the kubelet counts it
        return out

    async def usage(self, refs: list[ContainerRef]) -> dict[str, tuple[float, int]]:
        return await asyncio.to_thread(self._usage_sync, refs)

    def _find(self, pod_uid: str, container: str):
        found = self.client.containers.list(all=True, filters={"label": [f"{LABEL_UID}={pod_uid}",
                                                                         f"{LABEL_CONTAINER}={container}"]})
        return found[0] if found else None

    def _previous_log(self, pod_uid: str, container: str) -> str:
        """Where a container's last run's output goes when it starts again (Docker's copy goes with
        the container, which is removed)."""
        return os.path.join(self.data_dir, "previous-logs", pod_uid, f"{container}.log")

    def logs_unavailable(self, *, previous: bool, since_seconds: int | None) -> str | None:
        if previous and since_seconds is not None:
            return "the previous run's output is kept without times: --since and --previous do not go together"
        return None

    async def logs(self, pod_uid: str, container: str, *, tail: int | None, follow: bool,
                   previous: bool = False, since_seconds: int | None = None) -> AsyncIterator[bytes]:
        if previous:
            try:
                with open(self._previous_log(pod_uid, container), "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                return
            if tail is not None:
                data = b"".join(data.splitlines(keepends=True)[-tail:]) if tail > 0 else b""
            yield data
            return
        c = await asyncio.to_thread(self._find, pod_uid, container)
        if c is None:
            return
        since = {"since": int(time.time()) - since_seconds} if since_seconds is not None else {}
        if not follow:
            yield await asyncio.to_thread(c.logs, stdout=True, stderr=True, tail="all" if tail is None else tail,
                                          **since)
            return
        queue: asyncio.Queue = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def pump() -> None:
            try:
                for chunk in c.logs(stdout=True, stderr=True, stream=True, follow=True,
                                    tail="all" if tail is None else tail, **since):
                    loop.call_soon_threadsafe(queue.put_nowait, chunk)
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, None)

        loop.run_in_executor(self._waits, pump)
        while (chunk := await queue.get()) is not None:
            yield chunk

    def _recover_sync(self) -> list[RecoveredContainer]:
        found = []
        for c in self.client.containers.list(all=True, filters={"label": LABEL_UID}):
            labels = c.labels
            ref = ContainerRef(labels.get(LABEL_UID, ""), f"{labels.get(LABEL_NAMESPACE)}/{labels.get(LABEL_POD)}",
                               labels.get(LABEL_CONTAINER, ""), f"docker://{c.id}", _image_id(c))
            found.append(RecoveredContainer(ref, c.status == "running"))
        return found

    async def recover(self) -> list[RecoveredContainer]:
        return await asyncio.to_thread(self._recover_sync)

    def _remove_sync(self, pod_uid: str) -> None:
        import docker.errors

        shutil.rmtree(os.path.dirname(self._previous_log(pod_uid, "x")), ignore_errors=True)
        shutil.rmtree(self.volumes_dir(pod_uid), ignore_errors=True)
        for c in self.client.containers.list(all=True, filters={"label": f"{LABEL_UID}={pod_uid}"}):
            try:
                c.remove(force=True)
            except docker.errors.APIError:
                pass
        for net in self.client.networks.list(filters={"label": f"{LABEL_UID}={pod_uid}"}):
            try:
                net.remove()
            except docker.errors.APIError:
                pass

    async def remove_pod(self, pod_uid: str) -> None:
        await asyncio.to_thread(self._remove_sync, pod_uid)

    def _images_sync(self) -> list[dict[str, Any]]:
        return [{"names": image.tags, "sizeBytes": int(image.attrs.get("Size") or 0)}
                for image in self.client.images.list() if image.tags]

    async def images(self) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self._images_sync)

    async def close(self) -> None:
        self._waits.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self.client.close)
