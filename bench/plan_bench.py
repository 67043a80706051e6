"""`corral plan`'s cost: copying the scheduler's state and deciding a plan's pods on the copy.

    .venv/bin/python bench/plan_bench.py [--nodes 5000] [--bound 15000] [--pods 1000] [--repeat 3] [--profile]
    .venv/bin/python bench/plan_bench.py --http [--nodes 5000] [--bound 15000] [--pods 1000] [--repeat 3]

A live cache of N nodes (4 cpu, 32Gi, 110 pods, three zones, Ready) holding ``--bound`` pods, with
the default profile's frameworks, as the server's scheduler holds them; then, as ``POST
/corral/v1/plan`` does after admission, a snapshot (the copy and its frameworks) and the plan of
``--pods`` pods (scheduler_perf's basic shape) on it. Prints each phase's median. The request's
admission (validation and defaults, once per manifest or per workload template) and the HTTP round
trip are not in these figures.

With ``--http``: a real ``corral server`` holding the nodes and bound pods (created through its API),
and ``POST /corral/v1/plan`` timed as the client sees it, for one Deployment of ``--pods`` replicas
and for ``--pods`` Pod manifests (each admitted on its own).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
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


def http(args: argparse.Namespace) -> None:
    import concurrent.futures
    import tempfile

    from corral.testing import ServerProcess
    from corral.testing.builders import make_node

    future = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86400))  # stays fresh: no agents here

    def node_obj(i: int) -> dict:
        b = make_node(f"node-{i:05d}").capacity(cpu=4, memory="32Gi", pods=110).zone(f"zone-{i % 3}").heartbeat_at(future)
        return {**b.obj, "apiVersion": "v1", "kind": "Node"}

    def bound_pod(i: int, nodes: int) -> dict:
        obj = pod(i)
        obj.update(apiVersion="v1", kind="Pod")
        obj["metadata"].pop("uid")
        obj["spec"]["nodeName"] = f"node-{i % nodes:05d}"
        return obj

    def manifest(i: int) -> dict:
        obj = pod(10_000_000 + i)
        obj.update(apiVersion="v1", kind="Pod")
        obj["metadata"].pop("uid")
        return obj

    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bench"},
                  "spec": {"replicas": args.pods, "selector": {"matchLabels": {"app": "bench"}},
                           "template": {"metadata": {"labels": {"app": "bench"}},
                                        "spec": {k: v for k, v in manifest(0)["spec"].items()}}}}
    pods_body = {"items": [manifest(i) for i in range(args.pods)]}

    async def go(server) -> tuple[list[float], list[float]]:
        async with server.client() as c:
            for start in range(0, args.nodes, 200):
                await asyncio.gather(*(c.create(node_obj(i)) for i in range(start, min(args.nodes, start + 200))))
            for start in range(0, args.bound, 200):
                await asyncio.gather(*(c.create(bound_pod(i, args.nodes))
                                       for i in range(start, min(args.bound, start + 200))))
            await asyncio.sleep(1)
            times: tuple[list[float], list[float]] = ([], [])
            for _ in range(args.repeat):
                for body, out in (({"items": [deployment]}, times[0]), (pods_body, times[1])):
                    start = time.perf_counter()
                    report = json.loads(await c.request("POST", "/corral/v1/plan", body=body))
                    out.append(time.perf_counter() - start)
                    assert report["placed"] == args.pods, (report["pending"], report["pods"][:1])
            return times

    with tempfile.TemporaryDirectory() as tmp, ServerProcess(os.path.join(tmp, "s"), "--node-monitor-grace-period",
                                                              "3600") as server:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            deploy_s, pods_s = pool.submit(asyncio.run, go(server)).result()
    print(f"POST /corral/v1/plan on {args.nodes} nodes holding {args.bound} pods, median of {args.repeat}: "
          f"a Deployment of {args.pods} replicas {statistics.median(deploy_s):.3f} s "
          f"(runs: {', '.join(f'{t:.3f}' for t in deploy_s)}); {args.pods} Pod manifests "
          f"{statistics.median(pods_s):.3f} s (runs: {', '.join(f'{t:.3f}' for t in pods_s)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--bound", type=int, default=15000)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true",
                        help="run once under cProfile and print the 40 costliest functions")
    parser.add_argument("--http", action="store_true", help="through a real server's API, as a client sees it")
    args = parser.parse_args()
    if args.http:
        http(args)
        return
    cache, frameworks = live(args.nodes, args.bound)
    gc.collect()
    gc.freeze()  # the live cache is long-lived, as in the server
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(once, cache, frameworks, args.pods)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(40)
        return
    runs = [once(cache, frameworks, args.pods) for _ in range(args.repeat)]
    copy_s = statistics.median(r[0] for r in runs)
    plan_s = statistics.median(r[1] for r in runs)
    print(f"plan of {args.pods} pods on {args.nodes} nodes holding {args.bound} pods: snapshot {copy_s:.3f} s, "
          f"decisions {plan_s:.3f} s, total {copy_s + plan_s:.3f} s (median of {args.repeat}; "
          f"runs: {', '.join(f'{a + b:.3f}' for a, b in runs)})")


if __name__ == "__main__":
    main()
