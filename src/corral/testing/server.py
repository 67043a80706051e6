"""Start a real corral server for a test: as a separate process, or inside the test's event loop."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from typing import AsyncIterator

from corral.server.app import Server, ServerConfig
from corral.testing.process import child_env

__all__ = ["ServerProcess", "running_server"]


class ServerProcess:
    """``corral server`` in a child process on a free loopback port, with its own data directory."""

    def __init__(self, data_dir: str, *extra_args: str, address: str = "127.0.0.1:0") -> None:
        self.data_dir = data_dir
        self.address = address
        self.extra_args = extra_args
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.log_path = os.path.join(data_dir, "server.log")

    def start(self, timeout: float = 20.0) -> str:
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
            match = re.search(r"listening on (http://\S+)", self.log())
            if match:
                self.url = match.group(1)
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as resp:
                    if resp.status == 200:
                        return self.url
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"corral server did not start in {timeout}s: {self.log()}")

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
    server = Server(ServerConfig(data_dir=data_dir, address="127.0.0.1:0", **config))  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
