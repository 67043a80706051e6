"""The dashboard as a person sees it: Debian's chromium, driven by Playwright, against a real
server process with its scheduler. Logging in with the admin kubeconfig, the map (nodes by zone, a
cordoned one marked), a pod created through the API appearing in the table without a reload, a
Pending pod's page with every node's fate, the plan page, no console errors. Screenshots of each
page go to test-artifacts/dashboard/ ($CORRAL_ARTIFACTS)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil

import pytest

from corral.testing import ServerProcess
from corral.testing.builders import make_node, make_pod

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARTIFACTS = os.path.join(os.environ.get("CORRAL_ARTIFACTS", "test-artifacts"), "dashboard")
# As the machine's notes advise for a closed network: no background connections, no sandbox (root).
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


def node(name: str, zone: str, cpu: int = 4) -> dict:
    return {**make_node(name).capacity(cpu=cpu, memory="8Gi", pods=20).zone(zone).obj, "apiVersion": "v1", "kind": "Node"}


def pod(name: str, cpu: str) -> dict:
    obj = make_pod(name).requests(cpu=cpu, memory="64Mi").obj
    obj["metadata"].pop("uid")
    obj.pop("status")
    return obj


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    assert os.path.exists(CHROMIUM), "Debian's chromium is needed (make system-deps installs it)"
    # No agent renews these nodes' leases: a grace period longer than the module keeps them Ready
    # however slowly it runs (at the default 40 s, a slowed run found them NotReady, and PickN empty).
    with ServerProcess(str(tmp_path_factory.mktemp("ui") / "server"), "--node-monitor-grace-period", "3600") as server:
        async def populate():
            async with server.client() as c:
                await c.create(node("a-1", "zone-a"))
                await c.create(node("a-2", "zone-a"))
                cordoned = node("b-1", "zone-b")
                cordoned["spec"] = {"unschedulable": True}
                await c.create(cordoned)
                tainted = node("b-2", "zone-b")
                tainted["spec"] = {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]}
                await c.create(tainted)
        asyncio.run(populate())
        yield server


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(cluster, browser):
    context = browser.new_context(ignore_https_errors=True, viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    problems: list[str] = []
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    pg.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    pg.problems = problems  # a test that provokes an error response removes the one it expects
    pg.goto(f"{cluster.url}/ui/")
    with open(cluster.kubeconfig, encoding="utf-8") as f:
        pg.fill("#login-text", f.read())  # the admin kubeconfig, pasted whole
    pg.click("#login-go")
    pg.wait_for_selector("#nav:not([hidden])")
    yield pg
    assert problems == [], problems  # no console errors on any page
    context.close()


def shot(pg, name: str) -> None:
    os.makedirs(ARTIFACTS, exist_ok=True)
    pg.screenshot(path=os.path.join(ARTIFACTS, f"{name}.png"), full_page=True)


def run(coro):
    """Playwright's sync API holds this thread's event loop: the API client runs on another."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def _create(server, obj):
    async with server.client() as c:
        await c.create(obj)


def test_the_map_shows_every_node_by_zone_with_the_cordoned_and_tainted_marked(page):
    page.wait_for_selector("#map-summary:has-text('4 nodes')")
    assert page.text_content("#map-summary").startswith("4 nodes in 2 zones · 0 NotReady · 1 cordoned · 1 tainted")
    where = page.evaluate("window.corralTile('b-1')")
    page.mouse.move(where["x"] + page.eval_on_selector("#map", "c => c.getBoundingClientRect().left"),
                    where["y"] + page.eval_on_selector("#map", "c => c.getBoundingClientRect().top"))
    page.wait_for_selector("#tip:not([hidden])")
    tip = page.text_content("#tip")
    assert tip.startswith("b-1\nzone: zone-b\ncpu: 0m of 4 requested (0%)") and "cordoned (unschedulable)" in tip

    # The tiles as drawn: the canvas read back once (more readbacks make chromium warn).
    probes = [("a-1", 0.05, 0.05), ("a-1", 0.5, 0.5), ("b-1", 0.05, 0.05), ("b-1", 0.5, 0.5), ("b-2", 0.78, 0.22),
              ("b-2", 0.3, 0.7)]
    colours = page.evaluate("""(probes) => { const c = document.getElementById('map'), r = window.devicePixelRatio || 1;
        const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        return probes.map(([name, dx, dy]) => { const t = window.corralTile(name);
            const i = 4 * (Math.round((t.top + dy * t.size) * r) * c.width + Math.round((t.left + dx * t.size) * r));
            return [data[i], data[i + 1], data[i + 2]]; }); }""", probes)
    green, blue, purple = [0x3f, 0xa3, 0x4d], [0x2f, 0x6f, 0xdf], [0x8a, 0x4f, 0xd8]
    # a-1 plain; b-1 cordoned: outlined; b-2 tainted: a dot in its corner.
    assert colours == [green, green, blue, green, purple, green]
    shot(page, "map")


def test_a_pod_created_through_the_api_appears_in_the_table_without_a_reload(page, cluster):
    page.goto(f"{cluster.url}/ui/#/pods")
    page.wait_for_selector("#table-count:text-is('0 of 0')")
    run(_create(cluster, pod("live-1", "100m")))
    row = page.wait_for_selector("#table .row:has-text('live-1')")
    assert "default" in row.text_content()
    page.wait_for_selector("#table .row:has-text('live-1'):has-text('a-')")  # bound, still no reload
    shot(page, "pods")


def test_a_pending_pods_page_shows_every_nodes_fate_and_the_nearest_misses(page, cluster):
    run(_create(cluster, pod("huge", "6")))
    page.goto(f"{cluster.url}/ui/#/pod/default/huge")
    page.wait_for_selector("#pod-summary:has-text('nodes are available')")
    rows = page.eval_on_selector_all("#pod-table .row", "rs => rs.map(r => [...r.children].map(c => c.textContent))")
    fates = {r[0]: (r[1], r[3]) for r in rows}
    assert fates == {"a-1": ("rejected", "NodeResourcesFit"), "a-2": ("rejected", "NodeResourcesFit"),
                     "b-1": ("rejected", "NodeUnschedulable"), "b-2": ("rejected", "TaintToleration")}
    assert page.text_content("#pod-misses").startswith("Nearest: a-")
    shot(page, "pending-pod")


def test_the_plan_page_shows_where_pasted_manifests_would_land(page, cluster):
    page.goto(f"{cluster.url}/ui/#/plan")
    page.fill("#plan-text", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: 2\n"
                            "  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n"
                            "    spec: {containers: [{name: web, image: nginx, resources: {requests: {cpu: 500m}}}]}\n"
                            "---\napiVersion: v1\nkind: Pod\nmetadata: {name: enormous}\n"
                            "spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: '64'}}}]}\n")
    page.click("#plan-go")
    page.wait_for_selector("#plan-summary:has-text('would be placed')")
    assert page.text_content("#plan-summary").startswith("2 pod(s) would be placed, 1 would stay Pending")
    rows = page.eval_on_selector_all("#plan-table .row", "rs => rs.map(r => [...r.children].map(c => c.textContent))")
    assert sorted(r[0] for r in rows) == ["default/web-1", "default/web-2"]
    assert all(r[2] in ("a-1", "a-2") for r in rows)  # b-1 is cordoned, b-2 tainted
    assert "default/enormous (Pod default/enormous): 0/4 nodes are available" in page.text_content("#plan-pending")
    shot(page, "plan")
    page.fill("#plan-text", "kind: [unclosed")
    page.click("#plan-go")
    page.wait_for_selector("#plan-error:not(:empty)")
    assert "manifests" in page.text_content("#plan-error")
    # Chromium logs every refused request; this one the test asked for, and the page showed it.
    page.problems.remove("console error: Failed to load resource: the server responded with a status of 422 "
                         "(Unprocessable Entity)")
    assert page.is_hidden("#plan-map-wrap")  # no stale plan beside the error


def test_a_running_pods_logs_are_followed_as_they_are_written(browser, tmp_path):
    """A real agent (process runtime) runs a pod that prints a line every 0.2 s: its page's logs
    link shows what it printed so far and then what it prints next, with no reload."""
    from corral.testing.cluster import wait_for
    from tests.agent.test_end_to_end import apply, local_cluster, phase, pod_yaml

    with local_cluster(tmp_path, 1) as c:
        apply(c.kubeconfig, tmp_path, pod_yaml("talker", ["sh", "-c", "i=0; while true; do echo line-$i; "
                                                          "i=$((i+1)); sleep 0.2; done"]))
        wait_for(lambda: phase(c.kubeconfig, "talker") == "Running", what="talker running")
        context = browser.new_context(ignore_https_errors=True, viewport={"width": 1280, "height": 800})
        pg = context.new_page()
        problems: list[str] = []
        pg.on("console", lambda m: problems.append(m.text) if m.type in ("error", "warning") else None)
        pg.on("pageerror", lambda e: problems.append(str(e)))
        pg.goto(f"{c.url}/ui/")
        with open(c.kubeconfig, encoding="utf-8") as f:
            pg.fill("#login-text", f.read())
        pg.click("#login-go")
        pg.goto(f"{c.url}/ui/#/pod/default/talker")
        pg.click("#pod-logs")
        pg.wait_for_selector("#logs-text:has-text('line-2')")
        seen = pg.text_content("#logs-text")
        last = max(int(x.split("-")[1]) for x in seen.split() if x.startswith("line-"))
        pg.wait_for_selector(f"#logs-text:has-text('line-{last + 5}')")  # printed after the page opened
        assert pg.text_content("#logs-title") == "Logs of default/talker, following"
        shot(pg, "logs")
        context.close()
        assert problems == []


def test_workloads_placements_and_events_are_live_tables_too(page, cluster):
    page.goto(f"{cluster.url}/ui/#/workloads")
    page.wait_for_selector("#table-count:has-text('of')")
    run(_create(cluster, {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop"},
                          "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "shop"}},
                                   "template": {"metadata": {"labels": {"app": "shop"}},
                                                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}))
    page.wait_for_selector("#table .row:has-text('Deployment'):has-text('shop')")
    page.wait_for_selector("#table .row:has-text('ReplicaSet'):has-text('shop-')")  # made by its controller
    shot(page, "workloads")
    page.goto(f"{cluster.url}/ui/#/placements")
    page.wait_for_selector("#table-count:has-text('of')")
    run(_create(cluster, {"apiVersion": "placement.corral.dev/v1", "kind": "Placement", "metadata": {"name": "edge"},
                          "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}},
                                   "policy": {"placementType": "PickN", "numberOfNodes": 2}}}))
    row = page.wait_for_selector("#table .row:has-text('edge'):has-text('PickN')")
    page.wait_for_selector("#table .row:has-text('edge') .cell:nth-child(5):text-is('2')")  # two selected
    assert row.text_content().startswith("defaultedgePickN2")
    shot(page, "placements")
    page.goto(f"{cluster.url}/ui/#/events")
    page.wait_for_selector("#table .row:has-text('Scheduled')")  # the scheduler's events about shop's pods
    shot(page, "events")
