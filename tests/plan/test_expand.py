"""Manifests into pods, at the unit level (admission stands in as a function that names each pod):
how many each kind makes, and the bound on a plan's pods refused at the manifest that passes it."""

from __future__ import annotations

import pytest

from corral.plan import expand as expand_module
from corral.plan.expand import PlanInputError, expand
from corral.testing.builders import make_node

TEMPLATE = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


async def admit(kind: str, obj: dict, where: str) -> dict:
    meta = {**obj["metadata"], "namespace": obj["metadata"].get("namespace", "default")}
    return {**obj, "kind": kind, "metadata": meta}


def workload(kind: str, name: str, **spec) -> dict:
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name}, "spec": {"template": TEMPLATE, **spec}}


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": TEMPLATE["spec"]}


NODES = [make_node(f"n{i}").obj for i in range(4)]


async def test_each_kind_makes_the_pods_its_controller_would():
    out = await expand([pod("p"), workload("Deployment", "d", replicas=2), workload("ReplicaSet", "r"),
                        {**workload("Job", "j", parallelism=3, completions=2)},
                        {**workload("Job", "k", parallelism=2)}, workload("DaemonSet", "ds"),
                        workload("Deployment", "none", replicas=0)], admit, NODES)
    assert [(p.source, p.pod["metadata"]["name"]) for p in out.pods] == [
        ("Pod default/p", "p"), ("Deployment default/d", "d-1"), ("Deployment default/d", "d-2"),
        ("ReplicaSet default/r", "r-1"), ("Job default/j", "j-1"), ("Job default/j", "j-2"),
        ("Job default/k", "k-1"), ("Job default/k", "k-2"),
        *[("DaemonSet default/ds", f"ds-n{i}") for i in range(4)]]
    terms = out.pods[-1].pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}]}


@pytest.mark.parametrize("items, field", [
    pytest.param([pod("a"), pod("b"), pod("c"), pod("d")], "items[3]", id="the fourth pod"),
    pytest.param([pod("a"), workload("Deployment", "d", replicas=3)], "items[1].spec.replicas", id="replicas"),
    pytest.param([workload("Job", "j", parallelism=4)], "items[0].spec.parallelism", id="a Job's parallelism"),
    pytest.param([workload("DaemonSet", "ds")], "items[0]", id="a DaemonSet on four nodes"),
])
async def test_more_pods_than_a_plan_may_make_are_refused_at_the_manifest_that_passes_the_limit(
        monkeypatch, items, field):
    monkeypatch.setattr(expand_module, "MAX_PODS", 3)
    with pytest.raises(PlanInputError) as err:
        await expand(items, admit, NODES)
    assert err.value.path == field and err.value.message == "the plan would make more than 3 pods; plan fewer at once"
    assert len((await expand(items[:-1], admit, NODES)).pods) <= 3  # the ones before it are within the limit
