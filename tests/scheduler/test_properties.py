"""Scheduler invariants over random clusters and pod streams (hypothesis).

The oracle below is written independently of the column plugins, in plain Python over the API
objects, so it checks their vectorised answers rather than repeating them.
"""

from __future__ import annotations

import asyncio

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corral.api.quantity import to_milli, to_units
from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import Harness

HOST = "kubernetes.io/hostname"
ZONES = ["z1", "z2", "z3"]

node_spec = st.fixed_dictionaries({
    "cpu": st.integers(1, 8),
    "memory_gi": st.integers(1, 16),
    "pods": st.integers(1, 8),
    "zone": st.sampled_from(ZONES),
    "tainted": st.booleans(),
    "cordoned": st.integers(0, 9).map(lambda n: n == 0),
})
pod_spec = st.fixed_dictionaries({
    "cpu_m": st.sampled_from([0, 100, 250, 500, 1000, 2500]),
    "memory_mi": st.sampled_from([0, 128, 512, 2048, 6144]),
    "zone": st.one_of(st.none(), st.sampled_from(ZONES)),
    "tolerates": st.booleans(),
    "app": st.sampled_from(["web", "db", "cache"]),
    "anti": st.booleans(),
})


def build_node(i: int, spec: dict) -> dict:
    b = make_node(f"n{i}").capacity(cpu=spec["cpu"], memory=f"{spec['memory_gi']}Gi", pods=spec["pods"]).zone(spec["zone"])
    if spec["tainted"]:
        b.taint("dedicated", "special")
    if spec["cordoned"]:
        b.unschedulable()
    return b.obj


def build_pod(i: int, spec: dict) -> dict:
    b = make_pod(f"p{i}").labels(app=spec["app"])
    if spec["cpu_m"] or spec["memory_mi"]:
        b.requests(**{k: v for k, v in (("cpu", f"{spec['cpu_m']}m"), ("memory", f"{spec['memory_mi']}Mi")) if v != "0m" and v != "0Mi"})
    if spec["zone"]:
        b.node_selector(**{"topology.kubernetes.io/zone": spec["zone"]})
    if spec["tolerates"]:
        b.toleration("dedicated", "special", "NoSchedule")
    if spec["anti"]:
        b.anti_affinity(HOST, app=spec["app"])
    return b.obj


def requests(pod: dict) -> tuple[int, int]:
    req = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
    return to_milli(req.get("cpu", "0")), to_units(req.get("memory", "0"))


def oracle_fits(pod: dict, node: dict, others: list[dict]) -> list[str]:
    """What a careful human would check, from the objects alone. Returns the violated rules."""
    problems = []
    alloc = node["status"]["allocatable"]
    cpu = sum(requests(p)[0] for p in others) + requests(pod)[0]
    mem = sum(requests(p)[1] for p in others) + requests(pod)[1]
    if cpu > to_milli(alloc["cpu"]) or mem > to_units(alloc["memory"]) or len(others) + 1 > int(alloc["pods"]):
        problems.append("resources")
    if node["spec"].get("unschedulable"):
        problems.append("cordoned")
    for key, value in pod["spec"].get("nodeSelector", {}).items():
        if node["metadata"]["labels"].get(key) != value:
            problems.append("selector")
    if node["spec"].get("taints") and not pod["spec"].get("tolerations"):
        problems.append("taint")
    app = pod["metadata"]["labels"]["app"]
    anti_of = lambda p: p["spec"].get("affinity", {}).get("podAntiAffinity")  # noqa: E731
    if anti_of(pod) and any(o["metadata"]["labels"]["app"] == app for o in others):
        problems.append("anti-affinity")
    if any(anti_of(o) and o["metadata"]["labels"]["app"] == app for o in others):
        problems.append("existing anti-affinity")
    return problems


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nodes=st.lists(node_spec, min_size=1, max_size=8), pods=st.lists(pod_spec, min_size=1, max_size=40),
       fail_rate=st.sampled_from([0.0, 0.2]))
def test_no_overcommit_every_binding_fits_and_pending_means_every_node_refused(nodes, pods, fail_rate):
    async def scenario() -> None:
        h = Harness(fail_rate=fail_rate, seed=len(pods))
        node_objs = {f"n{i}": build_node(i, s) for i, s in enumerate(nodes)}
        for obj in node_objs.values():
            h.add_node(obj)
        pod_objs = {f"default/p{i}": build_pod(i, s) for i, s in enumerate(pods)}
        violations = []
        original_bind = h.writer.bind

        async def checked_bind(info, node):
            status = await original_bind(info, node)
            if status.ok:
                others = [pod_objs[k] for k, n in h.writer.bindings.items() if n == node and k != info.key]
                for problem in oracle_fits(pod_objs[info.key], node_objs[node], others):
                    violations.append((info.key, node, problem))
            return status

        h.writer.bind = checked_bind
        for obj in pod_objs.values():
            h.add_pod(obj)
        await h.run()

        assert violations == []
        for name, node in node_objs.items():
            on_node = [pod_objs[k] for k, n in h.placements().items() if n == name]
            assert not oracle_fits_resources_exceeded(on_node, node), f"{name} overcommitted"
        # Pending must mean the oracle, not the framework under test, finds no node for the pod
        # among the pods that ended up bound (so a filter that refuses too much shows up here).
        final = {name: [pod_objs[k] for k, n in h.placements().items() if n == name] for name in node_objs}
        for key in h.pending():
            takers = [name for name, node in node_objs.items() if not oracle_fits(pod_objs[key], node, final[name])]
            assert takers == [], f"{key} is pending but {takers} could take it"
        await h.scheduler.events.stop()

    asyncio.run(scenario())


def oracle_fits_resources_exceeded(pods: list[dict], node: dict) -> bool:
    alloc = node["status"]["allocatable"]
    cpu = sum(requests(p)[0] for p in pods)
    mem = sum(requests(p)[1] for p in pods)
    return cpu > to_milli(alloc["cpu"]) or mem > to_units(alloc["memory"]) or len(pods) > int(alloc["pods"])
