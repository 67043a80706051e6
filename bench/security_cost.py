"""What TLS, authentication, authorisation and the audit log cost the API: creates/s with and without.

    .venv/bin/python bench/security_cost.py [--rounds 5] [--pods 8000] [--clients 32] [--json]

Issue #10's budget: the security a server must have may cost at most 15 % of the creates/s of
`bench/api_bench.py`. corral has no switch that turns that security off, by design; so this
benchmark starts, besides the real ``corral server --no-scheduler``, a *baseline* of the same code
in a child process of its own (``--serve-baseline``, never a server option) with four things taken
out, as the server was before issue #10:

- TLS: the listening socket is plain HTTP;
- authentication: every request is the admin's, without looking at a credential;
- authorisation: RBAC and the node authoriser are not asked;
- the audit log: off.

Everything else (flow control, decoding, validation, admission, the store and its fsync) is the same
code on both. Each round measures, in turn and on a fresh data directory each: the baseline; the
real server as the admin (``system:masters``, which RBAC lets through without looking at a rule);
the real server as a user bound to the ``edit`` ClusterRole, every request judged by RBAC's rules.
Rounds alternate so that a machine growing busier or quieter weighs on all three alike; the report
gives the medians, and each secure figure as a cost relative to the baseline of the same rounds.
Also each server's CPU time per create (user + system of its process), which a busy machine
disturbs less than a rate.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import aiohttp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.dirname(__file__))

from api_bench import pod_body, session, user_credentials  # noqa: E402
from corral.pki.kubeconfig import Credentials  # noqa: E402
from corral.testing import ServerProcess  # noqa: E402
from corral.testing.process import child_env  # noqa: E402


class _Plain(Credentials):
    """The baseline's 'credential': plain HTTP, no header."""

    def ssl_context(self):  # type: ignore[override]
        return False

    def headers(self) -> dict[str, str]:
        return {}


def serve_baseline(data_dir: str) -> None:
    """In this child process: ``corral server --no-scheduler`` without TLS, authentication,
    authorisation or audit (see the module docstring). Prints the plain URL it listens on."""
    from aiohttp import web

    from corral.server import app as app_module
    from corral.server.authn.authenticator import UserInfo
    from corral.server.http.routes import USER

    admin = UserInfo("bench-baseline", ("system:masters", "system:authenticated"))
    real_site = web.TCPSite

    def plain_site(*args, **kwargs):
        kwargs["ssl_context"] = None
        return real_site(*args, **kwargs)

    def anyone_is_admin(self, request):
        request[USER] = admin
        return admin

    app_module.web.TCPSite = plain_site  # type: ignore[misc]
    app_module.Server._authenticate = anyone_is_admin  # type: ignore[method-assign]
    app_module.Server._authorize_request = lambda self, request, user: None  # type: ignore[method-assign]
    config = app_module.ServerConfig(data_dir=data_dir, address="127.0.0.1:0", scheduler=False,
                                     audit_log="off", user_kubeconfig=False)

    async def run() -> None:
        server = app_module.Server(config)
        await server.start()
        app_module.tune_gc_for_server()
        print(f"baseline listening on {server.url.replace('https://', 'http://')}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await server.stop()

    _run(run())


def _run(coro) -> None:
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    try:
        asyncio.run(coro)
    except KeyboardInterrupt:
        pass


class BaselineProcess:
    """The baseline server in a child process (``python bench/security_cost.py --serve-baseline DIR``)."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def start(self, timeout: float = 60.0) -> str:
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve-baseline", self.data_dir],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=child_env(), text=True)
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        lines = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("baseline listening on "):
                self.url = line.split()[-1]
                return self.url
        self.stop()
        raise RuntimeError("the baseline server did not start: " + "".join(lines))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    """User + system CPU time of this process (the clients) so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _ready(url: str, ssl: object) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(200):
            try:
                async with http.get(url + "/readyz", ssl=ssl) as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.05)
    raise RuntimeError(f"{url} never became ready")


class Target:
    """One server under test and its clients' session (kept open: handshakes are not what is measured)."""

    def __init__(self, kind: str, proc, creds: Credentials) -> None:
        self.kind, self.proc, self.creds = kind, proc, creds
        self.http: aiohttp.ClientSession | None = None
        self.rates: list[float] = []
        self.latencies: list[float] = []
        self.server_cpu: list[float] = []
        self.client_cpu: list[float] = []
        self.created = 0

    async def open(self, clients: int) -> None:
        await _ready(self.creds.server, self.creds.ssl_context())
        self.http = session(self.creds, limit=clients)
        await self.chunk(clients, clients, record=False)  # every connection opened (and handshaken) once

    async def chunk(self, pods: int, clients: int, *, record: bool = True) -> float:
        """``pods`` creates from ``clients`` concurrent connections: the rate, and what it cost."""
        assert self.http is not None
        bodies = [pod_body(f"{self.kind}-{self.created + i}") for i in range(pods)]
        self.created += pods
        latencies: list[float] = []
        left = iter(bodies)

        async def worker() -> None:
            for body in left:
                t0 = time.perf_counter()
                async with self.http.post("/api/v1/namespaces/default/pods", data=body,  # type: ignore[union-attr]
                                          headers={"Content-Type": "application/json"}) as r:
                    await r.read()
                    if r.status != 201:
                        raise RuntimeError(f"{self.kind}: create failed: {r.status} {await r.text()}")
                latencies.append(time.perf_counter() - t0)

        server_before, client_before = cpu_seconds(self.proc.proc.pid), _own_cpu_seconds()
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        rate = pods / (time.perf_counter() - start)
        if record:
            self.rates.append(rate)
            self.latencies.extend(latencies)
            self.server_cpu.append((cpu_seconds(self.proc.proc.pid) - server_before) * 1000 / pods)
            self.client_cpu.append((_own_cpu_seconds() - client_before) * 1000 / pods)
        return rate

    def summary(self) -> dict:
        lat = sorted(self.latencies)
        return {"createsPerSecond": round(statistics.median(self.rates), 1),
                "latencyMs": {q: round(lat[int(len(lat) * f) - 1] * 1000, 2) for q, f in (("p50", 0.5), ("p99", 0.99))},
                "serverCpuMsPerCreate": round(statistics.median(self.server_cpu), 4),
                "clientCpuMsPerCreate": round(statistics.median(self.client_cpu), 4)}


async def start(kind: str, data_dir: str) -> Target:
    """A server for ``kind``: the baseline, or the real server measured as the admin or through RBAC."""
    if kind == "baseline":
        proc = BaselineProcess(data_dir)
        return Target(kind, proc, _Plain(proc.start(), b""))
    proc = ServerProcess(data_dir, "--no-scheduler")
    proc.start()
    creds = proc.credentials()
    if kind == "rbac":
        creds = await user_credentials(creds, "bench")
    return Target(kind, proc, creds)


def _cost(secure: float, baseline: float) -> float:
    """The share of the baseline's creates/s that the secure server loses, in per cent."""
    return round(100 * (1 - secure / baseline), 1)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--pods", type=int, default=1000, help="creates per server and round")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")
    args = parser.parse_args()
    kinds = ("baseline", "admin", "rbac")
    targets: list[Target] = []
    with tempfile.TemporaryDirectory(prefix="corral-cost-") as top:
        try:
            for kind in kinds:
                targets.append(await start(kind, os.path.join(top, kind)))
            for t in targets:
                await t.open(args.clients)
            await asyncio.sleep(1.0)  # start-up's own writes settle
            for r in range(args.rounds):
                shift = r % len(targets)  # each kind goes first in turn
                for t in targets[shift:] + targets[:shift]:
                    await t.chunk(args.pods, args.clients)
                print(f"round {r + 1}: " + ", ".join(f"{t.kind} {t.rates[-1]:.0f}/s" for t in targets), file=sys.stderr)
        finally:
            for t in targets:
                if t.http is not None:
                    await t.http.close()
                t.proc.stop()
    by_kind = {t.kind: t for t in targets}
    summary = {t.kind: t.summary() for t in targets}
    base = by_kind["baseline"].rates
    for k in ("admin", "rbac"):
        # Per round, against the baseline's chunk of the same round: what the machine did then weighs on both.
        per_round = [_cost(s, b) for s, b in zip(by_kind[k].rates, base)]
        summary[k]["costPercent"] = round(statistics.median(per_round), 1)
        quartiles = statistics.quantiles(per_round, n=4) if len(per_round) > 1 else per_round * 3
        summary[k]["costPercentQuartiles"] = [round(q, 1) for q in quartiles]
    if args.json:
        print(json.dumps({"rounds": args.rounds, "pods": args.pods, "clients": args.clients, "summary": summary,
                          "servers": {t.kind: t.creds.server for t in targets},
                          "rates": {t.kind: [round(x, 1) for x in t.rates] for t in targets}}, indent=2))
        return
    print(f"\n{args.rounds} rounds of {args.pods} creates per server from {args.clients} clients; medians:")
    for k in kinds:
        s = summary[k]
        cost = "" if k == "baseline" else (f"  cost {s['costPercent']} % (quartiles "
                                           f"{', '.join(str(c) for c in s['costPercentQuartiles'])})")
        print(f"  {k:8s} {s['createsPerSecond']:8.1f} creates/s  p50 {s['latencyMs']['p50']} ms  p99 "
              f"{s['latencyMs']['p99']} ms  CPU/create: server {s['serverCpuMsPerCreate']} ms, clients "
              f"{s['clientCpuMsPerCreate']} ms{cost}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-baseline":
        serve_baseline(sys.argv[2])
    else:
        _run(main())
