"""Containers' probes (liveness, readiness, startup): what they are and Kubernetes' defaults for
them; validated by :mod:`corral.api.kinds.probe_validation`, run by the agent
(:mod:`corral.agent.probes`). No I/O here."""

from __future__ import annotations

from typing import Any

__all__ = ["PROBES", "HANDLERS", "DEFAULTS", "probe_defaults"]

PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}


def probe_defaults(container: dict[str, Any]) -> None:
    """Kubernetes' defaults for each probe of ``container`` (and httpGet's path and scheme)."""
    for field in PROBES:
        probe = container.get(field)
        if not isinstance(probe, dict):
            continue
        for key, value in DEFAULTS.items():
            probe.setdefault(key, value)
        http = probe.get("httpGet")
        if isinstance(http, dict):
            http.setdefault("path", "/")
            http.setdefault("scheme", "HTTP")
