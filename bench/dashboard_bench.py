"""The dashboard at scale, in Debian's chromium: a server holding N nodes and M bound pods, then
the time from logging in until the map shows every node, until the pods table holds every pod,
and what a scroll of that table and a hover over the map cost the page.

    .venv/bin/python bench/dashboard_bench.py [--nodes 5000] [--pods 15000] [--screenshot FILE]

Nodes are spread over five zones (a few cordoned, tainted or NotReady); pods are created already
bound (spec.nodeName), so no scheduler or agent is involved: this measures the API's lists and
watches as the page reads them, and the page itself.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from corral.testing import ServerProcess  # noqa: E402
from corral.testing.builders import make_node, make_pod  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def node(i: int) -> dict:
    b = make_node(f"node-{i:05d}").capacity(cpu=8, memory="32Gi", pods=110).zone(f"zone-{i % 5}")
    if i % 97 == 0:
        b = b.unschedulable()
    if i % 89 == 0:
        b = b.taint("dedicated", "gpu")
    if i % 211 == 0:
        b = b.not_ready()
    return {**b.obj, "apiVersion": "v1", "kind": "Node"}


def pod(i: int, usable: list[int]) -> dict:
    obj = make_pod(f"pod-{i:05d}").requests(cpu=f"{100 * (1 + i % 7)}m", memory=f"{256 * (1 + i % 5)}Mi").obj
    obj["metadata"].pop("uid")
    obj.pop("status")
    obj["spec"]["nodeName"] = f"node-{usable[(i * 7919) % len(usable)]:05d}"
    return obj


async def populate(server: ServerProcess, nodes: int, pods: int) -> None:
    async with server.client() as c:
        async def batch(objs):
            await asyncio.gather(*(c.create(o) for o in objs))
        for start in range(0, nodes, 200):
            await batch([node(i) for i in range(start, min(nodes, start + 200))])
        usable = [n for n in range(nodes) if n % 97 and n % 89]  # admission refuses cordoned and tainted nodes
        for start in range(0, pods, 200):
            await batch([pod(i, usable) for i in range(start, min(pods, start + 200))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=15000)
    parser.add_argument("--screenshot", default="")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, ServerProcess(
            os.path.join(tmp, "server"), "--no-scheduler",
            "--node-monitor-grace-period", "3600") as server:  # no agents renew these nodes' leases
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, populate(server, args.nodes, args.pods)).result()
        print(f"created {args.nodes} nodes and {args.pods} pods in {time.perf_counter() - start:.1f} s")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS, headless=True)
            page = browser.new_context(ignore_https_errors=True, viewport={"width": 1440, "height": 900}).new_page()
            problems: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(f"{server.url}/ui/")
            with open(server.kubeconfig, encoding="utf-8") as f:
                page.fill("#login-text", f.read())
            start = time.perf_counter()
            page.click("#login-go")
            page.wait_for_selector(f"#map-summary:has-text('{args.nodes} nodes')", timeout=120_000)
            page.wait_for_selector(f"#map-summary:has-text('{args.pods} pods')", timeout=120_000)
            map_s = time.perf_counter() - start
            redraw = page.evaluate("""() => { const t = performance.now();
                document.getElementById('map-resource').value = 'memory';
                document.getElementById('map-resource').dispatchEvent(new Event('change'));
                return performance.now() - t; }""")
            where = page.evaluate("window.corralTile('node-00097')")
            box = page.eval_on_selector("#map", "c => { const b = c.getBoundingClientRect(); return [b.left, b.top]; }")
            start = time.perf_counter()
            page.mouse.move(box[0] + where["x"], box[1] + where["y"])
            page.wait_for_selector("#tip:not([hidden])")
            hover_ms = (time.perf_counter() - start) * 1000
            if args.screenshot:
                page.screenshot(path=args.screenshot)
            start = time.perf_counter()
            page.goto(f"{server.url}/ui/#/pods")
            page.wait_for_selector(f"#table-count:text-is('{args.pods} of {args.pods}')", timeout=120_000)
            table_s = time.perf_counter() - start
            scroll_ms = page.evaluate("""() => new Promise((done) => {
                const box = document.querySelector('#table .vtable'); const t = performance.now();
                box.scrollTop = box.scrollHeight / 2;
                box.dispatchEvent(new Event('scroll'));
                requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t))); })""")
            rows = page.eval_on_selector_all("#table .row", "rs => rs.length")
            heap = page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0")
            browser.close()
    print(f"map with every node and pod: {map_s:.2f} s after logging in; recolour {redraw:.0f} ms; "
          f"hover tooltip {hover_ms:.0f} ms")
    print(f"pods table with {args.pods} rows: {table_s:.2f} s; a scroll to the middle drawn in {scroll_ms:.0f} ms "
          f"({rows} rows in the DOM); JS heap {heap / 2**20:.0f} MiB")
    print(f"console errors: {len(problems)}" + (f" — {problems[:3]}" if problems else ""))


if __name__ == "__main__":
    main()
