"""Scheduler extenders: HTTP webhooks that filter and score the nodes the built-in filters passed,
and may bind, as kube-scheduler's ``extenders:`` configuration defines them.

:class:`Extenders` runs them for one pod: every interested extender gets the same feasible nodes
at once (concurrently, each with its own timeout); a node passes if every one of them passes it.
An extender's error fails the attempt — the pod goes back through backoff with the extender named
in its FailedScheduling event — unless it is ``ignorable``, when it is skipped and counted in
``corral_scheduler_extender_errors_total``. Scores: each extender's 0–10 × its weight × 10, added to
the plugins' weighted 0–100 scores, as kube-scheduler adds them. Preemption: the candidate nodes
DefaultPreemption found, each with its victims, go through every extender with a ``preemptVerb`` in
turn, each seeing what the one before kept; the scheduler then checks what is left (victims of
lower priority on that node, the pod fitting once they are gone) before it nominates anything.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from corral.scheduler.extenders.client import ExtenderClient, ExtenderError, Proposal
from corral.scheduler.extenders.config import ExtenderConfig, ExtenderConfigError, parse_extenders
from corral.scheduler.framework.podinfo import PodInfo

__all__ = ["Extenders", "ExtenderConfig", "ExtenderConfigError", "ExtenderError", "parse_extenders", "Proposal",
           "Verdict"]

log = logging.getLogger(__name__)


def _requests(pod: PodInfo) -> dict[str, int]:
    req = pod.requests
    return {"cpu": req.cpu, "memory": req.memory, "ephemeral-storage": req.ephemeral, **dict(req.extended)}


@dataclass(slots=True)
class Verdict:
    """What the extenders made of the feasible nodes: those every one passed, and for the others
    the extender, its reason and whether removing pods could help (``failedNodes``) or not."""

    passed: set[str]
    rejected: dict[str, tuple[str, str, bool]] = field(default_factory=dict)  # node → (extender, reason, unresolvable)


class Extenders:
    def __init__(self, configs: list[ExtenderConfig], errors: Any = None) -> None:
        self.clients = [ExtenderClient(c) for c in configs]
        self._errors = errors  # a prometheus Counter labelled (extender, ignorable), or None

    def __bool__(self) -> bool:
        return bool(self.clients)

    def ignored_resources(self) -> frozenset[str]:
        """Resources an extender manages that the scheduler's own fit check leaves to it."""
        return frozenset(name for c in self.clients for name, ignored in c.config.managed_resources if ignored)

    def interested(self, pod: PodInfo, verb: str) -> list[ExtenderClient]:
        requests = _requests(pod)
        return [c for c in self.clients if getattr(c.config, verb) and c.config.interested_in(requests)]

    def binder_for(self, pod: PodInfo) -> ExtenderClient | None:
        found = self.interested(pod, "bind_verb")
        return found[0] if found else None

    def wants(self, pod: PodInfo) -> bool:
        """Whether any extender filters, scores or takes part in preempting for ``pod``."""
        return bool(self.interested(pod, "filter_verb") or self.interested(pod, "prioritize_verb")
                    or self.interested(pod, "preempt_verb"))

    async def _ask(self, clients: list[ExtenderClient], call) -> list[tuple[ExtenderClient, Any]]:
        """``call`` on every client at once; the answers of those that did not fail. An ignorable
        extender's failure is counted and skipped; any other raises."""
        answers = await asyncio.gather(*(call(c) for c in clients), return_exceptions=True)
        out = []
        for client, answer in zip(clients, answers):
            if isinstance(answer, ExtenderError):
                if self._failed(answer):
                    raise answer
                continue
            if isinstance(answer, BaseException):
                raise answer
            out.append((client, answer))
        return out

    def _failed(self, exc: ExtenderError) -> bool:
        """Count an extender's error; True if the attempt must fail (the extender is not ignorable)."""
        if self._errors is not None:
            self._errors.labels(exc.extender.name, str(exc.extender.ignorable).lower()).inc()
        if exc.extender.ignorable:
            log.info("%s (ignorable: skipped)", exc)
            return False
        return True

    async def filter(self, pod: PodInfo, nodes: list[tuple[str, dict[str, Any]]]) -> Verdict:
        """Raises :class:`ExtenderError` when a non-ignorable extender fails."""
        verdict = Verdict({name for name, _ in nodes})
        clients = self.interested(pod, "filter_verb")
        if not clients or not nodes:
            return verdict
        for client, answer in await self._ask(clients, lambda c: c.filter(pod.obj, nodes)):
            for name in list(verdict.passed):
                if name in answer.passed:
                    continue
                verdict.passed.discard(name)
                if name in answer.unresolvable:
                    verdict.rejected[name] = (client.config.name, answer.unresolvable[name], True)
                else:
                    reason = answer.failed.get(name) or "node(s) were rejected by the extender"
                    verdict.rejected[name] = (client.config.name, reason, False)
        return verdict

    async def prioritize(self, pod: PodInfo, nodes: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, float]]:
        """Per extender (by name), node → its weighted score on the plugins' scale."""
        clients = self.interested(pod, "prioritize_verb")
        if not clients or len(nodes) < 2:
            return {}
        out: dict[str, dict[str, float]] = {}
        for client, answer in await self._ask(clients, lambda c: c.prioritize(pod.obj, nodes)):
            scale = client.config.weight * 10.0  # MaxNodeScore / MaxExtenderPriority
            out[client.config.name] = {host: score * scale for host, score in answer.items()}
        return out

    async def process_preemption(self, pod: PodInfo, proposals: dict[str, Proposal]
                                 ) -> tuple[dict[str, Proposal], dict[str, str]]:
        """The candidates every interested extender with a ``preemptVerb`` kept (each one asked about
        what the ones before it kept), and for each node dropped, the extender that dropped it.
        Raises :class:`ExtenderError` when a non-ignorable extender fails."""
        dropped: dict[str, str] = {}
        for client in self.interested(pod, "preempt_verb"):
            if not proposals:
                break
            try:
                kept = await client.process_preemption(pod.obj, proposals)
            except ExtenderError as exc:
                if self._failed(exc):
                    raise
                continue
            for node in proposals.keys() - kept.keys():
                dropped[node] = client.config.name
            proposals = kept
        return proposals, dropped

    async def close(self) -> None:
        for client in self.clients:
            await client.close()
