"""The scheduler configuration file: what each setting does to the profiles, and for each mistake
an error that names the setting (the server refuses to start with it)."""

from __future__ import annotations

import pytest

from corral.scheduler.plugins import DEFAULT_PLUGINS, REGISTRY, register
from corral.scheduler.profiles import ConfigError, Profile, SchedulerConfig, build_frameworks, load_config, parse_config
from corral.scheduler.cache.cache import Cache
from corral.scheduler.framework.interface import Plugin

DEFAULT_SCORES = [e[0] if isinstance(e, tuple) else e for e in DEFAULT_PLUGINS["score"]]
DEFAULT_WEIGHTS = {e[0]: e[1] for e in DEFAULT_PLUGINS["score"] if isinstance(e, tuple)}
KNOWN = ", ".join(sorted(REGISTRY))
POINTS = "queueSort, preEnqueue, preFilter, filter, postFilter, preScore, score, reserve, permit, bind"


def test_no_file_and_an_empty_file_mean_the_default_profile(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    for config in (load_config(None), load_config(str(empty)), parse_config(None), parse_config({})):
        assert (config.percentage_of_nodes_to_score, config.tie_break, config.seed) == (100, "random", 0)
        (profile,) = config.profiles
        assert profile.scheduler_name == "default-scheduler"
        assert profile.plugins == {p: [e[0] if isinstance(e, tuple) else e for e in entries]
                                   for p, entries in DEFAULT_PLUGINS.items()}
        assert profile.weights == DEFAULT_WEIGHTS and profile.args == {}


def test_a_file_sets_profiles_plugins_weights_and_arguments(tmp_path):
    path = tmp_path / "sched.yaml"
    path.write_text("""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 0
tieBreak: name
seed: 9
profiles:
- schedulerName: packer
  plugins:
    score:
      disabled: [{name: ImageLocality}]
      enabled: [{name: NodeResourcesFit, weight: 5}, {name: NetworkThroughput}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
- schedulerName: nothing-scored
  plugins:
    score: {disabled: [{name: "*"}]}
""")
    config = load_config(str(path))
    assert (config.percentage_of_nodes_to_score, config.tie_break, config.seed) == (0, "name", 9)
    packer, bare = config.profiles
    assert packer.scheduler_name == "packer"
    assert packer.plugins["score"] == [n for n in DEFAULT_SCORES if n != "ImageLocality"] + (
        [] if "NetworkThroughput" in DEFAULT_SCORES else ["NetworkThroughput"])
    assert packer.weights["NodeResourcesFit"] == 5
    assert packer.args == {"NodeResourcesFit": {"scoringStrategy": {"type": "MostAllocated"}}}
    assert bare.plugins["score"] == [] and bare.plugins["filter"] == packer.plugins["filter"]
    frameworks = build_frameworks(config, cache=Cache(), clock=lambda: 0.0)
    assert set(frameworks) == {"packer", "nothing-scored"}
    fwk = frameworks["packer"]
    assert (fwk.scheduler_name, fwk.percentage, fwk.tie_break, fwk.weights["NodeResourcesFit"]) == (
        "packer", 0, "name", 5)
    fit = next(p for p in fwk.scorers if p.NAME == "NodeResourcesFit")
    assert fit.handle.args == {"scoringStrategy": {"type": "MostAllocated"}}
    assert fit is next(p for p in fwk.filters if p.NAME == "NodeResourcesFit")  # one instance per profile
    assert frameworks["nothing-scored"].scorers == []


@pytest.mark.parametrize("doc, message", [
    ([1], "scheduler config: must be a mapping"),
    ({"kind": "Deployment"}, "scheduler config: kind: expected SchedulerConfiguration, got 'Deployment'"),
    ({"profiles": {"a": 1}}, "scheduler config: profiles: must be a list"),
    ({"profiles": [{}, {"schedulerName": "default-scheduler"}]},
     "scheduler config: profiles: schedulerName values must be unique, got ['default-scheduler', 'default-scheduler']"),
    ({"percentageOfNodesToScore": 101}, "scheduler config: percentageOfNodesToScore: must be an integer from 0 to 100"),
    ({"percentageOfNodesToScore": -1}, "scheduler config: percentageOfNodesToScore: must be an integer from 0 to 100"),
    ({"percentageOfNodesToScore": "50"},
     "scheduler config: percentageOfNodesToScore: must be an integer from 0 to 100"),
    ({"tieBreak": "coin"}, "scheduler config: tieBreak: must be 'random' or 'name'"),
    ({"seed": "x"}, "scheduler config: seed: must be an integer"),
    ({"profiles": [{"plugins": ["score"]}]},
     "scheduler config: profiles[0].plugins: must be a mapping of extension point → enabled/disabled"),
    ({"profiles": [{"plugins": {"scoring": {}}}]},
     f"scheduler config: profiles[0].plugins.scoring: unknown extension point (known: {POINTS})"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "Nope"}]}}}]},
     f"scheduler config: profiles[0].plugins.score.enabled[0].name: unknown plugin 'Nope' (known: {KNOWN})"),
    ({"profiles": [{"plugins": {"score": {"enabled": {"name": "ImageLocality"}}}}]},
     "scheduler config: profiles[0].plugins.score.enabled: must be a list of {name: PLUGIN} entries"),
    ({"profiles": [{"plugins": {"score": {"disabled": [{"nam": "ImageLocality"}]}}}]},
     "scheduler config: profiles[0].plugins.score.disabled: must be a list of {name: PLUGIN} entries"),
    ({"profiles": [{"plugins": {"score": {"disabled": ["ImageLocality"]}}}]},
     "scheduler config: profiles[0].plugins.score.disabled: must be a list of {name: PLUGIN} entries"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": -1}]}}}]},
     "scheduler config: profiles[0].plugins.score.enabled[0].weight: must be a non-negative integer"),
    ({"profiles": [{}, {"schedulerName": "b", "plugins": {"score": {"enabled": [
        {"name": "ImageLocality", "weight": 1.5}]}}}]},
     "scheduler config: profiles[1].plugins.score.enabled[0].weight: must be a non-negative integer"),
    ({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": [1]}]}]},
     "scheduler config: profiles[0].pluginConfig[0].args: must be a mapping"),
    ({"profiles": [{"pluginConfig": "NodeResourcesFit"}]},
     "scheduler config: profiles[0].pluginConfig: must be a list of {name: PLUGIN} entries"),
    ({"profiles": [{"plugins": {"queueSort": {"disabled": [{"name": "*"}]}}}]},
     "scheduler config: profiles[0].plugins.queueSort: exactly one QueueSort plugin must be enabled"),
])
def test_each_mistake_is_refused_with_the_setting_named(doc, message):
    with pytest.raises(ConfigError) as err:
        parse_config(doc)
    assert str(err.value) == message


def test_a_weight_outside_score_is_ignored_and_disabling_what_is_not_enabled_is_harmless():
    config = parse_config({"profiles": [{"plugins": {
        "filter": {"enabled": [{"name": "NodeName", "weight": 7}], "disabled": [{"name": "ImageLocality"}]}}}]})
    (profile,) = config.profiles
    assert "NodeName" not in profile.weights or profile.weights["NodeName"] == DEFAULT_WEIGHTS.get("NodeName")
    assert profile.plugins["filter"] == [e[0] if isinstance(e, tuple) else e for e in DEFAULT_PLUGINS["filter"]] + (
        [] if "NodeName" in DEFAULT_PLUGINS["filter"] else ["NodeName"])


def test_files_that_cannot_be_read_or_parsed_are_named(tmp_path):
    with pytest.raises(ConfigError, match=r"^.*missing\.yaml: cannot read: No such file or directory$"):
        load_config(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: [unclosed")
    with pytest.raises(ConfigError, match=r"bad\.yaml: not valid YAML: "):
        load_config(str(bad))
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("tieBreak: coin\n")
    with pytest.raises(ConfigError) as err:
        load_config(str(wrong))
    assert str(err.value) == f"{wrong}: tieBreak: must be 'random' or 'name'"


def test_a_file_is_read_as_utf_8_whatever_the_locale(tmp_path):
    """A config written in UTF-8 (a comment in French) reads the same under a locale whose encoding
    is ASCII (the C locale, as a process gets with Python's UTF-8 mode and locale coercion off)."""
    import locale

    path = tmp_path / "sched.yaml"
    path.write_text("# réglages du planificateur\ntieBreak: name\n", encoding="utf-8")
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert locale.getencoding() == "ANSI_X3.4-1968"  # ASCII: what open() would decode with
        assert load_config(str(path)).tie_break == "name"
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


class ScoreOnly(Plugin):
    NAME = "ScoreOnly"

    def score(self, state, pod, rows):
        raise NotImplementedError


class PickyArgs(Plugin):
    NAME = "PickyArgs"

    def __init__(self, handle):
        super().__init__(handle)
        if handle.args.get("mode") not in (None, "fast"):
            raise ValueError(f"PickyArgs: mode must be 'fast', got {handle.args['mode']!r}")
        handle.args["touched"] = True  # a plugin may change its own copy of its arguments

    def score(self, state, pod, rows):
        raise NotImplementedError


def test_building_the_profiles_checks_each_plugin_implements_its_points_and_accepts_its_arguments():
    register(ScoreOnly)
    register(PickyArgs)
    try:
        config = parse_config({"profiles": [{"schedulerName": "x", "plugins": {
            "filter": {"enabled": [{"name": "ScoreOnly"}]}}}]})
        with pytest.raises(ConfigError) as err:
            build_frameworks(config, cache=Cache(), clock=lambda: 0.0)
        assert str(err.value) == "profile x: plugin ScoreOnly does not implement filter"
        bad_args = parse_config({"profiles": [{"schedulerName": "y", "plugins": {
            "score": {"enabled": [{"name": "PickyArgs"}]}}, "pluginConfig": [{"name": "PickyArgs",
                                                                              "args": {"mode": "slow"}}]}]})
        with pytest.raises(ConfigError) as err:
            build_frameworks(bad_args, cache=Cache(), clock=lambda: 0.0)
        assert str(err.value) == "profile y: PickyArgs: mode must be 'fast', got 'slow'"
        good = parse_config({"profiles": [{"plugins": {"score": {"enabled": [{"name": "PickyArgs"}]}},
                                           "pluginConfig": [{"name": "PickyArgs", "args": {"mode": "fast"}}]}]})
        build_frameworks(good, cache=Cache(), clock=lambda: 0.0)
        assert good.profiles[0].args["PickyArgs"] == {"mode": "fast"}  # the configuration is not changed
    finally:
        REGISTRY.pop("ScoreOnly")
        REGISTRY.pop("PickyArgs")
    unknown = SchedulerConfig([Profile("z", {"score": ["Vanished"]}, {}, {})])
    with pytest.raises(ConfigError) as err:
        build_frameworks(unknown, cache=Cache(), clock=lambda: 0.0)
    assert str(err.value) == "profile z: unknown plugin 'Vanished'"
