"""PodDisruptionBudgets through the eviction API: the arithmetic Kubernetes uses (counts and
percentages rounded up, minAvailable or maxUnavailable, unhealthy pods), the 429 kubectl drain
retries on, and the two ways a pod leaves: deleted (Kubernetes' eviction) or moved (corral drain)."""

from __future__ import annotations

import json

import pytest

from corral.server.rest.disruption import budgets_for, refusal


def pod(name: str, ready: bool = True, app: str = "web", node: str | None = "n1", **status) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **({"nodeName": node} if node else {})},
            "status": {"phase": "Running", **status,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pdb(**spec) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


@pytest.mark.parametrize("spec, healthy, total, allowed", [
    ({"minAvailable": 2}, 3, 3, 1),
    ({"minAvailable": 3}, 3, 3, 0),
    ({"minAvailable": "50%"}, 3, 3, 1),  # ceil(1.5) = 2 wanted
    ({"minAvailable": "100%"}, 4, 4, 0),
    ({"maxUnavailable": 1}, 3, 3, 1),
    ({"maxUnavailable": "34%"}, 3, 3, 2),  # ceil(1.02) = 2 may be unavailable: 1 wanted
    ({"maxUnavailable": 0}, 5, 5, 0),
    ({"minAvailable": 2}, 2, 3, 0),  # one already unhealthy
])
def test_disruptions_allowed_as_kubernetes_counts_them(spec, healthy, total, allowed):
    pods = [pod(f"p{i}", ready=i < healthy) for i in range(total)]
    [budget] = budgets_for(pods[0], [pdb(**spec)], pods)
    assert budget.disruptions_allowed == allowed


def test_a_budget_selects_by_labels_and_ignores_finished_pods_and_other_apps():
    pods = [pod("a"), pod("b"), pod("other", app="db"), pod("done", phase="Succeeded")]
    [budget] = budgets_for(pods[0], [pdb(minAvailable=1)], pods)
    assert (budget.expected, budget.healthy) == (2, 2)
    assert budgets_for(pods[2], [pdb(minAvailable=1)], pods) == []
    assert budgets_for(pods[0], [{**pdb(), "spec": {"minAvailable": 1}}], pods) == []  # no selector: none


def test_an_unhealthy_pod_may_go_if_the_budget_is_met_or_always_allowed():
    pods = [pod("a"), pod("b"), pod("sick", ready=False)]
    assert refusal(pods[2], budgets_for(pods[2], [pdb(minAvailable=2)], pods)) is None
    assert refusal(pods[2], budgets_for(pods[2], [pdb(minAvailable=3)], pods)) is not None
    assert refusal(pods[2], budgets_for(pods[2], [pdb(minAvailable=3, unhealthyPodEvictionPolicy="AlwaysAllow")],
                                        pods)) is None


async def create(http, path: str, body: dict) -> None:
    async with http.post(path, json=body) as r:
        assert r.status == 201, await r.text()


async def evict(http, name: str, namespace: str = "default", **params) -> tuple[int, dict]:
    async with http.post(f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", params=params,
                         json={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}) as r:
        return r.status, await r.json()


async def test_the_eviction_api_refuses_with_429_then_deletes_or_moves(http):
    for name in ("a", "b"):
        await create(http, "/api/v1/namespaces/default/pods", pod(name))
        async with http.patch(f"/api/v1/namespaces/default/pods/{name}/status",
                              data=json.dumps({"status": pod(name)["status"]}),
                              headers={"Content-Type": "application/merge-patch+json"}) as r:
            assert r.status == 200
    await create(http, "/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb(minAvailable=2))
    code, status = await evict(http, "a")
    assert code == 429 and status["reason"] == "TooManyRequests" and "needs 2 healthy pods" in status["message"]
    assert status["details"] == {"name": "a", "kind": "pods", "causes": [
        {"reason": "DisruptionBudget", "message": status["message"]}]}
    async with http.delete("/apis/policy/v1/namespaces/default/poddisruptionbudgets/b") as r:
        assert r.status == 200
    assert (await evict(http, "a", dryRun="All"))[0] == 201
    async with http.get("/api/v1/namespaces/default/pods/a") as r:
        assert "deletionTimestamp" not in (await r.json())["metadata"]  # a dry run changed nothing
    code, status = await evict(http, "a")
    assert code == 201 and (status["kind"], status["status"], status["code"]) == ("Status", "Success", 201)
    async with http.get("/api/v1/namespaces/default/pods/a") as r:
        assert (await r.json())["metadata"]["deletionTimestamp"]  # deleted gracefully: its agent stops it
    assert (await evict(http, "b", move="true"))[0] == 201
    async with http.get("/api/v1/namespaces/default/pods/b") as r:
        moved = await r.json()
    assert "nodeName" not in moved["spec"] and moved["status"]["phase"] == "Pending"  # corral drain's way
    assert (moved["status"]["reason"], moved["status"]["message"]) == ("Evicted",
                                                                       "evicted through the API (was on node n1)")


async def test_an_eviction_with_a_grace_period_of_zero_removes_the_pod_at_once(http):
    await create(http, "/api/v1/namespaces/default/pods", pod("a"))
    async with http.post("/api/v1/namespaces/default/pods/a/eviction", json={
            "apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"},
            "deleteOptions": {"gracePeriodSeconds": 0}}) as r:
        assert r.status == 201
    async with http.get("/api/v1/namespaces/default/pods/a") as r:
        assert r.status == 404


async def test_a_budget_guards_only_the_pods_of_its_own_namespace(http):
    await create(http, "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    for namespace, names in (("default", ("a", "b")), ("team", ("c", "d", "e"))):
        for name in names:
            await create(http, f"/api/v1/namespaces/{namespace}/pods", pod(name))
            async with http.patch(f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                                  data=json.dumps({"status": pod(name)["status"]}),
                                  headers={"Content-Type": "application/merge-patch+json"}) as r:
                assert r.status == 200
    await create(http, "/apis/policy/v1/namespaces/team/poddisruptionbudgets", pdb(minAvailable=2))
    code, _ = await evict(http, "a")  # the budget in "team" does not guard "default"'s web pods
    assert code == 201
    code, status = await evict(http, "c", "team")  # team's three healthy pods: one may go
    assert code == 201 and status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                      "message": "", "reason": "", "code": 201}
    code, _ = await evict(http, "d", "team")  # two left, two needed
    assert code == 429
    await create(http, "/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb(minAvailable=1))
    code, status = await evict(http, "b")  # "b" is the last healthy one here; team's three do not count
    assert code == 429 and "needs 1 healthy pods" in status["message"]


@pytest.mark.parametrize("spec, field", [
    ({"minAvailable": 1, "maxUnavailable": 1}, "spec"),
    ({"minAvailable": -1}, "spec.minAvailable"),
    ({"maxUnavailable": "150%"}, "spec.maxUnavailable"),
    ({"minAvailable": "half"}, "spec.minAvailable"),
])
async def test_a_malformed_budget_is_invalid_naming_its_field(http, spec, field):
    async with http.post("/apis/policy/v1/namespaces/default/poddisruptionbudgets",
                         json={**pdb(), "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}) as r:
        assert r.status == 422
        assert field in [c["field"] for c in (await r.json())["details"]["causes"]]



async def test_an_eviction_reads_the_namespaces_pods_only_when_a_budget_selects_the_pod(server, http, monkeypatch):
    """kubectl drain evicts a node's pods one by one: without a budget for them, each eviction read
    every pod of the namespace (110 pods of a node in a namespace of 50,000: 5.5 million reads)."""
    for name in ("a", "b", "c"):
        await create(http, "/api/v1/namespaces/default/pods", pod(name))
        await create(http, "/api/v1/namespaces/default/pods", pod(f"db-{name}", app="db"))
    await create(http, "/apis/policy/v1/namespaces/default/poddisruptionbudgets", pdb(minAvailable=1))
    reads = []
    items = server.cache.items
    monkeypatch.setattr(server.cache, "items", lambda prefix, *a: reads.append(prefix) or items(prefix, *a))
    assert (await evict(http, "db-a", move="true"))[0] == 201  # the budget selects app=web only
    assert reads.count("/core/pods/") == 0
    assert (await evict(http, "a", move="true"))[0] == 201
    assert reads.count("/core/pods/") == 1
    code, status = await evict(http, "b", move="true")  # c stays healthy, as the budget wants
    assert code == 201 and reads.count("/core/pods/") == 2
