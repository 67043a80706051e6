"""The disruption controller keeps each budget's status as Kubernetes' does, so that
`kubectl get pdb` shows ALLOWED DISRUPTIONS, and writes only when the figures change."""

from __future__ import annotations

from corral.api.resources import by_kind
from corral.controllers.disruption import DisruptionController
from corral.server.rest import WriteOptions
from corral.testing.builders import make_pod

PODS, PDBS = by_kind("Pod"), by_kind("PodDisruptionBudget")
OPTS = WriteOptions(warn=False)


async def add_pod(api, name: str, *, ready: bool, app: str = "web") -> None:
    pod = make_pod(name).node("n1").obj
    pod["metadata"].pop("uid")
    pod["metadata"]["labels"] = {"app": app}
    await api.create(PODS, "default", pod, OPTS)
    current = (await api.current(PODS, "default", name)).obj
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    await api.update(PODS, "default", name, {**current, "status": status}, OPTS, subresource="status")


async def status_of(api, name: str) -> dict:
    await api.cache.wait_consistent()
    return (await api.current(PDBS, "default", name)).obj.get("status") or {}


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
