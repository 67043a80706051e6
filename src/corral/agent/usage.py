"""What the node and its containers use, measured by the agent: ``kubectl top`` and Prometheus.

Every ``interval`` seconds the sampler reads cumulative figures — the node's busy CPU time
(``/proc/stat``) and memory in use (``MemTotal - MemAvailable``), and each running container's CPU
time and memory from its runtime — and keeps the last two samples. CPU usage is the rate between
them, memory the last reading, as metrics-server reports them; the window is the time between the
samples. The API server asks for them (``GET /stats``, on the endpoint only it may call) when a user
runs ``kubectl top``; ``GET /metrics`` (or ``/metrics/resource``, the kubelet's path) gives the
same figures to Prometheus, with the names the kubelet uses (``container_cpu_usage_seconds_total``,
``…_memory_working_set_bytes``, and the node's), through the server's
``nodes/{name}/proxy/metrics``: the agent's endpoint answers only the server.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from corral.api.defaults import rfc3339

if TYPE_CHECKING:
    from corral.agent.agent import Agent

__all__ = ["UsageSampler", "Sample", "node_figures"]

log = logging.getLogger(__name__)
_TICKS = os.sysconf("SC_CLK_TCK")


def node_figures(proc: str = "/proc") -> tuple[float, int]:
    """(CPU seconds spent busy since boot, over all CPUs; bytes of memory in use)."""
    with open(f"{proc}/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)  # less idle and iowait
    with open(f"{proc}/meminfo", encoding="ascii") as f:
        info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if line.split()[1:]}
    return busy / _TICKS, info.get("MemTotal", 0) - info.get("MemAvailable", info.get("MemFree", 0))


@dataclass(slots=True)
class Sample:
    at: float  # wall-clock seconds
    node: tuple[float, int]  # (cpu seconds, memory bytes)
    containers: dict[tuple[str, str, str], tuple[float, int]] = field(default_factory=dict)  # (ns, pod, c) →


class UsageSampler:
    def __init__(self, agent: Agent, interval: float = 10.0) -> None:
        self.agent = agent
        self.interval = interval
        self.previous: Sample | None = None
        self.last: Sample | None = None

    async def run(self) -> None:
        while True:
            try:
                await self.sample()
            except Exception:  # measured again next time; a failed reading must not stop the agent
                log.exception("measuring the node's usage failed")
            await asyncio.sleep(self.interval)

    async def sample(self) -> None:
        refs = {(entry.namespace, entry.name, name): ref
                for entry in list(self.agent.pods.values()) for name, ref in entry.refs.items()}
        usage = await self.agent.runtime.usage(list(refs.values()))
        sample = Sample(time.time(), await asyncio.to_thread(node_figures),
                        {key: usage[ref.id] for key, ref in refs.items() if ref.id in usage})
        self.previous, self.last = self.last, sample

    def stats(self) -> dict[str, Any] | None:
        """The rates between the last two samples, or None before there are two."""
        before, after = self.previous, self.last
        if before is None or after is None or after.at <= before.at:
            return None
        window = after.at - before.at

        def rate(now: float, then: float) -> int:
            return max(int((now - then) / window * 1e9), 0)  # nanocores

        pods: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for (ns, pod, name), (cpu, memory) in after.containers.items():
            then = before.containers.get((ns, pod, name))
            if then is None:  # started since: no rate yet
                continue
            pods.setdefault((ns, pod), []).append({"name": name, "cpuNanoCores": rate(cpu, then[0]),
                                                   "memoryBytes": memory})
        return {"timestamp": rfc3339(after.at), "windowSeconds": round(window, 3),
                "node": {"cpuNanoCores": rate(after.node[0], before.node[0]), "memoryBytes": after.node[1]},
                "pods": [{"namespace": ns, "name": pod, "containers": cs} for (ns, pod), cs in sorted(pods.items())]}

    def prometheus(self) -> str:
        """The last sample's cumulative figures in Prometheus' text format, as the kubelet names them."""
        sample = self.last
        if sample is None:
            return ""
        ms = int(sample.at * 1000)
        lines = ["# HELP node_cpu_usage_seconds_total Cumulative cpu time consumed by the node in core-seconds",
                 "# TYPE node_cpu_usage_seconds_total counter",
                 f"node_cpu_usage_seconds_total {sample.node[0]:.6f} {ms}",
                 "# HELP node_memory_working_set_bytes Current working set of the node in bytes",
                 "# TYPE node_memory_working_set_bytes gauge",
                 f"node_memory_working_set_bytes {sample.node[1]} {ms}",
                 "# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed by the container in "
                 "core-seconds", "# TYPE container_cpu_usage_seconds_total counter"]
        labels = {key: f'container="{_esc(key[2])}",namespace="{_esc(key[0])}",pod="{_esc(key[1])}"'
                  for key in sample.containers}
        lines += [f"container_cpu_usage_seconds_total{{{labels[k]}}} {cpu:.6f} {ms}"
                  for k, (cpu, _) in sorted(sample.containers.items())]
        lines += ["# HELP container_memory_working_set_bytes Current working set of the container in bytes",
                  "# TYPE container_memory_working_set_bytes gauge"]
        lines += [f"container_memory_working_set_bytes{{{labels[k]}}} {memory} {ms}"
                  for k, (_, memory) in sorted(sample.containers.items())]
        return "\n".join(lines) + "\n"


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
