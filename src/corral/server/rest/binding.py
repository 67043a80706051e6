"""Bindings as the REST layer writes them: a pod given its node (``spec.nodeName``), its phase
Scheduled and its PodScheduled condition True, by compare-and-swap.

:meth:`~corral.server.rest.ResourceAPI.assign_node` writes one (``pods/NAME/binding``, and the
scheduler inside the server); :func:`assign_nodes` writes many at once, for the scheduler in a
child process, which sends its bindings in batches: they go to the store together
(:meth:`~corral.store.Store.update_many`), without a task and a future of their own each. A binding
that loses its compare-and-swap to a write the watch cache had not seen yet is done again as
:meth:`~corral.server.rest.ResourceAPI.assign_node` does it, from a fresh read.
"""

from __future__ import annotations

import asyncio
from typing import Any

from corral.api.defaults import now_rfc3339
from corral.api.resources import ResourceType, by_kind
from corral.server import errors
from corral.server.watch import editable
from corral.store.base import Conflict, KeyNotFound, StoreError

__all__ = ["assign", "assign_nodes"]


def assign(pods: ResourceType, pod: dict[str, Any], node: str) -> None:
    """Bind ``pod`` (its top level and its metadata, spec and status dicts fresh copies) to ``node``
    in place; :class:`~corral.server.errors.ApiError` 409 when it is bound already or being deleted."""
    name = pod["metadata"].get("name", "")
    bound = pod["spec"].get("nodeName")
    if bound:
        raise errors.conflict(pods, name, f'pod {name} is already assigned to node "{bound}"')
    if pod["metadata"].get("deletionTimestamp"):
        raise errors.conflict(pods, name, f"pod {name} is being deleted, cannot be assigned to a host")
    pod["spec"]["nodeName"] = node
    status = pod["status"]
    status["phase"] = "Scheduled"
    status.pop("nominatedNodeName", None)
    conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
    conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": now_rfc3339()})
    status["conditions"] = conditions


async def assign_nodes(api: Any, binds: list[tuple[str, str, str]], *,
                       fence: tuple[str, int] | None = None) -> list[BaseException | None]:
    """Bind each ``(namespace, name, node)`` of ``binds``, independently; each one's outcome in
    order: None when written, else the :class:`~corral.server.errors.ApiError` (404, 409) or
    :class:`~corral.store.StoreError` (:class:`~corral.store.Fenced` among them) it failed with, as
    :meth:`~corral.server.rest.ResourceAPI.assign_node` would raise it. ``api``: the server's
    :class:`~corral.server.rest.ResourceAPI`."""
    pods = by_kind("Pod")
    outcomes: list[BaseException | None] = [None] * len(binds)
    writes: list[tuple[str, dict[str, Any], int]] = []
    written: list[int] = []  # the index in binds of each write
    again: list[int] = []  # done one by one from a fresh read: not in the cache, or lost a race
    get = api.cache.get
    for i, (namespace, name, node) in enumerate(binds):
        record = get(pods.key(namespace, name))
        if record is None:
            again.append(i)
            continue
        pod = editable(record.obj)
        try:
            assign(pods, pod, node)
        except errors.ApiError as exc:
            outcomes[i] = exc
            continue
        writes.append((record.key, pod, record.revision))
        written.append(i)
    if writes:
        for i, outcome in zip(written, await api.store.update_many(writes, fence=fence)):
            if isinstance(outcome, Conflict):
                again.append(i)
            elif isinstance(outcome, KeyNotFound):
                outcomes[i] = errors.not_found(pods, binds[i][1])
            elif isinstance(outcome, BaseException):
                outcomes[i] = outcome

    async def one(i: int) -> None:
        namespace, name, node = binds[i]
        try:
            await api.assign_node(namespace, name, node, fence=fence)
        except (errors.ApiError, StoreError) as exc:
            outcomes[i] = exc

    if again:
        await asyncio.gather(*(one(i) for i in again))
    return outcomes
