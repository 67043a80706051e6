"""Scheduling-decision microbenchmark: the scheduler_perf basic pod on N nodes, all nodes evaluated.

    .venv/bin/python bench/scheduler_bench.py [--nodes 5000] [--pods 10000] [--repeat 3] [--profile] [--full]

Nodes have 4 cpu, 32Gi memory, 110 pods, Ready with a fresh heartbeat; pods request 100m cpu and
500Mi memory (scheduler_perf's shapes). Each decision runs the default profile's filters and scores
over every node (percentageOfNodesToScore 100), then assumes the pod on the chosen node, as the
scheduler does before binding. No I/O: this measures the cycle itself. Each round times the profile
as it ships (remembering a pod signature's rows and scores, every changed node evaluated again) and
with remembering switched off (every node evaluated in full for every pod), interleaved; ``--full``
times only the latter. The decision alone (without assuming the pod) is timed separately. Last, the
attempt of a pod no node takes, once the pods are placed: its filters, then preemption's search
for nodes where removing lower-priority pods would make room (there are none), as the scheduler
repeats it for every such pod each time it is tried again.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from corral.api.defaults import now_rfc3339  # noqa: E402
from corral.scheduler.cache.cache import Cache  # noqa: E402
from corral.scheduler.framework.podinfo import PodInfo  # noqa: E402
from corral.scheduler.profiles import build_frameworks, parse_config  # noqa: E402
from corral.scheduler.framework.interface import CycleState  # noqa: E402
from corral.scheduler.schedule_one import FitError, post_filter, schedule_pod  # noqa: E402


def node(i: int) -> dict:
    return {
        "metadata": {"name": f"node-{i:05d}", "labels": {"kubernetes.io/hostname": f"node-{i:05d}"}},
        "status": {"allocatable": {"cpu": "4", "memory": "32Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": now_rfc3339()}]},
    }


def pod(i: int) -> dict:
    return {
        "metadata": {"name": f"pod-{i}", "namespace": "default", "uid": f"uid-{i}"},
        "spec": {"schedulerName": "default-scheduler", "containers": [{
            "name": "pause", "image": "registry.k8s.io/pause:3.9",
            "resources": {"requests": {"cpu": "100m", "memory": "500Mi"},
                          "limits": {"cpu": "100m", "memory": "500Mi"}}}]},
    }


def cluster(nodes: int) -> tuple[Cache, Any]:
    """A cache of ``nodes`` nodes and the default profile's framework over it."""
    cache = Cache()
    for i in range(nodes):
        cache.set_node(node(i))
    return cache, build_frameworks(parse_config({}), cache=cache, clock=time.time)["default-scheduler"]


def run(nodes: int, pods: int, remember: bool = True) -> tuple[float, float]:
    """(decisions/s with the pod assumed after each, mean µs of the decision alone)."""
    cache, fwk = cluster(nodes)
    fwk.remembered.enabled = remember
    infos = [PodInfo.from_object(pod(i)) for i in range(pods)]
    gc.collect()
    gc.freeze()
    deciding = 0.0
    clock = time.perf_counter
    start = clock()
    for info in infos:
        t0 = clock()
        result = schedule_pod(fwk, cache, info)
        deciding += clock() - t0
        cache.assume(info, result.node)
    elapsed = clock() - start
    gc.unfreeze()
    return pods / elapsed, deciding / pods * 1e6


def unschedulable(nodes: int, pods: int, attempts: int = 300) -> dict[str, float]:
    """Mean µs of an attempt (filters, then preemption) of a pod too large for any node and of one
    whose nodeSelector no node matches, after ``pods`` pods were placed on ``nodes`` nodes."""
    cache, fwk = cluster(nodes)
    for i in range(pods):
        info = PodInfo.from_object(pod(i))
        cache.assume(info, schedule_pod(fwk, cache, info).node)
    too_large, nowhere = pod(pods), pod(pods + 1)
    too_large["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "5"
    nowhere["spec"]["nodeSelector"] = {"disk": "none-has-it"}
    out = {}
    for name, obj in (("too large", too_large), ("no node matches", nowhere)):
        info = PodInfo.from_object(obj)
        start = time.perf_counter()
        for _ in range(attempts):
            state = CycleState()
            try:
                schedule_pod(fwk, cache, info, state=state)
            except FitError as fit:
                post_filter(fwk, state, info, fit)
            else:
                raise AssertionError(f"the {name} pod was placed")
        out[name] = (time.perf_counter() - start) / attempts * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true",
                        help="run once (remembered signatures) under cProfile and print the 40 costliest functions")
    parser.add_argument("--full", action="store_true", help="only the full evaluation (remembering switched off)")
    args = parser.parse_args()
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(run, args.nodes, args.pods)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(40)
        return
    modes = [False] if args.full else [True, False]
    runs: dict[bool, list[tuple[float, float]]] = {mode: [] for mode in modes}
    for _ in range(args.repeat):
        for mode in modes:
            runs[mode].append(run(args.nodes, args.pods, remember=mode))
    for mode in modes:
        rates = [r for r, _ in runs[mode]]
        label = "remembered signatures" if mode else "full evaluation of every node"
        print(f"{args.pods} decisions on {args.nodes} nodes, {label}: median {statistics.median(rates):,.0f} "
              f"decisions/s (runs: {', '.join(f'{r:,.0f}' for r in rates)}); the decision alone "
              f"{statistics.median(us for _, us in runs[mode]):.1f} µs")
    costs = [unschedulable(args.nodes, args.pods) for _ in range(args.repeat)]
    print(f"a pod no node takes, tried again (filters, then preemption), after {args.pods} placed: " + "; ".join(
        f"{name} median {statistics.median(c[name] for c in costs):.0f} µs an attempt" for name in costs[0]))


if __name__ == "__main__":
    main()
