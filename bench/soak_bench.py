"""A soak: mixed load against one real server for a long time, watching its memory and latency.

    .venv/bin/python bench/soak_bench.py [--minutes 30] [--nodes 500] [--json FILE]

Starts a ``corral server`` (SQLite, its scheduler on) and ``corral sim --nodes N`` (hollow nodes
under their own identities, renewing leases and running what is bound to them), then for
``--minutes`` keeps up, from this process over HTTPS as the admin:

- creates (``--creates-per-second``, pods of ~1 KB that the scheduler binds to the hollow nodes),
- updates (a label patch on a live pod per create),
- deletes (the oldest pods beyond ``--live-pods``, so the cluster stays the same size),
- ``--watchers`` watches of every pod, each reading to the end, reopened from its last
  resourceVersion when the server ends it,
- a list of every pod every 5 s.

Every 10 s it samples the server's RSS. At the end it checks that nothing was lost: every pod whose
create was acknowledged and not deleted by the run exists, every acknowledged delete is gone, each
watcher saw every acknowledged create, and no node went NotReady. It prints the RSS at the start,
the end and its peak, p50/p99 of each operation, counts of errors (429s are counted apart: they are
the server saying "later", and the client retries them), and writes it all as JSON with ``--json``.

Not a test: it takes half an hour by default. The closing notes quote its figures.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import aiohttp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from corral.testing import ServerProcess  # noqa: E402
from corral.testing.process import child_env  # noqa: E402

PODS = "/api/v1/namespaces/default/pods"


def rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration):
        return 0.0


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Soak:
    def __init__(self, args: argparse.Namespace, server: ServerProcess) -> None:
        self.args, self.server = args, server
        self.creds = server.credentials()
        self.latency: dict[str, list[float]] = collections.defaultdict(list)
        self.errors: collections.Counter[str] = collections.Counter()
        self.throttled: collections.Counter[str] = collections.Counter()
        self.live: collections.deque[str] = collections.deque()  # acknowledged, not deleted, oldest first
        self.deleted: list[str] = []
        self.created: set[str] = set()
        self.seen_by_watcher: list[set[str]] = [set() for _ in range(args.watchers)]
        self.rss: list[tuple[float, float]] = []
        self.stop = asyncio.Event()
        self.count = 0

    def session(self, **kwargs) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(self.creds.server, headers=self.creds.headers(), connector=aiohttp.TCPConnector(
            ssl=self.creds.ssl_context(), limit=kwargs.pop("limit", 64)), **kwargs)

    async def call(self, http: aiohttp.ClientSession, kind: str, method: str, path: str, **kwargs) -> tuple[int, dict]:
        """One request, retried after a 429 as corral's client does; its latency recorded."""
        for _ in range(8):
            start = time.perf_counter()
            try:
                async with http.request(method, path, **kwargs) as r:
                    body = await r.json(content_type=None)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                self.errors[f"{kind}: {type(exc).__name__}"] += 1
                return 0, {}
            self.latency[kind].append(time.perf_counter() - start)
            if r.status != 429:
                if r.status >= 500:
                    self.errors[f"{kind}: {r.status}"] += 1
                return r.status, body or {}
            self.throttled[kind] += 1
            await asyncio.sleep(float(r.headers.get("Retry-After", "1")) * (1 + random.random()))
        return 429, {}

    async def writer(self, http: aiohttp.ClientSession) -> None:
        interval = 1.0 / self.args.creates_per_second
        next_at = time.monotonic()
        while not self.stop.is_set():
            self.count += 1
            name = f"soak-{self.count}"
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "soak"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox",
                                             "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
                             "tolerations": [{"key": "corral.dev/hollow", "operator": "Exists"}]}}
            status, _ = await self.call(http, "create", "POST", PODS, json=body)
            if status == 201:
                self.live.append(name)
                self.created.add(name)
            elif status:
                self.errors[f"create: {status}"] += 1
            if self.live:
                target = random.choice(self.live)
                status, _ = await self.call(http, "update", "PATCH", f"{PODS}/{target}",
                                            data=json.dumps({"metadata": {"labels": {"n": str(self.count)}}}),
                                            headers={"Content-Type": "application/merge-patch+json"})
                if status not in (200, 404):  # 404: a pod its node finished deleting meanwhile
                    self.errors[f"update: {status}"] += 1
            while len(self.live) > self.args.live_pods:
                old = self.live.popleft()
                status, _ = await self.call(http, "delete", "DELETE", f"{PODS}/{old}", params={"gracePeriodSeconds": "0"})
                if status in (200, 404):
                    self.deleted.append(old)
                else:
                    self.errors[f"delete: {status}"] += 1
                    self.live.appendleft(old)
                    break
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def watcher(self, http: aiohttp.ClientSession, index: int) -> None:
        seen = self.seen_by_watcher[index]
        rv = ""
        while not self.stop.is_set():
            params = {"watch": "true", "labelSelector": "app=soak", "timeoutSeconds": "300"}
            if rv:
                params["resourceVersion"] = rv
            try:
                async with http.get(PODS, params=params, timeout=aiohttp.ClientTimeout(total=None)) as r:
                    if r.status != 200:
                        self.errors[f"watch: {r.status}"] += 1
                        await asyncio.sleep(1)
                        continue
                    async for line in r.content:
                        event = json.loads(line)
                        if event["type"] == "ERROR":  # expired: list again, as client-go does
                            rv = ""
                            break
                        meta = event["object"]["metadata"]
                        rv = meta.get("resourceVersion", rv)
                        if event["type"] == "ADDED":
                            seen.add(meta["name"])
                        if self.stop.is_set():
                            return
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                self.errors[f"watch: {type(exc).__name__}"] += 1
                await asyncio.sleep(1)

    async def lister(self, http: aiohttp.ClientSession) -> None:
        while not self.stop.is_set():
            await self.call(http, "list", "GET", PODS, params={"labelSelector": "app=soak"})
            await asyncio.sleep(5)

    async def sampler(self, started: float) -> None:
        while not self.stop.is_set():
            self.rss.append((time.monotonic() - started, rss_mib(self.server.proc.pid)))
            try:
                await asyncio.wait_for(self.stop.wait(), 10)
            except asyncio.TimeoutError:
                pass

    async def run(self) -> dict:
        started = time.monotonic()
        async with self.session(limit=self.args.watchers + 16) as http:
            tasks = [asyncio.create_task(self.sampler(started)), asyncio.create_task(self.lister(http)),
                     *(asyncio.create_task(self.watcher(http, i)) for i in range(self.args.watchers)),
                     asyncio.create_task(self.writer(http))]
            last_report = started
            while time.monotonic() - started < self.args.minutes * 60:
                await asyncio.sleep(1)
                if time.monotonic() - last_report >= 60:
                    last_report = time.monotonic()
                    print(f"{(last_report - started) / 60:5.1f} min: {len(self.created)} created, "
                          f"{len(self.deleted)} deleted, RSS {self.rss[-1][1]:.0f} MiB, errors {sum(self.errors.values())}",
                          file=sys.stderr, flush=True)
            self.stop.set()
            await asyncio.sleep(2)  # the watchers' last events
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return await self.check(http, time.monotonic() - started)

    async def check(self, http: aiohttp.ClientSession, seconds: float) -> dict:
        _, listed = await self.call(http, "list", "GET", PODS, params={"labelSelector": "app=soak"})
        items = listed.get("items", [])
        present = {item["metadata"]["name"] for item in items}
        # A deleted pod that was running may still be finishing on its node (deletionTimestamp set).
        not_terminating = {item["metadata"]["name"] for item in items if not item["metadata"].get("deletionTimestamp")}
        _, nodes = await self.call(http, "nodes", "GET", "/api/v1/nodes")
        _, events = await self.call(http, "list", "GET", "/api/v1/events")
        not_ready = [n["metadata"]["name"] for n in nodes.get("items", [])
                     if not any(c.get("type") == "Ready" and c.get("status") == "True"
                                for c in (n.get("status") or {}).get("conditions") or ())]
        lost = sorted(set(self.live) - present)
        resurrected = sorted(set(self.deleted) & not_terminating)
        unseen = [len(self.created - seen) for seen in self.seen_by_watcher]
        rss = [r for _, r in self.rss]
        last_third = [r for t, r in self.rss if t >= seconds * 2 / 3]
        return {
            "minutes": round(seconds / 60, 1), "nodes": self.args.nodes, "watchers": self.args.watchers,
            "created": len(self.created), "deleted": len(self.deleted), "livePods": len(self.live),
            "lostPods": lost[:20], "lostCount": len(lost), "deletedButPresent": resurrected[:20],
            "createsUnseenByAWatcher": unseen, "nodesNotReady": not_ready[:20], "nodesNotReadyCount": len(not_ready),
            "rssMiB": {"start": rss[0] if rss else 0, "end": rss[-1] if rss else 0, "peak": max(rss, default=0),
                       "growthOverLastThird": round(last_third[-1] - last_third[0]) if last_third else 0},
            "eventsAtEnd": len(events.get("items", [])),
            "rssCurve": [[round(t), round(r)] for t, r in self.rss],
            "latencyMs": {k: {"count": len(v), "p50": round(1e3 * percentile(v, 0.5), 1),
                              "p99": round(1e3 * percentile(v, 0.99), 1)} for k, v in sorted(self.latency.items())},
            "errors": dict(self.errors), "throttled429": dict(self.throttled),
        }


async def main(args: argparse.Namespace) -> int:
    data = tempfile.mkdtemp(prefix="corral-soak-")
    server = ServerProcess(os.path.join(data, "server"), *args.server_arg)
    server.start()
    sim = None
    try:
        corral = shutil.which("corral", path=os.path.dirname(sys.executable)) or "corral"
        env = child_env({"KUBECONFIG": server.kubeconfig})
        sim = subprocess.Popen([corral, "sim", "--nodes", str(args.nodes), "--server", server.url,
                                "--run-delay", "0.5"], env=env, stdout=subprocess.DEVNULL,
                               stderr=open(os.path.join(data, "sim.log"), "wb"))
        soak = Soak(args, server)
        async with soak.session() as http:  # wait until every hollow node is Ready
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                _, nodes = await soak.call(http, "nodes", "GET", "/api/v1/nodes")
                if len(nodes.get("items", [])) >= args.nodes:
                    break
                await asyncio.sleep(2)
        print(f"{args.nodes} hollow nodes registered; soaking for {args.minutes} min (data in {data})",
              file=sys.stderr, flush=True)
        result = await soak.run()
    finally:
        if sim is not None:
            sim.terminate()
            sim.wait(timeout=30)
        server.stop()
    text = json.dumps(result, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    summary = {k: v for k, v in result.items() if k != "rssCurve"}
    print(json.dumps(summary, indent=1))
    ok = not result["lostCount"] and not result["deletedButPresent"] and not any(result["createsUnseenByAWatcher"]) \
        and not result["nodesNotReadyCount"]
    print("nothing lost" if ok else "SOMETHING WAS LOST: see above", file=sys.stderr)
    shutil.rmtree(data, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--creates-per-second", type=float, default=20.0)
    parser.add_argument("--live-pods", type=int, default=2000, help="pods kept; older ones are deleted")
    parser.add_argument("--json", default="", help="write the whole result (with the RSS curve) here")
    parser.add_argument("--server-arg", action="append", default=[], metavar="ARG",
                        help="passed to `corral server` (repeatable), e.g. --server-arg=--event-ttl=600")
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    sys.exit(asyncio.run(main(parser.parse_args())))
