"""The framework's own rules, with small custom plugins: a PreFilter that rejects or skips, score
weights (0 turns a plugin off), PreScore skips, sampling that rotates through the node order,
tie-breaking, and what a node-by-node plugin sees of a node."""

from __future__ import annotations

import numpy as np
import pytest

from corral.scheduler.cache.cache import Cache
from corral.scheduler.framework.interface import CycleState, NodeFilterAdapter, Plugin, count_rows
from corral.scheduler.framework.podinfo import PodInfo
from corral.scheduler.framework.status import SKIP, SUCCESS, Code, Status
from corral.scheduler.plugins import REGISTRY, register
from corral.scheduler.profiles import build_frameworks, parse_config
from corral.scheduler.schedule_one import FitError, explain, schedule_pod
from corral.testing.builders import make_node, make_pod

SEEN: list = []


class Policy(Plugin):
    """PreFilter: refuses pods labelled refuse=yes, skips its filter for skip=yes; Filter: refuses n1."""

    NAME = "Policy"

    def pre_filter(self, state, pod) -> Status:
        if pod.labels.get("refuse") == "yes":
            return Status.unschedulable("pod refused by policy", "and by the rules")
        return SKIP if pod.labels.get("skip") == "yes" else SUCCESS

    def filter(self, state, pod, candidates):
        from corral.scheduler.framework.interface import FilterResult

        names = self.cache.table.names
        bad = np.array([names[r] == "n1" for r in range(len(candidates))])
        return FilterResult.reject_where(bad, "node(s) are n1", unresolvable=True)


class Alphabet(Plugin):
    """Score: 10 × the node's number (n3 → 30); its PreScore skips pods labelled quiet=yes."""

    NAME = "Alphabet"

    def pre_score(self, state, pod, rows) -> Status:
        return SKIP if pod.labels.get("quiet") == "yes" else SUCCESS

    def score(self, state, pod, rows):
        names = self.cache.table.names
        picked = range(rows.start, rows.stop) if isinstance(rows, slice) else rows
        return np.array([10.0 * int(names[r][1:]) for r in picked])


class Reverse(Plugin):
    """Score: 100 − 10 × the node's number, normalised to twice that (to see normalize run)."""

    NAME = "Reverse"

    def score(self, state, pod, rows):
        names = self.cache.table.names
        picked = range(rows.start, rows.stop) if isinstance(rows, slice) else rows
        return np.array([100.0 - 10.0 * int(names[r][1:]) for r in picked])

    def normalize(self, state, pod, scores):
        return scores * 2


class Looker(NodeFilterAdapter):
    NAME = "Looker"

    @staticmethod
    def check(pod, node):
        SEEN.append((pod.name, node.name, node.labels.get("zone"), node.allocatable.get("cpu"),
                     node.requested.get("cpu"), node.obj.get("metadata", {}).get("name")))
        return None if node.name != "n2" else "node(s) are n2"


@pytest.fixture(autouse=True)
def plugins():
    for cls in (Policy, Alphabet, Reverse, Looker):
        register(cls)
    SEEN.clear()
    yield
    for cls in (Policy, Alphabet, Reverse, Looker):
        REGISTRY.pop(cls.NAME)


def framework(cache: Cache, **config):
    profile = {"plugins": {
        "preFilter": {"enabled": [{"name": "Policy"}]},
        "filter": {"enabled": [{"name": "Policy"}]},
        "preScore": {"enabled": [{"name": "Alphabet"}]},
        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "Alphabet", "weight": 3}, {"name": "Reverse"}]},
    }, **config.pop("profile", {})}
    return build_frameworks(parse_config({"profiles": [profile], **config}), cache=cache,
                            clock=lambda: 0.0)["default-scheduler"]


def cluster(n: int = 4) -> Cache:
    return Cache.from_objects([make_node(f"n{i}").zone(f"z{i % 2}").obj for i in range(n)], [], [])


def info(**labels) -> PodInfo:
    return PodInfo.from_object(make_pod("p").labels(**labels).obj)


def test_count_rows_counts_an_index_array_or_a_slice_of_rows():
    """What a Score plugin is given is either; both say how many nodes it scores."""
    assert count_rows(np.array([0, 4, 7])) == 3
    assert count_rows(slice(0, 5)) == 5
    assert count_rows(slice(2, 5)) == 3


def test_a_pre_filter_refusal_rejects_every_node_with_its_reasons():
    cache = cluster()
    fwk = framework(cache)
    with pytest.raises(FitError) as err:
        schedule_pod(fwk, cache, info(refuse="yes"))
    diagnosis = err.value.diagnosis
    assert diagnosis.pre_filter == Status(Code.UNSCHEDULABLE, ("pod refused by policy", "and by the rules"),
                                          "Policy")
    assert diagnosis.message() == ("0/4 nodes are available: 4 and by the rules, 4 pod refused by policy.")
    assert diagnosis.node_reasons(2) == ("Policy", ["pod refused by policy", "and by the rules"])
    report = explain(fwk, cache, info(refuse="yes"))
    assert report["nodes"][0] == {"node": "n0", "feasible": False, "plugin": "Policy",
                                  "reasons": ["pod refused by policy", "and by the rules"],
                                  "preemption": {"reasons": ["No preemption victims found for incoming pod"]}}


def test_a_pre_filter_skip_skips_that_plugins_filter_only():
    cache = cluster()
    fwk = framework(cache)
    assert explain(fwk, cache, info())["feasible"] == 3  # Policy's filter refuses n1
    assert explain(fwk, cache, info(skip="yes"))["feasible"] == 4
    report = explain(fwk, cache, info())
    assert [n for n in report["nodes"] if not n["feasible"]] == [
        {"node": "n1", "feasible": False, "plugin": "Policy", "reasons": ["node(s) are n1"]}]
    assert report["message"] == "3/4 nodes are available: 1 node(s) are n1."


def test_scores_are_normalised_then_weighted_and_summed():
    cache = cluster()
    fwk = framework(cache)
    report = explain(fwk, cache, info())
    by_node = {n["node"]: n for n in report["nodes"] if n["feasible"]}
    # Alphabet 10·i weighted 3; Reverse (100 − 10·i) normalised ×2, weight 1.
    assert by_node["n3"]["scores"] == {"Alphabet": 90.0, "Reverse": 140.0}
    assert by_node["n0"]["scores"] == {"Alphabet": 0.0, "Reverse": 200.0}
    assert [n["node"] for n in report["nodes"] if n["feasible"]] == ["n3", "n2", "n0"]
    assert by_node["n3"]["total"] == 230.0 and by_node["n0"]["total"] == 200.0
    assert report["chosen"] == "n3"
    # Why it won: the runner-up and by how much (n2: Alphabet 60 + Reverse 160).
    assert report["runnerUp"] == {"node": "n2", "total": 220.0, "by": 10.0}
    assert "nearestMisses" not in report


def test_a_pre_score_skip_leaves_that_plugin_out_and_weight_zero_turns_a_plugin_off():
    cache = cluster()
    quiet = explain(framework(cache), cache, info(quiet="yes"))
    assert quiet["chosen"] == "n0" and quiet["nodes"][0]["scores"] == {"Reverse": 200.0}
    off = framework(cache, profile={"plugins": {
        "preFilter": {"enabled": [{"name": "Policy"}]},
        "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "Alphabet", "weight": 0}, {"name": "Reverse"}]},
    }})
    report = explain(off, cache, info())
    assert report["chosen"] == "n0" and report["nodes"][0]["scores"] == {"Reverse": 200.0}


def test_with_no_score_plugin_every_node_scores_zero_and_ties_break_by_name_when_asked():
    cache = cluster()
    fwk = framework(cache, tieBreak="name", profile={"plugins": {"score": {"disabled": [{"name": "*"}]}}})
    result = schedule_pod(fwk, cache, info(), scores=True)
    assert result.node == "n0" and list(result.scores.total) == [0.0] * 4 and result.scores.by_plugin == {}


def test_random_tie_breaks_cover_every_tied_node_and_never_an_untied_one():
    cache = cluster(6)
    fwk = framework(cache, seed=11, profile={"plugins": {"score": {"disabled": [{"name": "*"}]}}})
    picks = {schedule_pod(fwk, cache, info()).node for _ in range(200)}
    assert picks == {f"n{i}" for i in range(6)}


def test_a_node_by_node_plugin_sees_each_candidates_name_labels_object_and_amounts():
    cache = Cache.from_objects([make_node(f"n{i}").capacity(cpu=2, memory="4Gi", pods=10).obj for i in range(3)],
                               [make_pod("old").requests(cpu="500m").node("n0").obj], [])
    fwk = framework(cache, profile={"plugins": {"filter": {"enabled": [{"name": "Looker"}]}}})
    report = explain(fwk, cache, info())
    assert [n["node"] for n in report["nodes"] if not n["feasible"]] == ["n2"]
    assert report["message"] == "2/3 nodes are available: 1 node(s) are n2."
    assert ("p", "n0", None, 2000, 500, "n0") in SEEN and ("p", "n2", None, 2000, 0, "n2") in SEEN


def test_sampling_takes_the_next_window_of_the_node_order_each_cycle():
    cache = Cache.from_objects([make_node(f"n{i:03d}").obj for i in range(400)], [], [])
    fwk = build_frameworks(parse_config({"percentageOfNodesToScore": 30}), cache=cache,
                           clock=lambda: 0.0)["default-scheduler"]
    table = cache.table
    order = np.arange(399, -1, -1)  # the node order: last row first
    feasible = np.arange(400)
    first = fwk.sample(feasible, table, order)
    assert list(first) == list(range(280, 400))  # 30% of 400 = 120 rows, in order
    second = fwk.sample(feasible, table, order)
    assert list(second) == list(range(160, 280))  # the next 120
    without = np.setdiff1d(feasible, np.arange(100, 160))  # rows 100..159 infeasible now
    third = fwk.sample(without, table, order)
    assert list(third) == list(range(0, 100)) + list(range(380, 400))  # skips them, wraps around
    assert list(fwk.sample(feasible[:100], table, order)) == list(range(100))  # ≤ 100 feasible: all
    assert list(fwk.sample(feasible, table, None)) == list(range(120))  # no order: the first K
    fresh = build_frameworks(parse_config({"percentageOfNodesToScore": 30}), cache=cache,
                             clock=lambda: 0.0)["default-scheduler"]
    exactly = np.arange(280, 400)  # as many feasible rows as are kept: all kept, the window stays
    assert list(fresh.sample(exactly, table, order)) == list(exactly)
    assert list(fresh.sample(feasible, table, order)) == list(range(280, 400))


@pytest.mark.parametrize("nodes, percentage, kept", [
    (400, 0, 188),      # adaptive: 50 − 400 // 125 = 47 %
    (10_000, 0, 500),   # adaptive, at its floor of 5 %
    (400, 10, 100),     # never fewer than 100
    (400, 100, 400),
    (20_000, 1, 200),   # 1 % is 1 %, not the adaptive default
    (150, 0, 100),      # adaptive 49 % is 73: at least 100
])
def test_how_many_nodes_sampling_keeps(nodes, percentage, kept):
    class Table:
        node_count = nodes
        size = nodes

    fwk = build_frameworks(parse_config({"percentageOfNodesToScore": percentage}), cache=Cache(),
                           clock=lambda: 0.0)["default-scheduler"]
    assert len(fwk.sample(np.arange(nodes), Table(), None)) == kept


def test_statuses_say_what_they_mean():
    assert Status.error("disk on fire") == Status(Code.ERROR, ("disk on fire",), "")
    assert Status.unschedulable("a", "b").code is Code.UNSCHEDULABLE
    assert Status.unschedulable("a", plugin="P", unresolvable=True) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("a",), "P")
    assert Status.unschedulable("a", "b").message() == "a, b"
    assert Status.unschedulable("x").rejects and Status.unschedulable("x", unresolvable=True).rejects
    assert not Status.error("x").rejects and not SUCCESS.rejects and SUCCESS.ok and not SKIP.ok


def test_a_cycle_state_is_per_attempt():
    state = CycleState()
    state["k"] = 1
    assert state["k"] == 1 and "k" not in CycleState()


def test_explain_names_the_first_filter_when_it_is_the_one_that_refused_a_node():
    """NodeReady runs first: a node that is not ready is explained by NodeReady's own reason."""
    cache = Cache.from_objects([make_node("up").capacity(cpu=2, memory="4Gi", pods=10).obj,
                                make_node("down").capacity(cpu=2, memory="4Gi", pods=10).not_ready().obj], [], [])
    fwk = build_frameworks(parse_config({}), cache=cache, clock=lambda: 0.0)["default-scheduler"]
    assert [p.NAME for p in fwk.filters][0] == "NodeReady"
    report = explain(fwk, cache, PodInfo.from_object(make_pod("p").obj))
    (down,) = [n for n in report["nodes"] if not n["feasible"]]
    assert down["node"] == "down" and down["plugin"] == "NodeReady" and down["reasons"]


def test_one_message_reported_by_two_of_a_plugins_checks_is_counted_over_both():
    """The summary counts nodes per message, Kubernetes' way: a plugin whose two checks say the same
    thing of different nodes (two constraints of one kind, say) is summed, not the last one kept."""
    import numpy as np

    from corral.scheduler.framework.runtime import Diagnosis

    d = Diagnosis(5, np.array([0, 0, 0, 1, -1]), ["PodTopologySpread", "NodeResourcesFit"])
    message = "node(s) didn't match pod topology spread constraints"
    d.reasons = [(0, message, np.array([True, True, False, False, False]), False),
                 (0, message, np.array([False, False, True, False, False]), False),
                 (1, "Insufficient cpu", np.array([False, False, False, True, False]), False)]
    assert d.message(1) == ("1/5 nodes are available: 1 Insufficient cpu, "
                            "3 node(s) didn't match pod topology spread constraints.")
