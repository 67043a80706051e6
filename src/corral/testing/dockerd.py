"""A private Docker engine for tests: its own data root, exec root and socket, on no default bridge,
with a busybox image built locally from Debian's busybox-static (no registry is needed)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import time

__all__ = ["Dockerd", "BUSYBOX_IMAGE", "DockerdMissing"]

BUSYBOX_IMAGE = "corral.local/busybox:1"
_APPLETS = ("sh", "echo", "sleep", "cat", "ls", "httpd", "true", "false", "yes", "head", "wc", "env", "date", "tar",
            "hostname")


class DockerdMissing(RuntimeError):
    """dockerd or busybox is not installed; `make test` installs them (Debian docker.io, busybox-static)."""


class Dockerd:
    def __init__(self, root: str) -> None:
        self.root = root
        # A unix socket path must stay short: keep the exec root and socket in a short temp dir.
        self.short = tempfile.mkdtemp(prefix="cd-", dir="/tmp")
        self.socket = os.path.join(self.short, "d.sock")
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> "Dockerd":
        binary = shutil.which("dockerd") or ("/usr/sbin/dockerd" if os.path.exists("/usr/sbin/dockerd") else None)
        if binary is None:
            raise DockerdMissing("dockerd is not installed: run `make test`, which installs Debian's docker.io")
        busybox = shutil.which("busybox")
        if busybox is None:
            raise DockerdMissing("busybox is not installed: run `make test`, which installs Debian's busybox-static")
        os.makedirs(self.root, exist_ok=True)
        log = open(os.path.join(self.root, "dockerd.log"), "wb")
        self.proc = subprocess.Popen(
            [binary, "--data-root", os.path.join(self.root, "data"), "--exec-root", os.path.join(self.short, "x"),
             "-H", self.url, "--pidfile", os.path.join(self.short, "d.pid"), "--bridge=none", "--iptables=false",
             "--ip-masq=false"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        import docker

        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dockerd exited: {self.log()[-2000:]}")
            try:
                client = docker.DockerClient(base_url=self.url, timeout=10)
                client.ping()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"dockerd did not start in {timeout}s: {self.log()[-2000:]}") from None
                time.sleep(0.2)
        self._import_busybox(client, busybox)
        client.close()
        return self

    @staticmethod
    def _import_busybox(client, busybox: str) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(busybox, arcname="bin/busybox")
            for applet in _APPLETS:
                info = tarfile.TarInfo(f"bin/{applet}")
                info.type, info.linkname = tarfile.SYMTYPE, "busybox"
                tar.addfile(info)
            for d in ("tmp", "www"):
                info = tarfile.TarInfo(d)
                info.type, info.mode = tarfile.DIRTYPE, 0o1777
                tar.addfile(info)
        repo, tag = BUSYBOX_IMAGE.rsplit(":", 1)
        client.api.import_image_from_data(buf.getvalue(), repository=repo, tag=tag)

    def log(self) -> str:
        try:
            with open(os.path.join(self.root, "dockerd.log"), encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            import docker

            client = docker.DockerClient(base_url=self.url, timeout=10)
            for c in client.containers.list(all=True):
                c.remove(force=True)
            client.close()
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        shutil.rmtree(self.short, ignore_errors=True)
