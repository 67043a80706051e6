"""What the server's ``/metrics`` shows of itself: requests and their latency, the store and the
watch cache, leadership, the controllers' event recorders, and the nodes' zones and evictions. (The
scheduler's are its own: :mod:`corral.scheduler.scheduler`.)"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

__all__ = ["ServerMetrics"]


class ServerMetrics:
    """The server's own metrics (``/metrics``), on a registry of its own; a scheduler inside the server
    adds its metrics to it."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes, cpu seconds, ...
        self.requests = Counter("corral_apiserver_requests", "API requests by verb, resource and code",
                                ["verb", "resource", "code"], registry=self.registry)
        self.latency = Histogram("corral_apiserver_request_duration_seconds", "API request latency",
                                 ["verb"], registry=self.registry,
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5))
        self.revision = Gauge("corral_store_revision", "Newest store revision", registry=self.registry)
        self.watchers = Gauge("corral_apiserver_watchers", "Open client watches", registry=self.registry)
        self.cached_events = Gauge("corral_watch_cache_events", "Changes the watch cache keeps for watches "
                                   "from a past revision", registry=self.registry)
        self.objects = Gauge("corral_apiserver_objects", "Objects held by the watch cache",
                             ["resource"], registry=self.registry)
        self.leader = Gauge("corral_leader", "1 while this server runs the scheduler and controllers",
                            registry=self.registry)
        self.controller_events_waiting = Gauge("corral_controller_events_waiting", "Events a controller recorded "
                                               "and has not yet written", ["controller"], registry=self.registry)
        self.controller_events_dropped = Counter("corral_controller_events_dropped", "Events a controller did not "
                                                 "write: recorded while the most were waiting to be", ["controller"],
                                                 registry=self.registry)
        self._followed: dict[tuple, tuple[object, float]] = {}  # see _follow
        self._served: dict[tuple[str, str, int], tuple[Any, Any]] = {}  # see served
        # The node lifecycle controller's zones, as kube-controller-manager's node_collector_* show them
        zone = ["zone"]  # "region/zone" from the nodes' topology labels (see corral.controllers.nodes.limits)
        self.zone_size = Gauge("corral_node_collector_zone_size", "Nodes in a zone", zone, registry=self.registry)
        self.zone_unhealthy = Gauge("corral_node_collector_unhealthy_nodes_in_zone", "NotReady nodes in a zone",
                                    zone, registry=self.registry)
        self.zone_health = Gauge("corral_node_collector_zone_health", "Percentage of a zone's nodes that are Ready",
                                 zone, registry=self.registry)
        self.zone_disrupted = Gauge("corral_node_collector_zone_disruption", "1 in a zone's disruption state "
                                    "(Normal, PartialDisruption, FullDisruption), 0 in the others",
                                    ["zone", "state"], registry=self.registry)
        self.evictions = Counter("corral_node_collector_evictions", "Lost nodes whose pods were evicted", zone,
                                 registry=self.registry)
        self._zones: set[str] = set()

    def served(self, verb: str, resource: str, code: int, seconds: float) -> None:
        """A request answered: counted by verb, resource and code, its latency by verb. The labelled
        children are kept here by their labels (``labels()`` checks and looks them up again each
        time, a fifth of what the metrics cost a request); the labels come from the server's own
        verbs, resources and codes, so there are few of them."""
        children = self._served.get((verb, resource, code))
        if children is None:
            children = self._served[(verb, resource, code)] = (self.requests.labels(verb, resource, str(code)),
                                                               self.latency.labels(verb))
        children[0].inc()
        children[1].observe(seconds)

    def node_zones(self, lifecycle: Any) -> None:
        """The node lifecycle controller's zones as its last pass found them, and its evictions (a
        new term's controller counts on from the last term's)."""
        from corral.controllers.nodes.limits import FULL, NORMAL, PARTIAL

        for zone in self._zones - lifecycle.zones.keys():  # no node there any more
            for gauge in (self.zone_size, self.zone_unhealthy, self.zone_health):
                gauge.remove(zone)
            for state in (NORMAL, PARTIAL, FULL):
                self.zone_disrupted.remove(zone, state)
        self._zones = set(lifecycle.zones)
        for zone, (size, not_ready, state) in lifecycle.zones.items():
            self.zone_size.labels(zone).set(size)
            self.zone_unhealthy.labels(zone).set(not_ready)
            self.zone_health.labels(zone).set(100.0 * (size - not_ready) / size if size else 100.0)
            for each in (NORMAL, PARTIAL, FULL):
                self.zone_disrupted.labels(zone, each).set(1 if each == state else 0)
        for zone, evicted in lifecycle.evictions.items():
            self._follow(self.evictions.labels(zone), ("evictions", zone), lifecycle, evicted)

    def _follow(self, counter: Any, key: tuple, owner: object, running: float) -> None:
        """Raise ``counter`` to follow ``running``, ``owner``'s running count: a new owner under ``key``
        (a new term's controller) counts from nothing, and the counter goes on from where it was."""
        seen, counted = self._followed.get(key, (None, 0))
        if seen is not owner:
            counted = 0
        if running > counted:
            counter.inc(running - counted)
        self._followed[key] = (owner, running)

    def controller_events(self, recorders: list[Any]) -> None:
        """The controllers' event recorders' figures (by their component); a recorder's ``dropped``
        is its running count (the counter follows it, and a new term's recorders count on from there)."""
        for events in recorders:
            name = events.component
            self.controller_events_waiting.labels(name).set(events.waiting)
            dropped = self.controller_events_dropped.labels(name)  # shown from 0, before any drop
            self._follow(dropped, ("dropped", name), events, events.dropped)
