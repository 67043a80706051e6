"""`corral plan`'s cost: copying the scheduler's state and deciding a plan's pods on the copy.

    .venv/bin/python bench/plan_bench.py [--nodes 5000] [--bound 15000] [--pods 1000] [--repeat 3] [--profile]

A live cache of N nodes (4 cpu, 32Gi, 110 pods, three zones, Ready) holding ``--bound`` pods, with
the default profile's frameworks, as the server's scheduler holds them; then, as ``POST
/corral/v1/plan`` does after admission, a snapshot (the copy and its frameworks) and the plan of
``--pods`` pods (scheduler_perf's basic shape) on it. Prints each phase's median. The request's
admission (validation and defaults, once per manifest or per workload template) and the HTTP round
trip are not in these figures.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.dirname(__file__))

from corral.plan.dry_run import run as run_plan, snapshot  # noqa: E402
from corral.plan.expand import PlannedPod  # noqa: E402
from corral.scheduler.cache.cache import Cache  # noqa: E402
from corral.scheduler.framework.podinfo import PodInfo  # noqa: E402
from corral.scheduler.profiles import build_frameworks, parse_config  # noqa: E402
from corral.scheduler.schedule_one import schedule_pod  # noqa: E402
from scheduler_bench import node, pod  # noqa: E402


def live(nodes: int, bound: int) -> tuple[Cache, dict]:
    cache = Cache()
    for i in range(nodes):
        n = node(i)
        n["metadata"]["labels"]["topology.kubernetes.io/zone"] = f"zone-{i % 3}"
        cache.set_node(n)
    config = parse_config({})
    frameworks = build_frameworks(config, cache=cache, clock=time.time)
    fwk = frameworks["default-scheduler"]
    for i in range(bound):
        info = PodInfo.from_object(pod(i))
        cache.assume(info, schedule_pod(fwk, cache, info).node)
    return cache, frameworks


def once(cache: Cache, frameworks: dict, pods: int) -> tuple[float, float]:
    planned = [PlannedPod(pod(10_000_000 + i), "bench") for i in range(pods)]
    gc.collect()
    start = time.perf_counter()
    snap = snapshot(cache, frameworks, parse_config({}), 0)
    copied = time.perf_counter()
    report = asyncio.run(run_plan(snap, planned))
    done = time.perf_counter()
    assert report["placed"] == pods, report["pending"]
    return copied - start, done - copied


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--bound", type=int, default=15000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="run once under pyinstrument and print the profile")
    args = parser.parse_args()
    cache, frameworks = live(args.nodes, args.bound)
    gc.collect()
    gc.freeze()  # the live cache is long-lived, as in the server
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler()
        profiler.start()
        once(cache, frameworks, args.pods)
        profiler.stop()
        print(profiler.output_text(unicode=True, color=False))
        return
    runs = [once(cache, frameworks, args.pods) for _ in range(args.repeat)]
    copy_s = statistics.median(r[0] for r in runs)
    plan_s = statistics.median(r[1] for r in runs)
    print(f"plan of {args.pods} pods on {args.nodes} nodes holding {args.bound} pods: snapshot {copy_s:.3f} s, "
          f"decisions {plan_s:.3f} s, total {copy_s + plan_s:.3f} s (median of {args.repeat}; "
          f"runs: {', '.join(f'{a + b:.3f}' for a, b in runs)})")


if __name__ == "__main__":
    main()
