"""Where an in-process benchmark's CPU goes: the scheduler, the rest of the control plane, the store's writer.

    .venv/bin/python bench/split_bench.py [--workload SchedulingBasic/5000Nodes_10000Pods] [--repeat 3] [--json]

Each round runs the workload in-process twice, one after the other:

- ``whole``: as ``corral bench`` runs it (server, store and scheduler in one process);
- ``no scheduler``: the same server without its scheduler. A stand-in binds each new pod without
  scheduling it (round-robin over the nodes) but writes what the scheduler writes for a pod: its
  binding and its Scheduled event, through the scheduler's own writer and event recorder.

For the measured pods each run gives pods/s, and the CPU per pod of the event loop's thread and of
the process's other threads (the store's writer, mostly). The loop's CPU per pod in ``whole`` minus
that in ``no scheduler`` is the scheduler's. ``no scheduler`` is what would stay in the server's
process if the scheduler ran in a process of its own: the loop's CPU per pod in ``whole`` divided by
that in ``no scheduler`` bounds the gain of such a split, before the cost of the channel between the
two processes. Prefix ``taskset -c 0`` for the figures on one core.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from corral.bench.runner import Progress, run_workload  # noqa: E402
from corral.bench.targets import InProcessTarget  # noqa: E402
from corral.bench.workloads import resolve  # noqa: E402
from corral.scheduler.process import PodRef  # noqa: E402
from corral.store.base import EventType  # noqa: E402

_PODS, _NODES = "/core/pods/", "/core/nodes/"


class CpuMeter(Progress):
    """CPU of the event loop's thread and of the whole process while the measured pods are created
    and bound (from the runner's "(measured)" phase to its "collecting" phase)."""

    def __init__(self) -> None:
        self._start: tuple[float, float] | None = None
        self.loop_seconds = self.process_seconds = 0.0

    def phase(self, text: str, total: int) -> None:
        if "(measured)" in text:
            self._start = (time.thread_time(), time.process_time())
        elif text.startswith("collecting") and self._start is not None:
            self.loop_seconds = time.thread_time() - self._start[0]
            self.process_seconds = time.process_time() - self._start[1]


class NoSchedulerTarget(InProcessTarget):
    """The in-process target with the server's scheduler left out and a stand-in binding each new pod."""

    async def start(self) -> None:
        from corral.scheduler.cluster import EventRecorder, InProcessWriter
        from corral.server.app import Server, ServerConfig
        from corral.server.rest import WriteOptions

        self.server = Server(ServerConfig(data_dir=self._tmp.name, store_url=self.store_url, address="127.0.0.1:0",
                                          user_kubeconfig=False, controllers=False, leader_elect=False,
                                          scheduler=False))
        await self.server.start()
        self._opts = WriteOptions(warn=False)
        self.server.cache.on_event.append(self._on_event)
        self._writer = InProcessWriter(self.server.api)
        self._events = EventRecorder(self._writer)
        self._events.start()
        self._slots = asyncio.Semaphore(512)  # the scheduler's bindings in flight
        self._nodes: itertools.cycle | None = None
        self._binds: set[asyncio.Task] = set()
        self.bound = 0  # pods the stand-in bound
        self.server.cache.on_event.append(self._bind_new)

    def _bind_new(self, event) -> None:
        key = event.record.key
        if event.type is not EventType.ADDED or not key.startswith(_PODS):
            return
        obj = event.record.obj
        if (obj.get("spec") or {}).get("nodeName"):
            return
        if self._nodes is None:  # the nodes are all created before the first pod
            self._nodes = itertools.cycle([r.key[len(_NODES):] for r in self.server.cache.items(_NODES)])
        meta = obj["metadata"]
        pod = PodRef(meta["namespace"], meta["name"], meta["uid"])
        task = asyncio.get_running_loop().create_task(self._bind(pod, next(self._nodes)))
        self._binds.add(task)
        task.add_done_callback(self._binds.discard)

    async def _bind(self, pod: PodRef, node: str) -> None:
        async with self._slots:
            status = await self._writer.bind(pod, node)
        if status.ok:
            self.bound += 1
            self._events.record(pod, "Normal", "Scheduled", f"Successfully assigned {pod.namespace}/{pod.name} to {node}")

    async def stop(self) -> None:
        if self.server is not None:
            await self._events.stop()
            for task in list(self._binds):
                task.cancel()
        await super().stop()


async def measure(workload: str, split: bool) -> dict:
    wl, size = resolve(workload)
    meter = CpuMeter()
    target = (NoSchedulerTarget if split else InProcessTarget)(lambda *a: None)
    data = (await run_workload(wl, size, target, progress=meter)).data
    pods = data["measuredPods"]
    if data["boundPods"] != pods:
        raise SystemExit(f"{workload}: only {data['boundPods']} of {pods} measured pods were bound")
    return {"podsPerSecond": data["throughput"]["average"],
            "loopMicrosPerPod": round(meter.loop_seconds / pods * 1e6, 1),
            "otherThreadsMicrosPerPod": round((meter.process_seconds - meter.loop_seconds) / pods * 1e6, 1),
            "boundByStandIn": getattr(target, "bound", 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workload", default="SchedulingBasic/5000Nodes_10000Pods")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print every run's figures as JSON")
    args = parser.parse_args()
    try:
        import uvloop
        run = uvloop.run
    except ImportError:  # uvloop is declared, but the figures do not depend on it being there
        run = asyncio.run
    runs: dict[str, list[dict]] = {"whole": [], "no scheduler": []}
    for _ in range(args.repeat):
        for name, split in (("whole", False), ("no scheduler", True)):
            result = run(measure(args.workload, split))
            runs[name].append(result)
            if not args.json:
                print(f"{name:>12}: {result['podsPerSecond']:>8,.0f} pods/s; CPU per pod: event loop "
                      f"{result['loopMicrosPerPod']:.0f} µs, other threads {result['otherThreadsMicrosPerPod']:.0f} µs",
                      flush=True)
    medians = {name: {k: statistics.median(r[k] for r in results) for k in results[0] if k != "boundByStandIn"}
               for name, results in runs.items()}
    whole, alone = medians["whole"]["loopMicrosPerPod"], medians["no scheduler"]["loopMicrosPerPod"]
    summary = {"workload": args.workload, "medians": medians,
               "schedulerLoopMicrosPerPod": round(whole - alone, 1),
               "schedulerShareOfLoop": round((whole - alone) / whole, 3) if whole else None,
               "splitGainBound": round(whole / alone, 2) if alone else None}
    if args.json:
        print(json.dumps({"runs": runs, **summary}, indent=2))
        return
    print(f"medians of {args.repeat}: the scheduler takes {whole - alone:.0f} µs of the event loop's {whole:.0f} µs "
          f"per pod ({summary['schedulerShareOfLoop']:.0%}); a scheduler in its own process could gain at most "
          f"{summary['splitGainBound']:.2f}x before the channel's cost "
          f"(the control plane alone: {medians['no scheduler']['podsPerSecond']:,.0f} pods/s as measured here)")


if __name__ == "__main__":
    main()
