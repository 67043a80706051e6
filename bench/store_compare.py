"""SQLite or etcd under corral: the same two benchmarks on each store, on this machine.

    .venv/bin/python bench/store_compare.py [--pods 10000] [--clients 32] [--workload NAME] [--repeat 1]

For each store (SQLite with synchronous=FULL; a private one-member etcd started here, on loopback,
with its own data directory under /tmp — a fresh member for every run):

1. creates/s over HTTP: ``--pods`` pod creates from ``--clients`` connections to a real
   ``corral server --no-scheduler`` process (bench/api_bench.py's create phase);
2. scheduler throughput: ``corral bench WORKLOAD`` in-process (default
   SchedulingBasic/5000Nodes_10000Pods), the server, store and scheduler in one process.

Prints one line per run and a table of medians; ``--json`` prints every figure instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.dirname(__file__))

from api_bench import bench_creates  # noqa: E402

from corral.testing import ServerProcess  # noqa: E402
from corral.testing.etcd import EtcdProcess  # noqa: E402


class Store:
    """A fresh store of one kind: ``url`` for `--store`, ``close()`` afterwards."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix=f"corral-{kind}-")
        self.etcd = None
        if kind == "etcd":
            self.etcd = EtcdProcess(os.path.join(self.dir, "etcd")).start()
            self.url = self.etcd.url
        else:
            self.url = f"sqlite://{self.dir}/corral.db"

    def close(self) -> None:
        if self.etcd is not None:
            self.etcd.stop()
        subprocess.run(["rm", "-rf", self.dir], check=False)


async def creates(kind: str, pods: int, clients: int) -> float:
    store = Store(kind)
    proc = ServerProcess(os.path.join(store.dir, "server"), "--no-scheduler", "--store", store.url)
    try:
        proc.start(timeout=30)
        result = await bench_creates(proc.credentials(), pods, clients, "bench")
        return result["createsPerSecond"]
    finally:
        proc.stop()
        store.close()


def scheduling(kind: str, workload: str) -> float:
    store = Store(kind)
    try:
        out = subprocess.run([sys.executable, "-m", "corral", "bench", workload, "--store", store.url, "-o", "json"],
                             capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            raise SystemExit(f"corral bench {workload} on {kind} failed: {out.stderr.strip()}")
        return json.loads(out.stdout)["throughput"]["average"]
    finally:
        store.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workload", default="SchedulingBasic/5000Nodes_10000Pods")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each measurement; medians are reported")
    parser.add_argument("--skip-scheduling", action="store_true", help="creates/s only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    runs: dict[str, dict[str, list[float]]] = {k: {"creates": [], "scheduling": []} for k in ("sqlite", "etcd")}
    for i in range(args.repeat):
        for kind in ("sqlite", "etcd"):  # alternated, so a noisy minute hurts both alike
            value = await creates(kind, args.pods, args.clients)
            runs[kind]["creates"].append(value)
            print(f"run {i + 1}: {kind:6} creates/s {value:,.0f}", file=sys.stderr)
            if not args.skip_scheduling:
                value = scheduling(kind, args.workload)
                runs[kind]["scheduling"].append(value)
                print(f"run {i + 1}: {kind:6} {args.workload} pods/s {value:,.0f}", file=sys.stderr)
    if args.json:
        print(json.dumps(runs, indent=2))
        return
    print(f"\n{'store':8} {'creates/s (HTTP)':>18} {args.workload + ' pods/s':>45}")
    for kind, r in runs.items():
        c = f"{statistics.median(r['creates']):,.0f}"
        s = f"{statistics.median(r['scheduling']):,.0f}" if r["scheduling"] else "-"
        print(f"{kind:8} {c:>18} {s:>45}")


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main())
