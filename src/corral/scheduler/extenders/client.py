"""Calls to one scheduler extender, in kube-scheduler's JSON wire format.

- filter: POST ``ExtenderArgs`` ``{"pod": POD, "nodenames": [...]}`` (``nodeCacheCapable``) or
  ``{"pod": POD, "nodes": {"items": [NODE, ...]}}``; the answer is an ``ExtenderFilterResult``:
  ``nodenames`` / ``nodes`` that pass, ``failedNodes`` and ``failedAndUnresolvableNodes`` (node →
  reason), ``error``.
- prioritize: the same arguments; the answer is a ``HostPriorityList``, ``[{"host": N, "score": 0..10}]``.
- bind: ``ExtenderBindingArgs`` ``{"podName", "podNamespace", "podUID", "node"}`` → ``{"error"}``.
- preempt: ``ExtenderPreemptionArgs`` ``{"pod": POD, "nodeNameToMetaVictims": {NODE: {"pods": [{"uid"}],
  "numPDBViolations": N}}}`` (``nodeCacheCapable``) or ``"nodeNameToVictims"`` with whole pods; the
  answer is an ``ExtenderPreemptionResult``, ``{"nodeNameToMetaVictims": {...}}``: the nodes it keeps,
  each with the victims it wants gone. Go's JSON decoding ignores case, so extenders written against
  kube-scheduler's untagged Go types answer ``NodeNameToMetaVictims``, ``Pods``, ``UID``: read either way.

Every call has the extender's ``httpTimeout``; any failure (connection, status, timeout, malformed
answer, ``error`` set) raises :class:`ExtenderError` naming the extender. One aiohttp session per
extender, with its TLS settings, kept for the scheduler's life.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from typing import Any

import msgspec

from corral.scheduler.extenders.config import ExtenderConfig

__all__ = ["ExtenderClient", "ExtenderError", "FilterResult", "MAX_EXTENDER_PRIORITY", "Proposal"]

MAX_EXTENDER_PRIORITY = 10  # kube-scheduler's: an extender scores 0..10, scaled to 0..100
_MAX_ANSWER = 16 << 20  # bytes: an answer is read no further


class ExtenderError(Exception):
    def __init__(self, extender: ExtenderConfig, message: str) -> None:
        self.extender = extender
        super().__init__(f"extender {extender.name} failed: {message}")


@dataclass(slots=True)
class FilterResult:
    passed: set[str]
    failed: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Proposal:
    """Preemption's victims on one node, as sent to an extender or as it answered."""

    uids: tuple[str, ...]
    violations: int = 0  # numPDBViolations
    pods: tuple[dict[str, Any], ...] = ()  # the victims' objects, for extenders that are not nodeCacheCapable


def _field(doc: Any, name: str) -> Any:
    """``doc[name]`` whatever its case, as Go's JSON decoder reads it (None if absent)."""
    if not isinstance(doc, dict):
        return None
    if name in doc:
        return doc[name]
    lowered = name.lower()
    return next((v for k, v in doc.items() if isinstance(k, str) and k.lower() == lowered), None)


def _ssl_context(config: ExtenderConfig) -> ssl.SSLContext | bool:
    tls = config.tls
    if tls is None:
        return False  # plain http
    ctx = ssl.create_default_context(cadata=tls.ca.decode() if tls.ca else None)
    if tls.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.cert:
        from corral.pki.kubeconfig import load_cert_pair

        load_cert_pair(ctx, tls.cert, tls.key)
    return ctx


class ExtenderClient:
    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        self._session = None

    def _http(self):
        import aiohttp

        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=_ssl_context(self.config)),
                                                  timeout=aiohttp.ClientTimeout(total=self.config.timeout))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def _post(self, verb: str, body: dict[str, Any]) -> Any:
        import aiohttp

        url = f"{self.config.url_prefix}/{verb}"
        kwargs: dict[str, Any] = {}
        if self.config.tls is not None and self.config.tls.server_name:
            kwargs["server_hostname"] = self.config.tls.server_name
        try:
            async with self._http().post(url, data=msgspec.json.encode(body),
                                         headers={"Content-Type": "application/json"}, **kwargs) as resp:
                payload = await resp.content.read(_MAX_ANSWER + 1)
                if resp.status != 200:
                    raise ExtenderError(self.config, f"{verb}: HTTP {resp.status}: {payload[:200].decode(errors='replace')}")
        except asyncio.TimeoutError:
            raise ExtenderError(self.config, f"{verb}: no answer within {self.config.timeout:g}s") from None
        except aiohttp.ClientError as exc:
            raise ExtenderError(self.config, f"{verb}: {exc}") from None
        if len(payload) > _MAX_ANSWER:
            raise ExtenderError(self.config, f"{verb}: answer larger than {_MAX_ANSWER} bytes")
        try:
            return msgspec.json.decode(payload)
        except msgspec.DecodeError as exc:
            raise ExtenderError(self.config, f"{verb}: answer is not JSON: {exc}") from None

    def _args(self, pod: dict[str, Any], nodes: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
        if self.config.node_cache_capable:
            return {"pod": pod, "nodenames": [name for name, _ in nodes]}
        return {"pod": pod, "nodes": {"apiVersion": "v1", "kind": "NodeList", "items": [obj for _, obj in nodes]}}

    async def filter(self, pod: dict[str, Any], nodes: list[tuple[str, dict[str, Any]]]) -> FilterResult:
        answer = await self._post(self.config.filter_verb, self._args(pod, nodes))
        if not isinstance(answer, dict):
            raise ExtenderError(self.config, "filter: answer is not an ExtenderFilterResult")
        if answer.get("error"):
            raise ExtenderError(self.config, f"filter: {answer['error']}")
        names = answer.get("nodenames")
        if names is None and isinstance(answer.get("nodes"), dict):
            names = [((n.get("metadata") or {}).get("name")) for n in answer["nodes"].get("items") or ()]
        asked = {name for name, _ in nodes}
        passed = {n for n in names or () if isinstance(n, str)}  # only asked nodes are looked up in it

        def reasons(key: str) -> dict[str, str]:
            value = answer.get(key) or {}
            return {str(k): str(v) for k, v in value.items() if k in asked} if isinstance(value, dict) else {}

        return FilterResult(passed, reasons("failedNodes"), reasons("failedAndUnresolvableNodes"))

    async def prioritize(self, pod: dict[str, Any], nodes: list[tuple[str, dict[str, Any]]]) -> dict[str, int]:
        answer = await self._post(self.config.prioritize_verb, self._args(pod, nodes))
        if not isinstance(answer, list):
            raise ExtenderError(self.config, "prioritize: answer is not a HostPriorityList")
        scores: dict[str, int] = {}
        for entry in answer:
            if isinstance(entry, dict) and isinstance(entry.get("host"), str) and isinstance(entry.get("score"), int):
                # kube-scheduler's range; beyond it, one extender could outweigh every plugin together
                scores[entry["host"]] = max(0, min(int(entry["score"]), MAX_EXTENDER_PRIORITY))
        return scores

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        answer = await self._post(self.config.bind_verb, {"podName": name, "podNamespace": namespace,
                                                          "podUID": uid, "node": node})
        if isinstance(answer, dict) and answer.get("error"):
            raise ExtenderError(self.config, f"bind: {answer['error']}")

    async def process_preemption(self, pod: dict[str, Any], proposals: dict[str, Proposal]) -> dict[str, Proposal]:
        """The nodes this extender keeps among ``proposals``, each with the victims it names (only
        nodes that were proposed are read from the answer)."""
        def victims(p: Proposal) -> dict[str, Any]:
            if self.config.node_cache_capable:
                return {"pods": [{"uid": uid} for uid in p.uids], "numPDBViolations": p.violations}
            return {"pods": list(p.pods), "numPDBViolations": p.violations}

        key = "nodeNameToMetaVictims" if self.config.node_cache_capable else "nodeNameToVictims"
        answer = await self._post(self.config.preempt_verb,
                                  {"pod": pod, key: {node: victims(p) for node, p in proposals.items()}})
        kept = _field(answer, "nodeNameToMetaVictims")
        if not isinstance(answer, dict) or not isinstance(kept, dict | None):
            raise ExtenderError(self.config, "preempt: answer is not an ExtenderPreemptionResult")
        if _field(answer, "error"):
            raise ExtenderError(self.config, f"preempt: {_field(answer, 'error')}")
        out: dict[str, Proposal] = {}
        for node, meta in (kept or {}).items():
            if node not in proposals:
                continue
            pods = _field(meta, "pods") or []
            uids = tuple(str(_field(p, "uid")) for p in pods if isinstance(p, dict)) if isinstance(pods, list) else ()
            count = _field(meta, "numPDBViolations")
            out[node] = Proposal(uids, count if isinstance(count, int) and not isinstance(count, bool) else 0)
        return out
