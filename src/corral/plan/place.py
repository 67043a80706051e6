"""The scheduler's half of a plan: the copy of its state, the what-ifs and the decisions, given pods
already expanded and admitted (:mod:`.expand`). The server's handler calls it beside the scheduler
it runs; a scheduler in a process of its own (``corral server --scheduler-process``) is asked for it
with the pods as plain data (:func:`place_asked`), since the state it copies lives there."""

from __future__ import annotations

from typing import Any, Iterable

from corral.plan.dry_run import NodeSpec, Snapshot, apply_what_ifs, fingerprint, run, snapshot, zone_usage
from corral.plan.expand import PlannedPod, PlanInputError
from corral.scheduler.profiles import ConfigError, SchedulerConfig, parse_config
from corral.scheduler.scheduler import node_signature

__all__ = ["PlanInvalid", "asked", "checked_config", "configured", "copy_of", "place", "place_asked", "version_of"]

Obj = dict[str, Any]


class PlanInvalid(ValueError):
    """What of a plan request cannot be used: ``field`` (its path in the request) and why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def checked_config(scheduler_config: Obj) -> SchedulerConfig:
    """The configuration a plan request gives to try."""
    try:
        return parse_config(scheduler_config, "schedulerConfig")
    except ConfigError as exc:
        raise PlanInvalid("schedulerConfig", str(exc)) from None


def configured(scheduler: Any, scheduler_config: Obj | None) -> tuple[SchedulerConfig, bool]:
    """The configuration to decide with, and whether it is the running scheduler's."""
    if scheduler_config is None:
        return scheduler.config, True
    return checked_config(scheduler_config), False


def copy_of(scheduler: Any, config: SchedulerConfig, same: bool, revision: int) -> Snapshot:
    """The scheduler's state at this instant, with frameworks of ``config`` over it."""
    try:
        return snapshot(scheduler.cache, scheduler.frameworks, config, revision,
                        ignored_resources=scheduler.extenders.ignored_resources(), same_config=same)
    except ConfigError as exc:
        raise PlanInvalid("schedulerConfig", str(exc)) from None


def version_of(scheduler: Any) -> str:
    return fingerprint(scheduler.cache, node_signature)


async def place(scheduler: Any, snap: Snapshot, same: bool, version: str, revision: int, pods: list[PlannedPod], *,
                without: Iterable[str] = (), add: Iterable[NodeSpec] = ()) -> Obj:
    """The plan of ``pods`` on ``snap`` after the what-ifs, as the JSON-ready report (without the
    expansion's notes, which the caller puts first)."""
    before = zone_usage(snap.cache)
    try:
        displaced = apply_what_ifs(snap, without=without, add=add)
    except PlanInputError as exc:
        raise PlanInvalid(exc.path, exc.message) from None
    except KeyError as exc:
        raise PlanInvalid("withoutNodes", f"no node {exc.args[0]!r} in the cluster") from None
    report = await run(snap, pods, displaced=displaced, extenders=scheduler.extenders if same else None, before=before)
    report = {"kind": "Plan", "apiVersion": "corral.dev/v1", "resourceVersion": str(revision),
              "planVersion": version, **report}
    if not same:
        report["notes"].append("decided with the given scheduler configuration: another tie-break sequence "
                               "than the running scheduler's")
    if scheduler.extenders:
        report["notes"].append("scheduler extenders were asked to filter and score" if same else
                               "scheduler extenders were not asked (another configuration was given)")
    return report


def asked(revision: int, pods: list[PlannedPod], without: list[str], add: list[NodeSpec],
          scheduler_config: Obj | None) -> list:
    """A plan's question for a scheduler process, as plain data (the channel's msgpack)."""
    return [revision, [[p.pod, p.source, p.placement] for p in pods], list(without),
            [[a.count, a.cpu, a.memory, a.pods, [list(kv) for kv in a.labels]] for a in add], scheduler_config]


async def place_asked(scheduler: Any, question: list) -> list:
    """In the scheduler process: the answer to :func:`asked`, ``["plan", report]`` or, for input
    the plan cannot use, ``["invalid", field, message]``."""
    revision, pods, without, add, scheduler_config = question
    try:
        config, same = configured(scheduler, scheduler_config)
        snap = copy_of(scheduler, config, same, revision)
        version = version_of(scheduler)
        report = await place(scheduler, snap, same, version, revision,
                             [PlannedPod(pod, source, placement) for pod, source, placement in pods], without=without,
                             add=[NodeSpec(count, cpu, memory, max_pods, tuple(tuple(kv) for kv in labels))
                                  for count, cpu, memory, max_pods, labels in add])
    except PlanInvalid as exc:
        return ["invalid", exc.field, exc.message]
    return ["plan", report]
