"""Private etcd members for tests: loopback ports of their own, their own data directories.

:class:`EtcdProcess` is one member (a cluster of one by default); :class:`EtcdCluster` starts three
(or any number) that form one cluster, so a test can kill a member and bring it back. With
:class:`MemberTLS` a member serves its clients over TLS and asks them for a certificate signed by the
same CA (etcd's ``--client-cert-auth``); each member may listen on its own loopback address
(127.0.0.2, 127.0.0.3, ...), so its certificate can name that address alone.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass

from corral.testing.process import free_port

__all__ = ["EtcdProcess", "EtcdCluster", "EtcdMissing", "MemberTLS"]


class EtcdMissing(RuntimeError):
    """etcd is not installed; `make test` installs Debian's etcd-server."""


@dataclass(frozen=True)
class MemberTLS:
    """A member's serving certificate and key, and the CA its clients' certificates must be signed by."""

    ca_file: str
    cert_file: str
    key_file: str


class EtcdProcess:
    def __init__(self, data_dir: str, name: str = "corral-test", *, host: str = "127.0.0.1",
                 tls: MemberTLS | None = None, extra_args: tuple[str, ...] = ()) -> None:
        self.data_dir = data_dir
        self.extra_args = extra_args  # more etcd flags, e.g. ("--quota-backend-bytes", "4194304")
        self.name = name
        self.host = host
        self.tls = tls
        self.client_port = free_port()
        self.peer_port = free_port()
        self.initial_cluster = f"{name}={self.peer_url}"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"etcd://{self.host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{self.peer_port}"

    @property
    def log_path(self) -> str:
        return os.path.join(self.data_dir, "etcd.log")

    def launch(self) -> None:
        """Start the process without waiting for it (members of a new cluster wait for each other)."""
        binary = shutil.which("etcd")
        if binary is None:
            raise EtcdMissing("etcd is not installed: run `make test`, which installs Debian's etcd-server")
        os.makedirs(self.data_dir, exist_ok=True)
        client = f"{'https' if self.tls else 'http'}://{self.host}:{self.client_port}"
        tls = [] if self.tls is None else ["--cert-file", self.tls.cert_file, "--key-file", self.tls.key_file,
                                           "--trusted-ca-file", self.tls.ca_file, "--client-cert-auth"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [binary, "--name", self.name, "--data-dir", os.path.join(self.data_dir, "data"),
                 "--listen-client-urls", client, "--advertise-client-urls", client,
                 "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
                 "--initial-cluster", self.initial_cluster, "--initial-cluster-state", "new",
                 "--heartbeat-interval", "100", "--election-timeout", "1000", *tls, *self.extra_args],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                with open(self.log_path, encoding="utf-8", errors="replace") as f:
                    raise RuntimeError(f"etcd {self.name} exited: {f.read()[-2000:]}")
            try:
                with socket.create_connection((self.host, self.client_port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"etcd {self.name} did not start in {timeout}s")

    def start(self, timeout: float = 30.0) -> "EtcdProcess":
        self.launch()
        self.wait_ready(timeout)
        return self

    def kill(self) -> None:
        """``kill -9``: no goodbye to the other members."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class EtcdCluster:
    """``size`` members on loopback forming one cluster; ``url`` names them all."""

    def __init__(self, data_dir: str, size: int = 3, *, hosts: list[str] | None = None,
                 tls: list[MemberTLS] | None = None) -> None:
        hosts = hosts or ["127.0.0.1"] * size
        self.members = [EtcdProcess(os.path.join(data_dir, f"m{i}"), name=f"m{i}", host=hosts[i],
                                    tls=tls[i] if tls else None) for i in range(size)]
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        for m in self.members:
            m.initial_cluster = initial

    @property
    def url(self) -> str:
        return "etcd://" + ",".join(f"{m.host}:{m.client_port}" for m in self.members)

    def start(self, timeout: float = 30.0) -> "EtcdCluster":
        for m in self.members:
            m.launch()
        try:
            for m in self.members:
                m.wait_ready(timeout)
        except Exception:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for m in self.members:
            m.stop()
