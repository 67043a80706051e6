"""The disruption controller: each PodDisruptionBudget's status, for ``kubectl get pdb``.

Every ``interval`` seconds, for every budget, the figures Kubernetes' controller keeps —
``currentHealthy``, ``desiredHealthy``, ``disruptionsAllowed``, ``expectedPods`` — worked out over
its namespace's pods (:func:`corral.server.rest.disruption.budget_status`) and written through the
status subresource when they changed. Evictions do not read them (they work the figures out afresh,
so a status a few seconds old never lets one through); they are what a user sees. Nothing to do,
and no pod read, while there is no budget.
"""

from __future__ import annotations

import logging

from corral.api.resources import by_kind
from corral.controllers.periodic import PeriodicController
from corral.server import errors
from corral.server.rest.disruption import budget_status
from corral.server.rest import ResourceAPI, WriteOptions

__all__ = ["DisruptionController"]

log = logging.getLogger(__name__)


class DisruptionController(PeriodicController):
    name = "disruption"
    what = "disruption budget status"

    def __init__(self, api: ResourceAPI, *, interval: float = 2.0) -> None:
        self.api = api
        self.interval = interval
        self._pdbs, self._pods = by_kind("PodDisruptionBudget"), by_kind("Pod")

    async def reconcile(self) -> None:
        """One pass over every budget (also what tests call)."""
        await self.api.cache.wait_fresh()
        budgets = [r.obj for r in self.api.cache.items(self._pdbs.store_prefix)]
        by_namespace: dict[str, list] = {}
        for pdb in budgets:
            ns = pdb["metadata"]["namespace"]
            if ns not in by_namespace:
                by_namespace[ns] = [r.obj for r in self.api.cache.items(self._pods.store_prefix,
                                                                        f"{self._pods.store_prefix}{ns}/")]
            status = budget_status(pdb, by_namespace[ns])
            if pdb.get("status") == status:
                continue
            try:
                await self.api.update(self._pdbs, ns, pdb["metadata"]["name"], {**pdb, "status": status},
                                      WriteOptions(warn=False), subresource="status")
            except errors.ApiError as exc:  # changed or deleted meanwhile: the next pass sees it
                log.debug("status of budget %s/%s not written: %s", ns, pdb["metadata"]["name"], exc.message)
