"""Validation of containers' probes, with Kubernetes' field paths and messages. Imported by
:mod:`corral.api.validation` alone (which it builds on). No I/O here."""

from __future__ import annotations

import re

from corral.api import models
from corral.api.kinds.probes import HANDLERS, PROBES
from corral.api.validation import FORBIDDEN, INVALID, REQUIRED, Cause, _invalid, _not_supported

__all__ = ["probe_causes"]

_PORT_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def _port(path: str, port: int | str | None, names: set[str]) -> list[Cause]:
    if port is None:
        return [Cause(path, REQUIRED, "Required value")]
    if isinstance(port, int):
        return [] if 1 <= port <= 65535 else [_invalid(path, port, "must be between 1 and 65535, inclusive")]
    if not _PORT_NAME.match(port) or len(port) > 15:
        return [_invalid(path, port, "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")]
    if port not in names:
        return [_invalid(path, port, "must be the name of a port of the container (ports[].name)")]
    return []


def probe_causes(path: str, c: models.Container) -> list[Cause]:
    """Every probe of container ``c`` (at ``path``): one handler each, thresholds Kubernetes accepts."""
    names = {p.name for p in c.ports or () if p.name}
    causes: list[Cause] = []
    for field, attr in zip(PROBES, ("liveness_probe", "readiness_probe", "startup_probe")):
        probe: models.Probe | None = getattr(c, attr)
        if probe is None:
            continue
        p = f"{path}.{field}"
        handlers = [(h, getattr(probe, a)) for h, a in zip(HANDLERS, ("exec", "http_get", "tcp_socket", "grpc"))
                    if getattr(probe, a) is not None]
        if not handlers:
            causes.append(Cause(p, REQUIRED, "Required value: must specify a handler type"))
        elif len(handlers) > 1:
            causes.append(Cause(f"{p}.{handlers[1][0]}", FORBIDDEN, "Forbidden: may not specify more than 1 handler type"))
        for name, handler in handlers:
            if name == "exec" and not handler.command:
                causes.append(Cause(f"{p}.exec.command", REQUIRED, "Required value"))
            if name in ("httpGet", "tcpSocket", "grpc"):
                causes += _port(f"{p}.{name}.port", handler.port, names if name != "grpc" else set())
            if name == "httpGet" and handler.scheme not in (None, "HTTP", "HTTPS"):
                causes.append(_not_supported(f"{p}.httpGet.scheme", handler.scheme, ("HTTP", "HTTPS")))
        for key, least in (("initial_delay_seconds", 0), ("period_seconds", 1), ("timeout_seconds", 1),
                           ("success_threshold", 1), ("failure_threshold", 1)):
            value = getattr(probe, key)
            if value is not None and value < least:
                camel = key.split("_")[0] + "".join(w.title() for w in key.split("_")[1:])
                causes.append(_invalid(f"{p}.{camel}", value, f"must be greater than or equal to {least}"))
        if field != "readinessProbe" and probe.success_threshold not in (None, 1):
            causes.append(Cause(f"{p}.successThreshold", INVALID, f"Invalid value: {probe.success_threshold}: "
                                "must be 1"))
    return causes
