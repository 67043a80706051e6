"""Scheduler extenders as KubeSchedulerConfiguration spells them (a top-level ``extenders:`` list).

::

    extenders:
    - urlPrefix: https://127.0.0.1:8888/scheduler
      filterVerb: filter            # POST {urlPrefix}/filter
      prioritizeVerb: prioritize
      bindVerb: ""                  # set: the extender binds the pods it is interested in
      preemptVerb: preempt          # set: it may narrow preemption's candidate nodes and victims
      weight: 2                     # its 0–10 scores × weight × 10, added to the 0–100 plugin scores
      nodeCacheCapable: true        # send node names only (false: the Node objects)
      ignorable: false              # true: an error or timeout skips it instead of failing the attempt
      httpTimeout: 5s
      enableHTTPS: true
      tlsConfig: {caFile: ca.pem, certFile: client.pem, keyFile: client-key.pem, serverName: ext}
      managedResources: [{name: example.com/gpu, ignoredByScheduler: true}]

The URL comes from the operator's configuration file, never from a client; errors name the setting.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ExtenderConfig", "TLSConfig", "parse_extenders", "parse_duration"]

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_KEYS = {"urlPrefix", "filterVerb", "prioritizeVerb", "bindVerb", "preemptVerb", "weight", "nodeCacheCapable",
         "ignorable", "httpTimeout", "enableHTTPS", "tlsConfig", "managedResources"}
_TLS_KEYS = {"insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData"}


class ExtenderConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TLSConfig:
    insecure: bool = False
    server_name: str = ""
    cert: bytes = b""  # PEM, from certData or certFile
    key: bytes = b""
    ca: bytes = b""


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    url_prefix: str
    filter_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    preempt_verb: str = ""
    weight: int = 1
    node_cache_capable: bool = False
    ignorable: bool = False
    timeout: float = 30.0
    tls: TLSConfig | None = None
    managed_resources: tuple[tuple[str, bool], ...] = ()  # (name, ignoredByScheduler)
    name: str = field(default="", compare=False)  # how events and metrics name it: its URL prefix

    def interested_in(self, requests: dict[str, int]) -> bool:
        """Kubernetes' IsInterested: every pod when it manages no resources, else only pods that
        ask for one of them (``requests``: resource name → amount)."""
        if not self.managed_resources:
            return True
        return any(requests.get(name, 0) > 0 for name, _ in self.managed_resources)


def parse_duration(value: Any, path: str) -> float:
    """``"5s"``, ``"500ms"``, ``"1m"`` (Go's duration as metav1.Duration writes it), or seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    m = _DURATION.match(str(value)) if isinstance(value, str) else None
    if not m or float(m.group(1)) <= 0:
        raise ExtenderConfigError(f"{path}: must be a positive duration such as 5s or 500ms, not {value!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def _pem(doc: dict[str, Any], data_key: str, file_key: str, path: str) -> bytes:
    if doc.get(data_key):
        try:
            return base64.b64decode(doc[data_key], validate=True)
        except ValueError:
            raise ExtenderConfigError(f"{path}.{data_key}: not valid base64") from None
    if doc.get(file_key):
        try:
            with open(doc[file_key], "rb") as f:
                return f.read()
        except OSError as exc:
            raise ExtenderConfigError(f"{path}.{file_key}: cannot read {doc[file_key]}: {exc.strerror}") from None
    return b""


def _tls(doc: Any, path: str) -> TLSConfig:
    if doc is None:
        return TLSConfig()
    if not isinstance(doc, dict):
        raise ExtenderConfigError(f"{path}: must be a mapping")
    unknown = sorted(set(doc) - _TLS_KEYS)
    if unknown:
        raise ExtenderConfigError(f"{path}: unknown field {unknown[0]!r} (known: {', '.join(sorted(_TLS_KEYS))})")
    tls = TLSConfig(bool(doc.get("insecure", False)), str(doc.get("serverName") or ""),
                    _pem(doc, "certData", "certFile", path), _pem(doc, "keyData", "keyFile", path),
                    _pem(doc, "caData", "caFile", path))
    if bool(tls.cert) != bool(tls.key):
        raise ExtenderConfigError(f"{path}: a client certificate needs both its certificate and its key")
    return tls


def _one(doc: Any, path: str) -> ExtenderConfig:
    if not isinstance(doc, dict):
        raise ExtenderConfigError(f"{path}: must be a mapping")
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise ExtenderConfigError(f"{path}: unknown field {unknown[0]!r} (known: {', '.join(sorted(_KEYS))})")
    url = doc.get("urlPrefix")
    if not isinstance(url, str) or not re.match(r"^https?://[^/\s]+", url):
        raise ExtenderConfigError(f"{path}.urlPrefix: must be an http:// or https:// URL, not {url!r}")
    verbs = {}
    for key in ("filterVerb", "prioritizeVerb", "bindVerb", "preemptVerb"):
        verb = doc.get(key) or ""
        segments = verb.split("/") if isinstance(verb, str) else []
        if not isinstance(verb, str) or (verb and (not re.fullmatch(r"[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*", verb)
                                                   or any(seg in (".", "..") for seg in segments))):
            raise ExtenderConfigError(f"{path}.{key}: must be a path segment such as 'filter', not {verb!r}")
        verbs[key] = verb
    weight = doc.get("weight", 1)
    if verbs["prioritizeVerb"] and (not isinstance(weight, int) or isinstance(weight, bool) or weight <= 0):
        raise ExtenderConfigError(f"{path}.weight: must be a positive integer when prioritizeVerb is set")
    https = bool(doc.get("enableHTTPS", url.startswith("https://")))
    if https != url.startswith("https://"):
        raise ExtenderConfigError(f"{path}.enableHTTPS: {https} does not match urlPrefix {url}")
    managed = []
    for i, entry in enumerate(doc.get("managedResources") or ()):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise ExtenderConfigError(f"{path}.managedResources[{i}]: needs a name")
        managed.append((entry["name"], bool(entry.get("ignoredByScheduler", False))))
    return ExtenderConfig(
        url_prefix=url.rstrip("/"), filter_verb=verbs["filterVerb"], prioritize_verb=verbs["prioritizeVerb"],
        bind_verb=verbs["bindVerb"], preempt_verb=verbs["preemptVerb"],
        weight=int(weight) if isinstance(weight, int) else 1,
        node_cache_capable=bool(doc.get("nodeCacheCapable", False)), ignorable=bool(doc.get("ignorable", False)),
        timeout=parse_duration(doc.get("httpTimeout", "30s"), f"{path}.httpTimeout"),
        tls=_tls(doc.get("tlsConfig"), f"{path}.tlsConfig") if https else None,
        managed_resources=tuple(managed), name=url.rstrip("/"))


def parse_extenders(value: Any, source: str) -> list[ExtenderConfig]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ExtenderConfigError(f"{source}: extenders: must be a list")
    out = [_one(doc, f"{source}: extenders[{i}]") for i, doc in enumerate(value)]
    if sum(1 for e in out if e.bind_verb) > 1:
        raise ExtenderConfigError(f"{source}: extenders: only one extender may set bindVerb")
    return out
