"""Revisions an owner keeps of itself as ControllerRevisions: a DaemonSet of each template
(``kubectl rollout history``), a Placement of each policy (its policy snapshots).

Each revision is owned by its owner (removed with it), labelled with a digest of what it keeps and
numbered (``revision``): a new digest gets the next number; an older one coming back (an undo, a
policy changed back) is renumbered the newest rather than copied; beyond ``limit`` the oldest go.
What a revision keeps (``data``) is never rewritten: the owner's ``refresh`` may only patch its
number, labels and annotations.
"""

from __future__ import annotations

from typing import Any, Callable

from corral.api.resources import by_kind
from corral.controllers.workloads.node_rollout import HASH_LABEL
from corral.controllers.workloads.pods import controller_of
from corral.server import errors

__all__ = ["record_revision", "revisions_of"]

Obj = dict[str, Any]
REVISIONS = by_kind("ControllerRevision")


def revisions_of(cache: Any, owner: Obj) -> list[Obj]:
    """The owner's revisions that are not being deleted, oldest first."""
    meta = owner["metadata"]
    prefix = REVISIONS.store_prefix
    mine = [r.obj for r in cache.items(prefix, f"{prefix}{meta['namespace']}/")
            if (controller_of(r.obj) or {}).get("uid") == meta["uid"] and not r.obj["metadata"].get("deletionTimestamp")]
    return sorted(mine, key=lambda r: r["revision"])


async def record_revision(controller: Any, owner: Obj, digest: str, make: Callable[[int], Obj], *, limit: int,
                          refresh: Callable[[Obj, int], Obj] = lambda r, n: {}) -> None:
    """Make sure ``owner`` has a revision labelled ``digest``, numbered the newest: ``make(number)``
    builds a new one; an existing one is renumbered when it is not the newest any more, and
    ``refresh(current, number)`` says what else to patch on it (labels, annotations: a merge patch,
    empty for nothing)."""
    mine = revisions_of(controller.api.cache, owner)
    namespace = owner["metadata"]["namespace"]
    current = next((r for r in mine if (r["metadata"].get("labels") or {}).get(HASH_LABEL) == digest), None)
    highest = max((r["revision"] for r in mine), default=0)
    if current is None:
        try:
            await controller.api.create(REVISIONS, namespace, make(highest + 1), controller.opts)
        except errors.ApiError as exc:
            if exc.code != 409:  # made a moment ago: the next sync sees it
                raise
    else:
        number = current["revision"]
        renumbered = highest + 1 if number < highest else number
        patch = {**refresh(current, renumbered), **({"revision": renumbered} if renumbered != number else {})}
        if patch:
            try:
                await controller.api.patch(REVISIONS, namespace, current["metadata"]["name"], patch, "merge",
                                           controller.opts)
            except errors.ApiError as exc:
                if exc.code != 404:
                    raise
    old = [r for r in mine if r is not current]
    for stale in old[:max(len(old) - limit, 0)]:
        await controller.delete_if_unchanged(REVISIONS, stale)
