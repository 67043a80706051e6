"""Agent benchmark: apply → Running for N process-runtime pods across 3 agents, and the agents'
CPU and memory while idle with those pods running.

    .venv/bin/python bench/agent_bench.py [--pods 100] [--agents 3] [--idle 30] [--json]

Starts a real server (scheduler, controllers) and agent processes on this machine (heartbeat every
10 s, as by default), creates the pods concurrently over HTTP, and follows a watch to time each
pod from its create to the status that says Running. Then it samples each agent's CPU time and
RSS from /proc over ``--idle`` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from corral.testing.cluster import LocalCluster, wait_for  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def pod(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"bench-{i}"},
            "spec": {"containers": [{"name": "main", "image": "local/none", "command": ["sleep", "3600"],
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}


async def measure(cluster, n: int) -> dict:
    async with cluster.server.client() as client:
        rv = (await client.list("pods", "default")).resource_version
        created: dict[str, float] = {}
        running: dict[str, float] = {}

        async def follow() -> None:
            async for ev in client.watch("pods", "default", resource_version=rv, raw=True):
                if ev.type != "BOOKMARK" and (ev.object.get("status") or {}).get("phase") == "Running":
                    running.setdefault(ev.object["metadata"]["name"], time.perf_counter())
                    if len(running) == n:
                        return

        watcher = asyncio.create_task(follow())
        start = time.perf_counter()

        async def create(i: int) -> None:
            await client.create(pod(i))
            created[f"bench-{i}"] = time.perf_counter()

        sem = asyncio.Semaphore(16)

        async def limited(i: int) -> None:
            async with sem:
                await create(i)

        await asyncio.gather(*(limited(i) for i in range(n)))
        await asyncio.wait_for(watcher, 120)
        latencies = sorted(running[k] - created[k] for k in created)
        return {"pods": n, "allRunningSeconds": round(max(running.values()) - start, 2),
                "applyToRunningMs": {"p50": round(statistics.median(latencies) * 1000),
                                     "p99": round(latencies[int(len(latencies) * 0.99) - 1] * 1000),
                                     "max": round(latencies[-1] * 1000)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=100)
    parser.add_argument("--agents", type=int, default=3)
    parser.add_argument("--idle", type=float, default=30.0, help="seconds to sample the idle agents")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="corral-agent-bench-") as root:
        # The default heartbeat (10 s), not the tests' 1 s.
        cluster = LocalCluster(root, agents=args.agents, heartbeat=10, agent_args=("--log-level", "warning"))
        cluster.start()
        try:
            wait_for(lambda: _ready_nodes(cluster) == args.agents, what="agents registered")
            result = asyncio.run(measure(cluster, args.pods))
            pids = {name: p.pid for name, p in cluster.agents.items()}
            before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            time.sleep(args.idle)
            idle = {name: {"cpuPercent": round((cpu_seconds(pid) - before[name]) * 100 / args.idle, 2),
                           "rssMiB": round(rss_bytes(pid) / 2**20, 1)} for name, pid in pids.items()}
            result["idleAgents"] = idle
            result["podsPerAgent"] = args.pods / args.agents
        finally:
            cluster.stop()
    if args.json:
        print(json.dumps(result, indent=2))
        return
    lat = result["applyToRunningMs"]
    print(f"{args.pods} pods across {args.agents} agents: all Running {result['allRunningSeconds']} s after the "
          f"first create; apply→Running p50 {lat['p50']} ms, p99 {lat['p99']} ms")
    for name, v in idle.items():
        print(f"  {name} idle with ~{args.pods // args.agents} pods: CPU {v['cpuPercent']}% of a core, RSS {v['rssMiB']} MiB")


def _ready_nodes(cluster) -> int:
    async def count() -> int:
        async with cluster.server.client() as c:
            nodes = (await c.list("nodes", raw=True)).items
        return sum(1 for n in nodes for cond in n["status"].get("conditions", ())
                   if cond["type"] == "Ready" and cond["status"] == "True")

    return asyncio.run(count())


if __name__ == "__main__":
    main()
