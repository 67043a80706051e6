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
import statistics
import subprocess
import sys
import tempfile
import time

import aiohttp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))
sys.path.insert(0, os.path.dirname(__file__))

from api_bench import bench_creates, user_credentials  # noqa: E402
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
    from corral.server.http import USER

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


async def measure(kind: str, pods: int, clients: int) -> dict:
    """One server of ``kind`` (baseline | admin | rbac) on a fresh data directory: creates/s, latency
    and the server's CPU time per create."""
    with tempfile.TemporaryDirectory(prefix=f"corral-cost-{kind}-") as data_dir:
        if kind == "baseline":
            proc = BaselineProcess(data_dir)
            url = proc.start()
            creds: Credentials = _Plain(url, b"")
            pid = proc.proc.pid  # type: ignore[union-attr]
        else:
            proc = ServerProcess(data_dir, "--no-scheduler")  # type: ignore[assignment]
            proc.start()
            creds = proc.credentials()  # type: ignore[attr-defined]
            if kind == "rbac":
                creds = await user_credentials(creds, "bench")
            pid = proc.proc.pid  # type: ignore[union-attr]
        try:
            await _ready(creds.server, creds.ssl_context())
            await asyncio.sleep(1.0)  # start-up's own writes settle
            before = cpu_seconds(pid)
            result = await bench_creates(creds, pods, clients, kind)
            result["serverCpuMsPerCreate"] = round((cpu_seconds(pid) - before) * 1000 / pods, 4)
        finally:
            proc.stop()
    return result


def _cost(secure: float, baseline: float) -> float:
    """The share of the baseline's creates/s that the secure server loses, in per cent."""
    return round(100 * (1 - secure / baseline), 1)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pods", type=int, default=8000)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")
    args = parser.parse_args()
    kinds = ("baseline", "admin", "rbac")
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    for r in range(args.rounds):
        order = kinds if r % 2 == 0 else kinds[::-1]  # alternate which goes first
        for kind in order:
            result = await measure(kind, args.pods, args.clients)
            runs[kind].append(result)
            print(f"round {r + 1} {kind:8s} {result['createsPerSecond']:8.1f} creates/s  p50 "
                  f"{result['latencyMs']['p50']} ms  p99 {result['latencyMs']['p99']} ms  "
                  f"server {result['serverCpuMsPerCreate']} ms CPU/create", file=sys.stderr)

    def med(kind: str, key: str, sub: str = "") -> float:
        return statistics.median(r[key][sub] if sub else r[key] for r in runs[kind])

    summary = {k: {"createsPerSecond": med(k, "createsPerSecond"), "p50Ms": med(k, "latencyMs", "p50"),
                   "p99Ms": med(k, "latencyMs", "p99"), "serverCpuMsPerCreate": med(k, "serverCpuMsPerCreate")}
               for k in kinds}
    for k in ("admin", "rbac"):
        summary[k]["costPercent"] = _cost(summary[k]["createsPerSecond"], summary["baseline"]["createsPerSecond"])
        # Per round too: the baseline of the same round, so a drift of the machine cancels out.
        summary[k]["costPercentPerRound"] = [_cost(s["createsPerSecond"], b["createsPerSecond"])
                                             for s, b in zip(runs[k], runs["baseline"])]
    if args.json:
        print(json.dumps({"rounds": args.rounds, "pods": args.pods, "clients": args.clients,
                          "summary": summary, "runs": runs}, indent=2))
        return
    print(f"\nmedians of {args.rounds} rounds, {args.pods} creates from {args.clients} clients each:")
    for k in kinds:
        s = summary[k]
        cost = "" if k == "baseline" else (f"  cost {s['costPercent']} % (per round: "
                                           f"{', '.join(str(c) for c in s['costPercentPerRound'])})")
        print(f"  {k:8s} {s['createsPerSecond']:8.1f} creates/s  p50 {s['p50Ms']} ms  p99 {s['p99Ms']} ms  "
              f"{s['serverCpuMsPerCreate']} ms CPU/create{cost}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-baseline":
        serve_baseline(sys.argv[2])
    else:
        _run(main())
