"""A small real cluster for end-to-end tests: a server process and agent processes on this machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from corral.testing.process import child_env
from corral.testing.server import ServerProcess

__all__ = ["LocalCluster", "wait_for"]


class LocalCluster:
    """``corral server`` (scheduler, controllers) and ``agents`` × ``corral agent``, each with its own
    data directory under ``root``; short heartbeats and back-offs so tests run in seconds."""

    def __init__(self, root: str, agents: int = 3, *, runtime: str = "process", docker_host: str | None = None,
                 grace: float = 40.0, eviction: float = 300.0, heartbeat: float = 1.0,
                 agent_args: tuple[str, ...] = (), own_addresses: bool = False) -> None:
        self.root = root
        self.own_addresses = own_addresses  # agent i at 127.0.0.(i+1), not all at 127.0.0.1
        self.n = agents
        self.runtime = runtime
        self.docker_host = docker_host
        self.agent_args = agent_args
        self.heartbeat = heartbeat
        self.server = ServerProcess(os.path.join(root, "server"), "--node-monitor-grace-period", str(grace),
                                    "--node-heartbeat", str(heartbeat), "--pod-eviction-timeout", str(eviction))
        self.agents: dict[str, subprocess.Popen] = {}

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def kubeconfig(self) -> str:
        """The admin kubeconfig of the cluster's server."""
        return self.server.kubeconfig

    def node_name(self, i: int) -> str:
        return f"node-{i}"

    def address(self, i: int) -> str:
        """Node i's InternalIP: its own loopback address with ``own_addresses`` (pods can then serve
        one port number on every node, as on separate machines), else 127.0.0.1."""
        return f"127.0.0.{i + 1}" if self.own_addresses else "127.0.0.1"

    def start_agent(self, i: int) -> None:
        name = self.node_name(i)
        data = os.path.join(self.root, name)
        os.makedirs(data, exist_ok=True)
        args = [sys.executable, "-m", "corral", "agent", *self.server.join_args(), "--name", name, "--data-dir", data,
                "--port", "0", "--address", self.address(i), "--heartbeat", str(self.heartbeat), "--restart-backoff", "0.5",
                "--metrics-interval", "1", "--runtime", self.runtime, "--log-level", "info", *self.agent_args]
        if self.docker_host:
            args += ["--docker-host", self.docker_host]
        log = open(os.path.join(data, "agent.log"), "ab")
        self.agents[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             env=child_env())
        log.close()

    def kill_agent(self, i: int) -> None:
        """``kill -9`` of the agent (its containers keep running, as on a partitioned machine)."""
        proc = self.agents.pop(self.node_name(i))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def agent_log(self, i: int) -> str:
        path = os.path.join(self.root, self.node_name(i), "agent.log")
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def start(self) -> "LocalCluster":
        self.server.start()
        for i in range(self.n):
            self.start_agent(i)
        return self

    def stop(self) -> None:
        for proc in self.agents.values():
            proc.terminate()
        for proc in self.agents.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.agents.clear()
        self.server.stop()
        self.kill_pod_processes()
        self._remove_pod_directories()
        self._remove_control_groups()

    def _pod_roots(self) -> list[str]:
        """Where each agent of this cluster keeps its pods' directories (see ProcessRuntime's pods_root)."""
        import glob

        from corral.agent.runtimes.process import pods_root

        return [str(pods_root(node)) for node in glob.glob(os.path.join(self.root, "node-*"))]

    def _remove_pod_directories(self) -> None:
        """Those the agents kept outside this cluster's directory."""
        import shutil

        inside = os.path.abspath(self.root) + os.sep
        for pods in self._pod_roots():
            if not pods.startswith(inside):
                shutil.rmtree(pods, ignore_errors=True)

    def _remove_control_groups(self) -> None:
        """The agents' pods' control groups, once whatever ran in them is gone."""
        import glob
        import time

        from corral.agent.runtimes.cgroups import detect

        for node in glob.glob(os.path.join(self.root, "node-*")):
            groups, _ = detect(node)
            if groups is None:
                continue
            deadline = time.monotonic() + 5
            while (left := [k for k in groups.containers() if groups.pids(*k)]) and time.monotonic() < deadline:
                for pod_uid, container in left:
                    groups.kill(pod_uid, container)
                time.sleep(0.05)
            groups.close()

    def kill_pod_processes(self) -> int:
        """Pods' processes outlive their agent by design (a restarted agent adopts them); a test
        cluster must not leave them behind. Returns how many were still running."""
        import glob
        import json

        from corral.agent.runtimes.process import _start_time

        killed = 0
        for pid_file in (f for pods in self._pod_roots() for f in glob.glob(os.path.join(pods, "*", "*.pid"))):
            try:
                info = json.loads(open(pid_file).read())
                if info.get("start") and _start_time(info["pid"]) == info["start"]:
                    os.killpg(info["pid"], signal.SIGKILL)
                    killed += 1
            except (OSError, ValueError):
                continue
        return killed

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.2, what: str = "condition"):
    """Poll ``predicate`` until it returns something truthy; return that."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
