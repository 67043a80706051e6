"""API server benchmark: creates/s, watch fan-out and list latency, against a real server process.

    .venv/bin/python bench/api_bench.py [--pods 10000] [--clients 32] [--watchers 100] [--json]

Starts `corral server --no-scheduler` in a child process on a fresh data directory (SQLite,
synchronous=FULL): the API alone, with no scheduler reacting to the pods (with one, every pod of
this node-less cluster would also get an Unschedulable condition and event written). It measures
from this process over HTTP on loopback:

1. creates/s: ``--pods`` pod creates from ``--clients`` concurrent connections;
2. watch fan-out: ``--watchers`` watches of the pods, while ``--fanout-pods`` more are created;
   events delivered per second in total, and the time until every watcher has seen every event;
3. list latency: listing all pods (``--pods`` + ``--fanout-pods``) repeatedly; median and p90.

Client and server share the machine's cores, as they would for a user on one host. By default as
the admin (``system:masters``, which RBAC lets through without a lookup); ``--as-user NAME`` makes
a token for NAME, binds it to the ``edit`` ClusterRole in ``default`` and measures as that user,
every request authorised through RBAC's rules.
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

import aiohttp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from corral.testing import ServerProcess  # noqa: E402


def pod_body(name: str) -> bytes:
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "main", "image": "registry.local/pause:3.9",
                                 "resources": {"requests": {"cpu": "100m", "memory": "500Mi"},
                                               "limits": {"cpu": "100m", "memory": "500Mi"}}}]},
    }).encode()


def session(creds, **kwargs) -> aiohttp.ClientSession:
    """HTTPS with the admin credential, as every client of the server."""
    connector = aiohttp.TCPConnector(ssl=creds.ssl_context(), limit=kwargs.pop("limit", 100))
    return aiohttp.ClientSession(creds.server, connector=connector, headers=creds.headers(), **kwargs)


async def bench_creates(creds, pods: int, clients: int, prefix: str) -> dict:
    bodies = [pod_body(f"{prefix}-{i}") for i in range(pods)]
    latencies: list[float] = []
    next_index = 0
    async with session(creds, limit=clients) as http:
        async def worker() -> None:
            nonlocal next_index
            while next_index < len(bodies):
                body = bodies[next_index]
                next_index += 1
                t0 = time.perf_counter()
                async with http.post("/api/v1/namespaces/default/pods", data=body,
                                     headers={"Content-Type": "application/json"}) as r:
                    await r.read()
                    if r.status != 201:
                        raise RuntimeError(f"create failed: {r.status} {await r.text()}")
                latencies.append(time.perf_counter() - t0)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "pods": pods, "clients": clients, "seconds": round(elapsed, 3),
        "createsPerSecond": round(pods / elapsed, 1),
        "latencyMs": {q: round(latencies[int(len(latencies) * f) - 1] * 1000, 2)
                      for q, f in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))},
    }


async def bench_fanout(creds, watchers: int, pods: int) -> dict:
    async with session(creds, limit=watchers + 8, read_bufsize=4 * 2**20) as http:
        async with http.get("/api/v1/namespaces/default/pods", params={"limit": "1"}) as r:
            start_rv = (await r.json())["metadata"]["resourceVersion"]
        counts = [0] * watchers
        finished: list[float] = []
        ready = asyncio.Event()
        opened = 0

        async def watch(i: int) -> None:
            nonlocal opened
            params = {"watch": "true", "resourceVersion": start_rv, "labelSelector": "app=fanout"}
            async with http.get("/api/v1/namespaces/default/pods", params=params,
                                timeout=aiohttp.ClientTimeout(total=None)) as resp:
                opened += 1
                if opened == watchers:
                    ready.set()
                async for line in resp.content:
                    if line.strip():
                        counts[i] += 1
                        if counts[i] == pods:
                            finished.append(time.perf_counter())
                            return

        tasks = [asyncio.create_task(watch(i)) for i in range(watchers)]
        await asyncio.wait_for(ready.wait(), 30)
        bodies = [pod_body(f"fan-{i}").replace(b'"app": "bench"', b'"app": "fanout"') for i in range(pods)]
        sem = asyncio.Semaphore(16)

        async def create(body: bytes) -> None:
            async with sem:
                async with http.post("/api/v1/namespaces/default/pods", data=body,
                                     headers={"Content-Type": "application/json"}) as r:
                    await r.read()

        start = time.perf_counter()
        await asyncio.gather(*(create(b) for b in bodies))
        created = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
        done = max(finished)
    delivered = watchers * pods
    return {
        "watchers": watchers, "pods": pods, "eventsDelivered": delivered,
        "seconds": round(done - start, 3), "createSeconds": round(created - start, 3),
        "eventsPerSecond": round(delivered / (done - start), 1),
        "lagAfterLastCreateMs": round((done - created) * 1000, 1),
    }


async def bench_list(creds, repeats: int) -> dict:
    times = []
    async with session(creds) as http:
        count = 0
        for _ in range(repeats):
            t0 = time.perf_counter()
            async with http.get("/api/v1/namespaces/default/pods") as r:
                body = await r.read()
            times.append(time.perf_counter() - t0)
            count = body.count(b'"kind":"Pod"')
    times.sort()
    return {"items": count, "repeats": repeats,
            "medianMs": round(statistics.median(times) * 1000, 1),
            "p90Ms": round(times[int(len(times) * 0.9) - 1] * 1000, 1),
            "minMs": round(times[0] * 1000, 1)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--fanout-pods", type=int, default=1_000)
    parser.add_argument("--list-repeats", type=int, default=15)
    parser.add_argument("--as-user", default="", metavar="NAME",
                        help="measure as this user, bound to the edit role in default (default: the admin)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="corral-bench-") as data_dir:
        proc = ServerProcess(data_dir, "--no-scheduler")
        url = proc.start()
        try:
            print(f"server {url}, data in {data_dir}", file=sys.stderr)
            creds = proc.credentials()
            if args.as_user:
                creds = await user_credentials(creds, args.as_user)
            creates = await bench_creates(creds, args.pods, args.clients, "bench")
            print(f"creates: {creates}", file=sys.stderr)
            fanout = await bench_fanout(creds, args.watchers, args.fanout_pods)
            print(f"fan-out: {fanout}", file=sys.stderr)
            listing = await bench_list(creds, args.list_repeats)
            print(f"list:    {listing}", file=sys.stderr)
            rss = _rss_bytes(proc.proc.pid)
        finally:
            proc.stop()
    result = {"user": args.as_user or "admin", "creates": creates, "watchFanout": fanout, "list": listing,
              "serverRssBytes": rss}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"\ncreates/s ({args.clients} clients, {args.pods} pods): {creates['createsPerSecond']}"
              f"  (latency p50 {creates['latencyMs']['p50']} ms, p99 {creates['latencyMs']['p99']} ms)")
        print(f"watch events/s ({args.watchers} watchers x {args.fanout_pods} pods): {fanout['eventsPerSecond']}")
        print(f"list of {listing['items']} pods: median {listing['medianMs']} ms, p90 {listing['p90Ms']} ms")
        print(f"server RSS: {rss / 2**20:.0f} MiB")


async def user_credentials(admin, user: str):
    """A token for ``user``, who may edit what is in ``default`` (through a RoleBinding to ``edit``)."""
    from corral.client import Client
    from corral.pki.kubeconfig import Credentials
    from corral.pki.tokens import new_token, token_object

    parts = new_token()
    async with Client(credentials=admin) as c:
        await c.create(token_object(parts, user=user), raw=True)
        await c.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                        "metadata": {"name": f"bench-{user}", "namespace": "default"},
                        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
                        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]},
                       raw=True)
    return Credentials(admin.server, admin.ca_pem, token=str(parts))


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(main())
