"""Where the scheduler learns about the cluster: the server's watch cache, or informers over HTTP."""

from __future__ import annotations

from typing import Any, Callable

from corral.client.informer import Informer, object_key
from corral.scheduler.scheduler import Scheduler
from corral.store.base import Event, EventType

__all__ = ["attach_in_process", "InformerSource"]

_PODS, _NODES, _NAMESPACES = "/core/pods/", "/core/nodes/", "/core/namespaces/"
_BUDGETS = "/policy/poddisruptionbudgets/"
_GROUPS = "/scheduling.corral.dev/podgroups/"
_PLACEMENTS = "/placement.corral.dev/placements/"


def attach_in_process(scheduler: Scheduler, watch_cache: Any) -> Callable[[], None]:
    """Feed ``scheduler`` from the server's watch cache: the current state now, then every change
    as the cache applies it (synchronously, on the event loop; no HTTP hop, no copy). Returns the
    function that detaches it again."""
    for record in watch_cache.items(_NAMESPACES):
        scheduler.namespace_changed(record.key[len(_NAMESPACES):], record.obj)
    for record in watch_cache.items(_NODES):
        scheduler.node_changed(record.key[len(_NODES):], record.obj)
    for record in watch_cache.items(_BUDGETS):
        scheduler.budget_changed(record.key[len(_BUDGETS):], record.obj)
    for record in watch_cache.items(_GROUPS):
        scheduler.group_changed(record.key[len(_GROUPS):], record.obj)
    for record in watch_cache.items(_PODS):
        scheduler.pod_changed(record.key[len(_PODS):], record.obj)
    for record in watch_cache.items(_PLACEMENTS):
        scheduler.placement_changed(record.key[len(_PLACEMENTS):], record.obj)

    def on_event(event: Event) -> None:
        key = event.record.key
        gone = event.type is EventType.DELETED
        if key.startswith(_PODS):
            scheduler.pod_changed(key[len(_PODS):], None if gone else event.record.obj)
        elif key.startswith(_NODES):
            scheduler.node_changed(key[len(_NODES):], None if gone else event.record.obj)
        elif key.startswith(_NAMESPACES):
            scheduler.namespace_changed(key[len(_NAMESPACES):], None if gone else event.record.obj)
        elif key.startswith(_BUDGETS):
            scheduler.budget_changed(key[len(_BUDGETS):], None if gone else event.record.obj)
        elif key.startswith(_GROUPS):
            scheduler.group_changed(key[len(_GROUPS):], None if gone else event.record.obj)
        elif key.startswith(_PLACEMENTS):
            scheduler.placement_changed(key[len(_PLACEMENTS):], None if gone else event.record.obj)

    watch_cache.on_event.append(on_event)
    return lambda: watch_cache.on_event.remove(on_event)


class InformerSource:
    """Feed ``scheduler`` from list+watch informers on a remote server."""

    def __init__(self, scheduler: Scheduler, client: Any) -> None:
        self.informers = []
        for resource, handler in (("namespaces", scheduler.namespace_changed), ("nodes", scheduler.node_changed),
                                  ("poddisruptionbudgets", scheduler.budget_changed),
                                  ("podgroups", scheduler.group_changed),
                                  ("pods", scheduler.pod_changed), ("placements", scheduler.placement_changed)):
            informer = Informer(client, resource, raw=True)
            informer.on_add(lambda obj, h=handler: h(object_key(obj), obj))
            informer.on_update(lambda old, new, h=handler: h(object_key(new), new))
            informer.on_delete(lambda obj, h=handler: h(object_key(obj), None))
            self.informers.append(informer)

    async def start(self) -> None:
        for informer in self.informers:  # namespaces and nodes first, so pods find their nodes
            informer.start()
            await informer.wait_synced()

    async def stop(self) -> None:
        for informer in self.informers:
            await informer.stop()
