"""Scheduler configuration: profiles, plugins per extension point, weights and plugin arguments.

The file is modelled on Kubernetes' KubeSchedulerConfiguration::

    apiVersion: corral.dev/v1            # kubescheduler.config.k8s.io/v1 is accepted too
    kind: SchedulerConfiguration         # or KubeSchedulerConfiguration
    percentageOfNodesToScore: 100        # 0 = Kubernetes' adaptive formula
    tieBreak: random                     # or "name"
    seed: 0                              # for tieBreak: random (reproducible)
    extenders: []                        # webhooks, as kube-scheduler's (see corral.scheduler.extenders)
    profiles:
    - schedulerName: default-scheduler
      plugins:
        score:
          enabled:  [{name: NodeResourcesFit, weight: 2}]
          disabled: [{name: ImageLocality}]        # "*" disables every default at that point
      pluginConfig:
      - name: NodeResourcesFit
        args: {scoringStrategy: {type: MostAllocated}}

Every profile starts from the default plugins; ``enabled`` adds or re-weights, ``disabled``
removes. Errors name the path of the bad setting.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Callable

from corral.scheduler.framework.interface import Handle, Plugin
from corral.scheduler.framework.runtime import Framework
from corral.scheduler.plugins import DEFAULT_PLUGINS, REGISTRY

__all__ = ["SchedulerConfig", "Profile", "load_config", "parse_config", "build_frameworks", "ConfigError"]

_POINT_METHODS = {
    "queueSort": "sort_key", "preEnqueue": "pre_enqueue", "preFilter": "pre_filter", "filter": "filter",
    "postFilter": "post_filter", "preScore": "pre_score", "score": "score", "reserve": "reserve",
    "permit": "permit", "bind": "bind",
}


class ConfigError(ValueError):
    """A scheduler configuration that cannot be used; the message names the setting."""


@dataclass(slots=True)
class Profile:
    scheduler_name: str = "default-scheduler"
    plugins: dict[str, list[str]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    args: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(slots=True)
class SchedulerConfig:
    profiles: list[Profile]
    percentage_of_nodes_to_score: int = 100
    tie_break: str = "random"
    seed: int = 0
    extenders: list = field(default_factory=list)  # ExtenderConfig, in the order configured


def _default_profile(name: str = "default-scheduler") -> Profile:
    plugins: dict[str, list[str]] = {}
    weights: dict[str, int] = {}
    for point, entries in DEFAULT_PLUGINS.items():
        names = []
        for entry in entries:
            if isinstance(entry, tuple):
                names.append(entry[0])
                weights[entry[0]] = entry[1]
            else:
                names.append(entry)
        plugins[point] = names
    return Profile(name, plugins, weights)


def _entries(value: Any, path: str) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str) for e in value):
        raise ConfigError(f"{path}: must be a list of {{name: PLUGIN}} entries")
    return value


def _profile(doc: dict[str, Any], path: str) -> Profile:
    profile = _default_profile(doc.get("schedulerName") or "default-scheduler")
    plugins = doc.get("plugins") or {}
    if not isinstance(plugins, dict):
        raise ConfigError(f"{path}.plugins: must be a mapping of extension point → enabled/disabled")
    for point, spec in plugins.items():
        ppath = f"{path}.plugins.{point}"
        if point not in _POINT_METHODS:
            raise ConfigError(f"{ppath}: unknown extension point (known: {', '.join(_POINT_METHODS)})")
        spec = spec or {}
        current = profile.plugins.setdefault(point, [])
        for entry in _entries(spec.get("disabled"), f"{ppath}.disabled"):
            if entry["name"] == "*":
                current.clear()
            elif entry["name"] in current:
                current.remove(entry["name"])
        for i, entry in enumerate(_entries(spec.get("enabled"), f"{ppath}.enabled")):
            name = entry["name"]
            if name not in REGISTRY:
                raise ConfigError(f"{ppath}.enabled[{i}].name: unknown plugin {name!r} "
                                  f"(known: {', '.join(sorted(REGISTRY))})")
            if name not in current:
                current.append(name)
            if point == "score" and "weight" in entry:
                weight = entry["weight"]
                if not isinstance(weight, int) or weight < 0:
                    raise ConfigError(f"{ppath}.enabled[{i}].weight: must be a non-negative integer")
                profile.weights[name] = weight
    for i, entry in enumerate(_entries(doc.get("pluginConfig"), f"{path}.pluginConfig")):
        args = entry.get("args") or {}
        if not isinstance(args, dict):
            raise ConfigError(f"{path}.pluginConfig[{i}].args: must be a mapping")
        profile.args[entry["name"]] = args
    if len(profile.plugins.get("queueSort", [])) != 1:
        raise ConfigError(f"{path}.plugins.queueSort: exactly one QueueSort plugin must be enabled")
    return profile


def parse_config(doc: Any, source: str = "scheduler config") -> SchedulerConfig:
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: must be a mapping")
    kind = doc.get("kind", "SchedulerConfiguration")
    if kind not in ("SchedulerConfiguration", "KubeSchedulerConfiguration"):
        raise ConfigError(f"{source}: kind: expected SchedulerConfiguration, got {kind!r}")
    raw_profiles = doc.get("profiles") or [{}]
    if not isinstance(raw_profiles, list):
        raise ConfigError(f"{source}: profiles: must be a list")
    profiles = [_profile(p or {}, f"{source}: profiles[{i}]") for i, p in enumerate(raw_profiles)]
    names = [p.scheduler_name for p in profiles]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: profiles: schedulerName values must be unique, got {names}")
    pct = doc.get("percentageOfNodesToScore", 100)
    if not isinstance(pct, int) or not 0 <= pct <= 100:
        raise ConfigError(f"{source}: percentageOfNodesToScore: must be an integer from 0 to 100")
    tie = doc.get("tieBreak", "random")
    if tie not in ("random", "name"):
        raise ConfigError(f"{source}: tieBreak: must be 'random' or 'name'")
    seed = doc.get("seed", 0)
    if not isinstance(seed, int):
        raise ConfigError(f"{source}: seed: must be an integer")
    from corral.scheduler.extenders import ExtenderConfigError, parse_extenders

    try:
        extenders = parse_extenders(doc.get("extenders"), source)
    except ExtenderConfigError as exc:
        raise ConfigError(str(exc)) from None
    return SchedulerConfig(profiles, pct, tie, seed, extenders)


def load_config(path: str | None) -> SchedulerConfig:
    """The configuration in ``path``, or the defaults when ``path`` is None."""
    if path is None:
        return parse_config({})
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    return parse_config(doc, path)


def with_heartbeats(config: SchedulerConfig, node_heartbeat_seconds: float, max_node_heartbeats: float) -> SchedulerConfig:
    """``config`` with the server's heartbeat settings as NodeReady's defaults (its freshness grows as
    the server slows heartbeats), where the configuration does not set them. Returns ``config``."""
    for profile in config.profiles:
        node_ready = profile.args.setdefault("NodeReady", {})
        node_ready.setdefault("nodeHeartbeatSeconds", node_heartbeat_seconds)
        node_ready.setdefault("maxNodeHeartbeatsPerSecond", max_node_heartbeats)
    return config


def build_frameworks(config: SchedulerConfig, *, cache: Any, clock: Callable[[], float],
                     binder: Any = None) -> dict[str, Framework]:
    """One :class:`Framework` per profile, keyed by schedulerName."""
    out: dict[str, Framework] = {}
    for profile in config.profiles:
        instances: dict[str, Plugin] = {}

        def instance(name: str, point: str) -> Plugin:
            if name not in REGISTRY:
                raise ConfigError(f"profile {profile.scheduler_name}: unknown plugin {name!r}")
            plugin = instances.get(name)
            if plugin is None:
                handle = Handle(cache, clock, copy.deepcopy(profile.args.get(name, {})), binder)
                try:
                    plugin = instances[name] = REGISTRY[name](handle)
                except ValueError as exc:
                    raise ConfigError(f"profile {profile.scheduler_name}: {exc}") from None
            if not hasattr(plugin, _POINT_METHODS[point]):
                raise ConfigError(f"profile {profile.scheduler_name}: plugin {name} does not implement {point}")
            return plugin

        plugins = {point: [instance(n, point) for n in profile.plugins.get(point, ())] for point in _POINT_METHODS}
        fwk = out[profile.scheduler_name] = Framework(
            scheduler_name=profile.scheduler_name, plugins=plugins, weights=dict(profile.weights),
            percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
            tie_break=config.tie_break, seed=config.seed,
        )
        for plugin in instances.values():
            plugin.handle.framework = fwk
    return out
