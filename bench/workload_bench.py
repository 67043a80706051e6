"""Workloads at scale on hollow nodes: a Deployment of N replicas and a rolling update of it, or
Job churn (many Jobs of several pods, each run to completion and deleted).

    .venv/bin/python bench/workload_bench.py [--nodes 5000] [--replicas 10000] [--json FILE]
    .venv/bin/python bench/workload_bench.py --workload jobs [--nodes 1000] [--jobs 1000] [--pods 10]
    .venv/bin/python bench/workload_bench.py --workload daemonset [--nodes 5000]
    .venv/bin/python bench/workload_bench.py --workload placement --policy PickAll|PickN [--nodes 5000] [--copies 1000]

Starts a ``corral server`` (SQLite, scheduler and controllers on) and ``corral sim --nodes N``
(hollow nodes under their own identities: they run what is bound to them through the agent's state
machine and report pods Running and Ready), then from this process, as the admin:

1. creates a Deployment of ``--replicas`` pods (tolerating the hollow nodes' taint) and times, from
   one watch of its pods, when all were created, all bound and all Running and ready — and when the
   Deployment's status said all available;
2. changes its template (an annotation) and times the rolling update (RollingUpdate, the default
   25 % surge and unavailability) until the Deployment reports it complete, checking on every pod
   event that no more than maxUnavailable pods were down and no more than replicas + maxSurge existed.

With ``--workload jobs``: creates ``--jobs`` Jobs of ``--pods`` pods each (completions =
parallelism = pods; each hollow container exits 0 ``--job-run-seconds`` after it started, the
``sim.corral.dev/run-seconds`` annotation; ``ttlSecondsAfterFinished: 0``), and times, from one
watch of the Jobs, when all were created, all Complete and all deleted, and when their pods were gone.

With ``--workload placement``: one Placement over hollow nodes spread over 10 zones — PickAll (a copy
on every node) or PickN (``--copies`` nodes, maxSkew 1 over the zones) — and times, from its
creation, when the scheduler's decision was written, when every copy was bound, and when every
copy was Running and available (``unavailablePeriodSeconds: 0``); then checks the copies' nodes:
one per selected node, and for PickN at most one apart per zone.

Not a test (minutes at full size). The closing notes quote its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

from corral.api.kinds.apps import percent_or_count  # noqa: E402
from corral.client.rest import Client  # noqa: E402
from corral.sim.taint import HOLLOW_TOLERATION  # noqa: E402
from corral.testing import ServerProcess  # noqa: E402
from corral.testing.process import child_env  # noqa: E402


def deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "bench", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "bench"}},
                     "template": {"metadata": {"labels": {"app": "bench"}},
                                  "spec": {"tolerations": [dict(HOLLOW_TOLERATION)], "containers": [{
                                      "name": "pause", "image": "registry.k8s.io/pause:3.9",
                                      "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}


def is_ready(pod: dict) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or ())


class PodTracker:
    """Every pod of the Deployment from one watch, counted as events come (O(1) each): when counts
    were first reached, and the worst moments of a rollout."""

    def __init__(self) -> None:
        self.state: dict[str, tuple[bool, bool, bool]] = {}  # name → (live, bound, ready)
        self.counts = [0, 0, 0]
        self.marks: dict[str, float] = {}
        self.rolling = False
        self.most = 0
        self.fewest_ready: int | None = None
        self.broken = ""

    def see(self, etype: str, pod: dict, replicas: int, t0: float) -> None:
        name = pod["metadata"]["name"]
        for i, flag in enumerate(self.state.pop(name, (False, False, False))):
            self.counts[i] -= flag
        if etype != "DELETED":
            live = not pod["metadata"].get("deletionTimestamp")
            now = (live, live and bool(pod["spec"].get("nodeName")), live and is_ready(pod))
            self.state[name] = now
            for i, flag in enumerate(now):
                self.counts[i] += flag
        live, bound, ready = self.counts
        if self.rolling:
            self.most = max(self.most, live)
            self.fewest_ready = ready if self.fewest_ready is None else min(self.fewest_ready, ready)
            return
        for mark, count in (("created", live), ("bound", bound), ("running", ready)):
            if count >= replicas and mark not in self.marks:
                self.marks[mark] = round(time.monotonic() - t0, 2)


async def follow(client: Client, tracker: PodTracker, replicas: int, t0: float, rv: str) -> None:
    while True:
        try:
            async for event in client.watch("pods", "default", resource_version=rv, label_selector="app=bench",
                                            raw=True):
                rv = event.object["metadata"].get("resourceVersion", rv)
                if event.type != "BOOKMARK":
                    tracker.see(event.type, event.object, replicas, t0)
        except Exception as exc:  # the numbers would be wrong: say so, loudly
            tracker.broken = f"the pod watch failed: {exc!r}"
            print(tracker.broken, file=sys.stderr, flush=True)
            raise


async def wait_status(client: Client, check, timeout: float) -> float:
    t0, deadline = time.monotonic(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        deploy = await client.get("deployments", "bench", "default", raw=True)
        if check(deploy):
            return time.monotonic() - t0
        await asyncio.sleep(0.5)
    raise TimeoutError(f"the Deployment did not get there in {timeout:.0f}s: {deploy.get('status')}")


def complete(replicas: int):
    def check(d: dict) -> bool:
        s = d.get("status") or {}
        return (s.get("observedGeneration", 0) >= d["metadata"].get("generation", 1) and s.get("replicas") == replicas
                and s.get("updatedReplicas") == replicas and s.get("availableReplicas") == replicas)
    return check


async def wait_nodes(client: Client, count: int) -> None:
    deadline = time.monotonic() + 600
    while len((await client.list("nodes", raw=True)).items) < count:
        assert time.monotonic() < deadline, "the hollow nodes did not register in 10 minutes"
        await asyncio.sleep(2)
    print(f"{count} hollow nodes registered", file=sys.stderr, flush=True)


async def run(args: argparse.Namespace, server: ServerProcess) -> dict:
    async with Client(credentials=server.credentials()) as client:
        await wait_nodes(client, args.nodes)
        tracker = PodTracker()
        rv = (await client.list("pods", "default", raw=True)).resource_version
        t0 = time.monotonic()
        watcher = asyncio.create_task(follow(client, tracker, args.replicas, t0, rv))
        await client.create(deployment(args.replicas), "default")
        available = await wait_status(client, complete(args.replicas), args.timeout)
        result = {"nodes": args.nodes, "replicas": args.replicas, "createSeconds": tracker.marks,
                  "allAvailableSeconds": round(available, 2)}
        print(json.dumps(result), file=sys.stderr, flush=True)
        tracker.rolling = True
        await client.patch("deployments", "bench", {"spec": {"template": {"metadata": {"annotations": {
            "bench/rollout": "2"}}}}}, "default")
        rollout = await wait_status(client, complete(args.replicas), args.timeout)
        watcher.cancel()
        surge = percent_or_count("25%", args.replicas, round_up=True)
        unavailable = percent_or_count("25%", args.replicas, round_up=False)
        result["rollout"] = {"seconds": round(rollout, 2), "mostPods": tracker.most,
                             "fewestReady": tracker.fewest_ready, "allowedMostPods": args.replicas + surge,
                             "allowedFewestReady": args.replicas - unavailable}
        result["watch"] = tracker.broken or "complete"
        result["withinLimits"] = not tracker.broken and tracker.most <= args.replicas + surge and \
            (tracker.fewest_ready or 0) >= args.replicas - unavailable
        return result


def job(i: int, pods: int, run_seconds: float) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"churn-{i}", "namespace": "default"},
            "spec": {"completions": pods, "parallelism": pods, "ttlSecondsAfterFinished": 0,
                     "template": {"metadata": {"annotations": {"sim.corral.dev/run-seconds": str(run_seconds)}},
                                  "spec": {"restartPolicy": "Never", "tolerations": [dict(HOLLOW_TOLERATION)],
                                           "containers": [{"name": "work", "image": "registry.k8s.io/pause:3.9",
                                                           "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}


async def run_jobs(args: argparse.Namespace, client: Client) -> dict:
    """Job churn: every Job created, run and deleted; marks from one watch of the Jobs."""
    seen: dict[str, bool] = {}  # name → complete
    made = done = gone = 0
    marks: dict[str, float] = {}
    t0 = time.monotonic()
    rv = (await client.list("jobs", "default", raw=True)).resource_version

    async def follow() -> None:
        nonlocal made, done, gone, rv
        async for event in client.watch("jobs", "default", resource_version=rv, raw=True):
            if event.type == "BOOKMARK":
                continue
            name = event.object["metadata"]["name"]
            if event.type == "DELETED":
                gone += 1
                done += not seen.pop(name, True)  # deleted before its Complete was seen: it completed
            else:
                complete = any(c.get("type") == "Complete" and c.get("status") == "True"
                               for c in (event.object.get("status") or {}).get("conditions") or ())
                if name not in seen:
                    made += 1
                if complete and not seen.get(name):
                    done += 1
                seen[name] = complete
            for mark, count in (("created", made), ("complete", done), ("deleted", gone)):
                if count >= args.jobs and mark not in marks:
                    marks[mark] = round(time.monotonic() - t0, 2)
            if gone >= args.jobs:
                return

    watcher = asyncio.create_task(follow())
    limit = asyncio.Semaphore(32)

    async def create(i: int) -> None:
        async with limit:
            await client.create(job(i, args.pods, args.job_run_seconds), "default")

    await asyncio.gather(*(create(i) for i in range(args.jobs)))
    await asyncio.wait_for(watcher, args.timeout)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:  # the garbage collector deletes each deleted Job's pods
        left = len((await client.list("pods", "default", label_selector="batch.kubernetes.io/job-name",
                                      raw=True)).items)
        if not left:
            marks["podsDeleted"] = round(time.monotonic() - t0, 2)
            break
        await asyncio.sleep(0.5)
    total = args.jobs * args.pods
    return {"nodes": args.nodes, "jobs": args.jobs, "podsPerJob": args.pods, "runSeconds": args.job_run_seconds,
            "seconds": marks, "podsPerSecond": round(total / marks["complete"], 1), "podsLeft": left,
            "withinLimits": left == 0 and len(marks) == 4}


async def run_daemonset(args: argparse.Namespace, client: Client) -> dict:
    """A DaemonSet on every hollow node, then a template change rolled out node by node
    (maxUnavailable 10%): when all were available, each time, and the most nodes without an
    available daemon the DaemonSet's status reported during the rollout (every 0.5 s)."""
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "bench", "namespace": "default"},
          "spec": {"selector": {"matchLabels": {"app": "bench-ds"}},
                   "updateStrategy": {"rollingUpdate": {"maxUnavailable": "10%"}},
                   "template": {"metadata": {"labels": {"app": "bench-ds"}},
                                "spec": {"tolerations": [dict(HOLLOW_TOLERATION)], "containers": [{
                                    "name": "agent", "image": "registry.k8s.io/pause:3.9",
                                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}

    def everywhere(d: dict) -> bool:
        s = d.get("status") or {}
        return (s.get("observedGeneration", 0) >= d["metadata"].get("generation", 1)
                and s.get("desiredNumberScheduled") == args.nodes and s.get("updatedNumberScheduled") == args.nodes
                and s.get("numberAvailable") == args.nodes)

    unavailable: list[int] = []  # numberUnavailable at each look during the rollout

    async def until(check, rolling: bool = False) -> float:
        t0, deadline = time.monotonic(), time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            d = await client.get("daemonsets", "bench", "default", raw=True)
            if rolling:
                unavailable.append(int((d.get("status") or {}).get("numberUnavailable") or 0))
            if check(d):
                return round(time.monotonic() - t0, 2)
            await asyncio.sleep(0.5)
        raise TimeoutError("the DaemonSet did not get there")

    await client.create(ds, "default")
    created = await until(everywhere)
    await client.patch("daemonsets", "bench", {"spec": {"template": {"metadata": {"annotations": {
        "bench/rollout": "2"}}}}}, "default")
    rolled = await until(everywhere, rolling=True)
    allowed = percent_or_count("10%", args.nodes, round_up=True)
    return {"nodes": args.nodes, "allAvailableSeconds": created, "rolloutSeconds": rolled,
            "mostUnavailable": max(unavailable), "allowedUnavailable": allowed, "looks": len(unavailable),
            "withinLimits": max(unavailable) <= allowed}


ZONE = "topology.kubernetes.io/zone"


async def run_placement(args: argparse.Namespace, client: Client) -> dict:
    """A PickAll or PickN Placement: decided, bound, available (see the module's docstring)."""
    policy: dict = {"placementType": args.policy}
    if args.policy == "PickN":
        policy.update(numberOfNodes=args.copies, topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": ZONE}])
    placement = {"apiVersion": "placement.corral.dev/v1", "kind": "Placement",
                 "metadata": {"name": "bench", "namespace": "default"},
                 "spec": {"policy": policy, "strategy": {"rollingUpdate": {"unavailablePeriodSeconds": 0}},
                          "template": {"metadata": {"labels": {"app": "bench-pl"}},
                                       "spec": {"tolerations": [dict(HOLLOW_TOLERATION)], "containers": [{
                                           "name": "c", "image": "registry.k8s.io/pause:3.9",
                                           "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}
    wanted = args.nodes if args.policy == "PickAll" else args.copies
    marks: dict[str, float] = {}
    t0 = time.monotonic()
    await client.create(placement, "default")
    deadline = t0 + args.timeout
    while "available" not in marks:
        status = (await client.get("placements", "bench", "default", raw=True)).get("status") or {}
        if time.monotonic() > deadline:
            pods = (await client.list("pods", "default", label_selector="app=bench-pl", raw=True)).items
            phases: dict[str, int] = {}
            for p in pods:
                phase = (p.get("status") or {}).get("phase", "?") + ("" if p["spec"].get("nodeName") else "/unbound")
                phases[phase] = phases.get(phase, 0) + 1
            conditions = {c["type"]: c.get("message") for c in status.get("conditions") or ()}
            raise AssertionError(f"the Placement did not get there: {marks}; copies {phases}; {conditions}")
        now = round(time.monotonic() - t0, 2)
        if "decided" not in marks and status.get("scheduled") == wanted:
            marks["decided"] = now
        if "bound" not in marks and "decided" in marks:
            pods = (await client.list("pods", "default", label_selector="app=bench-pl", raw=True)).items
            if sum(1 for p in pods if p["spec"].get("nodeName")) >= wanted:
                marks["bound"] = now
        if "bound" in marks and status.get("available") == wanted:
            marks["available"] = now
        await asyncio.sleep(0.5 if "decided" in marks else 0.02)  # the decision takes tens of milliseconds
    pods = (await client.list("pods", "default", label_selector="app=bench-pl", raw=True)).items
    nodes = {n["metadata"]["name"]: (n["metadata"].get("labels") or {}).get(ZONE, "")
             for n in (await client.list("nodes", raw=True)).items}
    on = [p["spec"].get("nodeName") for p in pods]
    per_zone: dict[str, int] = {}
    for node in on:
        per_zone[nodes.get(node, "")] = per_zone.get(nodes.get(node, ""), 0) + 1
    skew = max(per_zone.values()) - min(per_zone.values()) if per_zone else 0
    return {"nodes": args.nodes, "policy": args.policy, "copies": wanted, "seconds": marks,
            "copiesPerSecondBound": round(wanted / marks["bound"], 1), "zoneSkew": skew,
            "withinLimits": len(on) == wanted == len(set(on)) and (args.policy == "PickAll" or skew <= 1)}


async def main(args: argparse.Namespace) -> int:
    data = tempfile.mkdtemp(prefix="corral-workloads-")
    server = ServerProcess(os.path.join(data, "server"), *args.server_arg)
    server.start(timeout=60)
    sim = None
    try:
        corral = shutil.which("corral", path=os.path.dirname(sys.executable)) or "corral"
        zones = ["--zones", "10"] if args.workload == "placement" else []
        sim = subprocess.Popen([corral, "sim", "--nodes", str(args.nodes), "--server", server.url, "--run-delay",
                                str(args.run_delay), *zones], env=child_env({"KUBECONFIG": server.kubeconfig}),
                               stdout=subprocess.DEVNULL, stderr=open(os.path.join(data, "sim.log"), "wb"))
        if args.workload in ("jobs", "daemonset", "placement"):
            runner = {"jobs": run_jobs, "daemonset": run_daemonset, "placement": run_placement}[args.workload]
            async with Client(credentials=server.credentials()) as client:
                await wait_nodes(client, args.nodes)
                result = await runner(args, client)
        else:
            result = await run(args, server)
    finally:
        if sim is not None:
            sim.terminate()
            sim.wait(timeout=60)
        server.stop()
        shutil.rmtree(data, ignore_errors=True)
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0 if result["withinLimits"] else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=("deployment", "jobs", "daemonset", "placement"), default="deployment")
    parser.add_argument("--policy", choices=("PickAll", "PickN"), default="PickAll", help="--workload placement")
    parser.add_argument("--copies", type=int, default=1000, help="PickN's numberOfNodes (--workload placement)")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--jobs", type=int, default=1000, help="Jobs to churn (--workload jobs)")
    parser.add_argument("--pods", type=int, default=10, help="pods per Job (--workload jobs)")
    parser.add_argument("--job-run-seconds", type=float, default=1.0, help="how long a Job's hollow container runs")
    parser.add_argument("--replicas", type=int, default=10000)
    parser.add_argument("--run-delay", type=float, default=0.5, help="seconds a hollow container takes to start")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds each phase may take")
    parser.add_argument("--json", default="", help="write the result here too")
    parser.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                        help="an extra argument for corral server (repeatable)")
    sys.exit(asyncio.run(main(parser.parse_args())))
