"""SQLite or etcd under corral: the same three benchmarks on each store, on this machine.

    .venv/bin/python bench/store_compare.py [--store-writes 20000] [--pods 10000] [--clients 32]
                                            [--workload NAME] [--creators 64] [--repeat 1]

For each store (SQLite with synchronous=FULL; a private one-member etcd started here, on loopback,
with its own data directory under /tmp — a fresh member for every run):

0. writes/s into the store itself (no API): ``--store-writes`` pod creates from 256 concurrent
   writers, then a compare-and-swap update of each, as a binding is, with a watch following them
   as the server's cache does: how far the store is from being the limit (each scheduled pod costs
   a create, a binding and an event), and the CPU each write costs this process, its event loop's
   thread and the etcd member;
1. creates/s over HTTP: ``--pods`` pod creates from ``--clients`` connections to a real
   ``corral server --no-scheduler`` process (bench/api_bench.py's create phase);
2. scheduler throughput: ``corral bench WORKLOAD --creators N`` in-process (default
   SchedulingBasic/5000Nodes_10000Pods, 64 creators), the server and store in this process and the
   scheduler where ``corral server`` would run it (a child process where two cores are usable).

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
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.dirname(__file__))

from api_bench import bench_creates  # noqa: E402
from security_cost import cpu_seconds  # noqa: E402

from corral.bench import CREATORS  # noqa: E402
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


def scheduling(kind: str, workload: str, creators: int) -> float:
    store = Store(kind)
    try:
        out = subprocess.run([sys.executable, "-m", "corral", "bench", workload, "--store", store.url,
                              "--creators", str(creators), "-o", "json"],
                             capture_output=True, text=True, timeout=1800)
        if out.returncode != 0:
            raise SystemExit(f"corral bench {workload} on {kind} failed: {out.stderr.strip()}")
        return json.loads(out.stdout)["throughput"]["average"]
    finally:
        store.close()


async def store_writes(kind: str, writes: int, writers: int = 256) -> tuple[dict, dict]:
    """Writes into the store itself, no API: ``writes`` pod creates, then a binding-sized update of
    each (compare-and-swap on the revision the create returned), from ``writers`` concurrent writers;
    what the scheduler's bindings, events and the API's creates ask of the store. A watch follows
    every write, as the server's watch cache does. For each phase: writes/s, and the CPU a write cost
    this process, its event loop's thread and the etcd member (µs)."""
    from corral.store import open_store

    dir_ = Store(kind)
    store = await open_store(dir_.url)
    seen = 0

    async def follow() -> None:
        nonlocal seen
        async for batch in store.watch("/", store.revision, last_states=False):
            seen += len(batch)

    watching = asyncio.create_task(follow())
    try:
        def pod(i: int, **spec) -> dict:
            return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}

        made: dict[int, int] = {}

        async def phase(write) -> dict:
            todo = iter(range(writes))
            member = dir_.etcd.proc.pid if dir_.etcd is not None else None

            async def writer() -> None:
                for i in todo:
                    await write(i)

            until = seen + writes
            start, cpu, loop_cpu = time.perf_counter(), time.process_time(), time.thread_time()
            member_cpu = cpu_seconds(member) if member else 0.0
            await asyncio.gather(*(writer() for _ in range(writers)))
            while seen < until:  # the watch has had every write
                await asyncio.sleep(0.005)
            micros = 1e6 / writes
            return {"perSecond": writes / (time.perf_counter() - start),
                    "processMicros": (time.process_time() - cpu) * micros,
                    "loopMicros": (time.thread_time() - loop_cpu) * micros,
                    "memberMicros": (cpu_seconds(member) - member_cpu) * micros if member else 0.0}

        async def create(i: int) -> None:
            made[i] = (await store.create(f"/core/pods/default/p{i}", pod(i))).revision

        async def bind(i: int) -> None:
            await store.update(f"/core/pods/default/p{i}", pod(i, nodeName="n1"), made[i])

        return await phase(create), await phase(bind)
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await store.close()
        dir_.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workload", default="SchedulingBasic/5000Nodes_10000Pods")
    parser.add_argument("--creators", type=int, default=CREATORS, help="the scheduling runs' creates in flight at once")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each measurement; medians are reported")
    parser.add_argument("--skip-scheduling", action="store_true", help="creates/s only")
    parser.add_argument("--store-writes", type=int, default=20_000,
                        help="creates, then as many updates, straight into the store (0: skip)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    runs: dict[str, dict[str, list]] = {
        k: {"creates": [], "scheduling": [], "storeCreates": [], "storeUpdates": [], "storeWriteCpuMicros": []}
        for k in ("sqlite", "etcd")}
    for i in range(args.repeat):
        for kind in ("sqlite", "etcd"):  # alternated, so a noisy minute hurts both alike
            if args.store_writes:
                made, bound = await store_writes(kind, args.store_writes)
                runs[kind]["storeCreates"].append(made["perSecond"])
                runs[kind]["storeUpdates"].append(bound["perSecond"])
                for name, one in (("create", made), ("update", bound)):
                    runs[kind]["storeWriteCpuMicros"].append({"write": name, **{
                        k: round(v, 1) for k, v in one.items() if k.endswith("Micros")}})
                print(f"run {i + 1}: {kind:6} store creates/s {made['perSecond']:,.0f}, updates/s "
                      f"{bound['perSecond']:,.0f}; CPU a write (create, update), µs: this process "
                      f"{made['processMicros']:.1f}, {bound['processMicros']:.1f} (its loop's thread "
                      f"{made['loopMicros']:.1f}, {bound['loopMicros']:.1f})" + (
                          f", etcd member {made['memberMicros']:.1f}, {bound['memberMicros']:.1f}"
                          if kind == "etcd" else ""), file=sys.stderr)
            value = await creates(kind, args.pods, args.clients)
            runs[kind]["creates"].append(value)
            print(f"run {i + 1}: {kind:6} creates/s {value:,.0f}", file=sys.stderr)
            if not args.skip_scheduling:
                value = scheduling(kind, args.workload, args.creators)
                runs[kind]["scheduling"].append(value)
                print(f"run {i + 1}: {kind:6} {args.workload} pods/s {value:,.0f}", file=sys.stderr)
    if args.json:
        print(json.dumps(runs, indent=2))
        return
    def median(values: list[float]) -> str:
        return f"{statistics.median(values):,.0f}" if values else "-"

    print(f"\n{'store':8} {'store creates/s':>16} {'store updates/s':>16} {'creates/s (HTTP)':>18} "
          f"{args.workload + ' pods/s':>45}")
    for kind, r in runs.items():
        print(f"{kind:8} {median(r['storeCreates']):>16} {median(r['storeUpdates']):>16} {median(r['creates']):>18} "
              f"{median(r['scheduling']):>45}")


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main())
