"""What an agent says about its node: capacity read from the host, allocatable, labels, taints,
addresses and system info. Parsing of the agent's ``--labels``, ``--taints``, ``--capacity`` and
``--reserved`` flags lives here too."""

from __future__ import annotations

import os
import platform
import shutil
import socket
from typing import Any

import corral
from corral.api.quantity import QuantityError, format_bytes, format_cpu, to_milli, to_units

__all__ = ["default_node_name", "host_capacity", "parse_pairs", "parse_taints", "allocatable", "node_object", "FlagError",
           "default_address", "system_info", "go_arch"]


def go_arch() -> str:
    """This machine's architecture in Kubernetes' (Go's) words: amd64, arm64, ..."""
    return {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "i686": "386"}.get(platform.machine(),
                                                                                    platform.machine())


def _first_line(*paths: str) -> str:
    for path in paths:
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                return f.readline().strip()
        except OSError:
            continue
    return ""


def system_info(runtime_version: str) -> dict[str, str]:
    """``status.nodeInfo`` with every field clients' schemas require (the official Python client
    refuses a Node that lacks one), read where the kubelet reads them; "" where this machine has
    none (no DMI product UUID in many VMs; kube-proxy does not exist here)."""
    try:
        os_image = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        os_image = ""
    return {
        "machineID": _first_line("/etc/machine-id", "/var/lib/dbus/machine-id"),
        "systemUUID": _first_line("/sys/class/dmi/id/product_uuid").lower(),
        "bootID": _first_line("/proc/sys/kernel/random/boot_id"),
        "kernelVersion": platform.release(),
        "osImage": os_image or platform.platform(),
        "containerRuntimeVersion": runtime_version,
        "kubeletVersion": corral.GIT_VERSION,
        "kubeProxyVersion": "",
        "operatingSystem": platform.system().lower(),
        "architecture": go_arch(),
    }


class FlagError(ValueError):
    """A malformed agent flag; the message names the flag and the bad part."""


def default_node_name() -> str:
    """This machine's hostname as a valid node name (DNS-1123: lower case, digits, '-', '.')."""
    import re

    name = re.sub(r"[^a-z0-9.-]+", "-", socket.gethostname().lower()).strip("-.")
    return name[:253] or "node"


def host_capacity(data_dir: str) -> dict[str, str]:
    """cpu, memory, ephemeral-storage (of the data directory's disk) and pods (110, as kubelet)."""
    memory = 0
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    memory = int(line.split()[1]) * 1024
    except OSError:
        pass
    os.makedirs(data_dir, exist_ok=True)
    disk = shutil.disk_usage(data_dir).total
    return {"cpu": str(os.cpu_count() or 1), "memory": format_bytes(memory), "ephemeral-storage": format_bytes(disk),
            "pods": "110"}


def parse_pairs(text: str | None, flag: str) -> dict[str, str]:
    """``a=1,b=2`` → {"a": "1", "b": "2"}."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise FlagError(f"{flag}: expected KEY=VALUE, got {part.strip()!r}")
        out[key.strip()] = value.strip()
    return out


def parse_taints(text: str | None) -> list[dict[str, str]]:
    """``key=value:NoSchedule,other:NoExecute`` → Node taints."""
    taints = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        head, sep, effect = part.strip().rpartition(":")
        if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise FlagError(f"--taints: expected KEY[=VALUE]:EFFECT with EFFECT NoSchedule, PreferNoSchedule or "
                            f"NoExecute, got {part.strip()!r}")
        key, _, value = head.partition("=")
        taints.append({"key": key, "value": value, "effect": effect})
    return taints


def allocatable(capacity: dict[str, str], reserved: dict[str, str]) -> dict[str, str]:
    """capacity − reserved, per resource, never below zero."""
    out = {}
    for name, value in capacity.items():
        try:
            if name == "cpu":
                out[name] = format_cpu(max(to_milli(value) - to_milli(reserved.get(name, "0")), 0))
            else:
                amount = max(to_units(value) - to_units(reserved.get(name, "0")), 0)
                out[name] = format_bytes(amount) if name in ("memory", "ephemeral-storage") else str(amount)
        except QuantityError as exc:
            raise FlagError(f"--reserved/--capacity {name}: {exc}") from None
    return out


def default_address(toward: str | None = None) -> str:
    """The address the API server at host ``toward`` reaches this machine on: the source address of
    the route to it (a UDP socket is routed, nothing is sent), as kubelet picks its node IP; without
    ``toward`` or a route, this machine's address as its host name resolves (loopback when it does
    not). Host names often resolve to loopback (Debian's 127.0.1.1), useless to another machine."""
    if toward:
        try:
            family, _, _, _, sockaddr = socket.getaddrinfo(toward, 9, type=socket.SOCK_DGRAM)[0]
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect(sockaddr)
                return str(s.getsockname()[0])
        except OSError:
            pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def node_object(name: str, *, capacity: dict[str, str], reserved: dict[str, str], labels: dict[str, str],
                taints: list[dict[str, str]], address: str | None, port: int, runtime_version: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": platform.system().lower(),
            "kubernetes.io/arch": go_arch(),
            **labels}},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable(capacity, reserved),
            "addresses": [{"type": "InternalIP", "address": address or default_address()},
                          {"type": "Hostname", "address": socket.gethostname()}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "nodeInfo": system_info(runtime_version),
        },
    }
