"""Start a real corral server for a test: as a separate process, or inside the test's event loop."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from typing import Any, AsyncIterator

from corral.client.rest import Client
from corral.pki.ca import ca_pin
from corral.pki.kubeconfig import Credentials, load_credentials
from corral.server.app import Server, ServerConfig
from corral.testing.process import child_env

__all__ = ["ServerProcess", "running_server", "recorded_events", "record_writes", "LateCache"]


class ServerProcess:
    """``corral server`` in a child process on a free loopback port, with its own data directory."""

    def __init__(self, data_dir: str, *extra_args: str, address: str = "127.0.0.1:0") -> None:
        self.data_dir = data_dir
        self.address = address
        # A test server never writes the user's ~/.config/corral/kubeconfig, unless the test asks.
        self.extra_args = extra_args if "--write-kubeconfig" in extra_args else (*extra_args, "--no-write-kubeconfig")
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.log_path = os.path.join(data_dir, "server.log")
        self.kubeconfig = os.path.join(data_dir, "admin.kubeconfig")  # written by the server at start

    def start(self, timeout: float = 60.0) -> str:
        os.makedirs(self.data_dir, exist_ok=True)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "corral", "server", "--data-dir", self.data_dir,
             "--address", self.address, *self.extra_args],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=child_env(),
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"corral server exited with {self.proc.returncode}: {self.log()}")
            match = re.search(r"listening on (https://\S+)", self.log())
            if match and os.path.exists(self.kubeconfig):
                self.url = match.group(1)
                try:
                    with urllib.request.urlopen(self.url + "/readyz", timeout=5, context=self.ssl_context()) as resp:
                        if resp.status == 200:
                            return self.url
                except OSError:  # not ready yet: a handshake timed out on a loaded machine, a 503
                    pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"corral server did not start in {timeout}s: {self.log()}")

    @property
    def ca_file(self) -> str:
        return os.path.join(self.data_dir, "pki", "ca.crt")

    def ssl_context(self) -> ssl.SSLContext:
        """Trusts this server's CA (for plain urllib requests of public paths)."""
        return ssl.create_default_context(cafile=self.ca_file)

    def credentials(self) -> Credentials:
        """The admin credential, from the kubeconfig the server wrote."""
        creds = load_credentials(self.kubeconfig)
        assert creds is not None, f"{self.kubeconfig} is missing"
        return creds

    def client(self, **kwargs: object) -> Client:
        return Client(credentials=self.credentials(), **kwargs)  # type: ignore[arg-type]

    def join_args(self) -> list[str]:
        """``--server``, ``--token`` and ``--ca-cert-hash`` for an agent to join this server."""
        with open(os.path.join(self.data_dir, "join-token"), encoding="utf-8") as f:
            token = f.read().strip()
        with open(self.ca_file, "rb") as f:
            pin = ca_pin(f.read())
        return ["--server", self.url, "--token", token, "--ca-cert-hash", pin]

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def kill(self) -> None:
        """``kill -9``: no chance to flush or clean up."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def __enter__(self) -> "ServerProcess":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.asynccontextmanager
async def running_server(data_dir: str, **config: object) -> AsyncIterator[Server]:
    """A server inside the current event loop, on a free loopback port."""
    config.setdefault("user_kubeconfig", False)
    config.setdefault("address", "127.0.0.1:0")
    server = Server(ServerConfig(data_dir=data_dir, **config))  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def recorded_events(controller: Any) -> list[tuple[str, str, str]]:
    """(type, reason, message) of every Event in the store of ``controller``'s API, oldest first,
    once the events it recorded are written."""
    from corral.api.resources import by_kind

    await controller.events.drain()
    await controller.api.cache.wait_consistent()
    events = sorted((r.obj for r in controller.api.cache.items(by_kind("Event").store_prefix)),
                    key=lambda e: int(e["metadata"]["resourceVersion"]))
    return [(e["type"], e["reason"], e["message"]) for e in events]


def record_writes(api: Any, monkeypatch: Any) -> list[tuple[str, tuple]]:
    """Replace ``api``'s writes (create, update, patch, delete) with a record of each call, (verb,
    its first three arguments): a test that expects a sync to send nothing asserts it stays empty."""
    writes: list[tuple[str, tuple]] = []
    for verb in ("create", "update", "patch", "delete"):
        monkeypatch.setattr(api, verb, lambda *a, _verb=verb, **k: writes.append((_verb, a[:3])))
    return writes


class LateCache:
    """An in-process server's watch cache made to hear of writes late, as it does on etcd, where even
    this server's own writes come back through etcd's watch a moment after they are acknowledged.
    :meth:`hold_from` arms it: from the first batch of store events ``starts`` accepts, every batch is
    kept back (``held``) until :meth:`release` applies them, in their order."""

    def __init__(self, cache: Any, monkeypatch: Any) -> None:
        self._apply = cache._apply
        self._starts: Any = None
        self.held: list[list[Any]] | None = None
        monkeypatch.setattr(cache, "_apply", self._maybe_apply)

    def _maybe_apply(self, batch: list[Any]) -> None:
        if self.held is None and self._starts is not None and self._starts(batch):
            self.held = []
        if self.held is None:
            self._apply(batch)
        else:
            self.held.append(batch)

    def hold_from(self, starts: Any) -> None:
        self._starts = starts

    def held_events(self) -> list[Any]:
        return [event for batch in self.held or () for event in batch]

    def release(self) -> None:
        held, self.held, self._starts = self.held or [], None, None
        for batch in held:
            self._apply(batch)
