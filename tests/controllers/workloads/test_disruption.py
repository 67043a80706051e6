"""The disruption controller keeps each budget's status as Kubernetes' does, so that
`kubectl get pdb` shows ALLOWED DISRUPTIONS, and writes only when the figures change."""

from __future__ import annotations

from corral.api.resources import by_kind
from corral.controllers.workloads.disruption import DisruptionController
from corral.server.rest import WriteOptions
from corral.testing.builders import make_pod

PODS, PDBS = by_kind("Pod"), by_kind("PodDisruptionBudget")
OPTS = WriteOptions(warn=False)


async def add_pod(api, name: str, *, ready: bool, app: str = "web", namespace: str = "default") -> None:
    pod = make_pod(name, namespace).node("n1").obj
    pod["metadata"].pop("uid")
    pod["metadata"]["labels"] = {"app": app}
    await api.create(PODS, namespace, pod, OPTS)
    current = (await api.current(PODS, namespace, name)).obj
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    await api.update(PODS, namespace, name, {**current, "status": status}, OPTS, subresource="status")


async def add_budget(api, namespace: str = "default", min_available: int = 1) -> None:
    await api.create(PDBS, namespace, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                       "metadata": {"name": "web", "namespace": namespace},
                                       "spec": {"minAvailable": min_available,
                                                "selector": {"matchLabels": {"app": "web"}}}}, OPTS)


async def status_of(api, name: str, namespace: str = "default") -> dict:
    await api.cache.wait_consistent()
    return (await api.current(PDBS, namespace, name)).obj.get("status") or {}


async def test_a_budgets_status_counts_its_healthy_pods_and_what_may_go(server):
    api = server.api
    for name, ready in (("a", True), ("b", True), ("c", False)):
        await add_pod(api, name, ready=ready)
    await add_pod(api, "db", ready=True, app="db")
    await api.create(PDBS, "default", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                       "metadata": {"name": "web"},
                                       "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}, OPTS)
    controller = DisruptionController(api)
    await controller.reconcile()
    assert await status_of(api, "web") == {"currentHealthy": 2, "desiredHealthy": 1, "disruptionsAllowed": 1,
                                           "expectedPods": 3, "observedGeneration": 1}
    revision = (await api.current(PDBS, "default", "web")).obj["metadata"]["resourceVersion"]
    await controller.reconcile()  # nothing changed: nothing written
    assert (await api.current(PDBS, "default", "web")).obj["metadata"]["resourceVersion"] == revision
    await api.delete(PODS, "default", "a", 0, None, None)
    await controller.reconcile()
    status = await status_of(api, "web")
    assert (status["currentHealthy"], status["disruptionsAllowed"]) == (1, 0)


async def test_each_budget_counts_its_own_namespaces_pods_and_a_pass_writes_only_the_changed_ones(server, monkeypatch):
    """Two budgets alike in two namespaces: each counts the pods of its own; a pass after one namespace
    changed writes that budget alone, whichever comes first."""
    api = server.api
    await api.create(by_kind("Namespace"), None, {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": "other"}}, OPTS)
    await add_pod(api, "a", ready=True)
    for name in ("x", "y"):
        await add_pod(api, name, ready=True, namespace="other")
    await add_budget(api)
    await add_budget(api, "other")
    controller = DisruptionController(api)
    await controller.reconcile()
    healthy = lambda status: (status["currentHealthy"], status["expectedPods"], status["disruptionsAllowed"])  # noqa: E731
    assert healthy(await status_of(api, "web")) == (1, 1, 0)
    assert healthy(await status_of(api, "web", "other")) == (2, 2, 1)
    await add_pod(api, "z", ready=True, namespace="other")
    await api.cache.wait_consistent()
    written, update = [], api.update

    async def recorded(resource, namespace, name, *args, **kwargs):
        written.append((namespace, name))
        return await update(resource, namespace, name, *args, **kwargs)
    monkeypatch.setattr(api, "update", recorded)
    await controller.reconcile()
    assert written == [("other", "web")] and healthy(await status_of(api, "web", "other")) == (3, 3, 2)
