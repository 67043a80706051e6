"""A private etcd member for tests: loopback ports of its own, its own data directory."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

__all__ = ["EtcdProcess", "EtcdMissing"]


class EtcdMissing(RuntimeError):
    """etcd is not installed; `make test` installs Debian's etcd-server."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EtcdProcess:
    def __init__(self, data_dir: str, name: str = "corral-test") -> None:
        self.data_dir = data_dir
        self.name = name
        self.client_port = _free_port()
        self.peer_port = _free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"etcd://127.0.0.1:{self.client_port}"

    def start(self, timeout: float = 30.0) -> "EtcdProcess":
        binary = shutil.which("etcd")
        if binary is None:
            raise EtcdMissing("etcd is not installed: run `make test`, which installs Debian's etcd-server")
        os.makedirs(self.data_dir, exist_ok=True)
        peer = f"http://127.0.0.1:{self.peer_port}"
        client = f"http://127.0.0.1:{self.client_port}"
        log = open(os.path.join(self.data_dir, "etcd.log"), "wb")
        self.proc = subprocess.Popen(
            [binary, "--name", self.name, "--data-dir", os.path.join(self.data_dir, "data"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"{self.name}={peer}", "--initial-cluster-state", "new"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited: {open(os.path.join(self.data_dir, 'etcd.log')).read()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.client_port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"etcd did not start in {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
