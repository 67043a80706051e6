"""The extenders' answers folded into a cycle's scores and into an explanation, checked exactly:
missing scores count zero, rejected and unasked nodes move to the rejected with who said no, and
the best node and the summary are worked out again only when the extenders changed something."""

from __future__ import annotations

import numpy as np

from corral.scheduler.extenders import Verdict
from corral.scheduler.extenders.decide import NOT_ASKED, add_extender_scores, apply_to_report
from corral.scheduler.framework.runtime import Scores


class Table:
    names = ["a", "b", "c"]


def test_extender_scores_are_added_per_node_and_shown_per_extender_missing_ones_counting_zero():
    scores = Scores(np.array([0, 1, 2]), np.array([10.0, 20.0, 30.0]), {"NodeResourcesFit": np.array([10.0, 20.0, 30.0])})
    add_extender_scores(scores, Table(), {"x": {"a": 50.0, "c": 20.0}, "y": {"b": 5.0}})
    assert scores.by_plugin["extender x"].tolist() == [50.0, 0.0, 20.0]
    assert scores.by_plugin["extender y"].tolist() == [0.0, 5.0, 0.0]
    assert scores.total.tolist() == [60.0, 25.0, 50.0]


def feasible(node: str, total: float) -> dict:
    return {"node": node, "feasible": True, "total": total, "scores": {"NodeResourcesFit": total}}


def report(*entries, chosen: str | None = None) -> dict:
    return {"pod": "default/p", "nodes": list(entries), "chosen": chosen, "total": len(entries),
            "feasible": sum(e["feasible"] for e in entries), "message": "old"}


def test_rejected_and_unasked_nodes_are_rejected_by_whom_and_the_rest_rescored_and_resorted():
    r = report(feasible("a", 90.0), feasible("b", 95.0), feasible("c", 80.0), feasible("e", 70.0),
               {"node": "d", "feasible": False, "plugin": "NodeResourcesFit", "reasons": ["Insufficient cpu"]},
               chosen="b")
    verdict = Verdict({"a", "c"}, {"b": ("https://gpu", "no gpu", False)})
    apply_to_report(r, verdict, {"https://gpu": {"c": 30.0}})
    assert r["nodes"] == [
        {"node": "c", "feasible": True, "total": 110.0, "scores": {"NodeResourcesFit": 80.0, "extender https://gpu": 30.0}},
        {"node": "a", "feasible": True, "total": 90.0, "scores": {"NodeResourcesFit": 90.0, "extender https://gpu": 0.0}},
        {"node": "b", "feasible": False, "plugin": "extender https://gpu", "reasons": ["no gpu"]},
        {"node": "e", "feasible": False, "plugin": "extender extenders", "reasons": [NOT_ASKED]},
        {"node": "d", "feasible": False, "plugin": "NodeResourcesFit", "reasons": ["Insufficient cpu"]},
    ]
    assert (r["chosen"], r["feasible"]) == ("c", 2)
    assert r["message"] == ("2/5 nodes are available: 1 Insufficient cpu, 1 no gpu, "
                            "1 node(s) joined while the extenders decided.")


def test_the_chosen_node_stays_when_the_extenders_passed_it_and_scored_nothing():
    """a and c tie; the scheduler's tie-break chose c: without extender scores it stands."""
    r = report(feasible("a", 90.0), feasible("c", 90.0), chosen="c")
    apply_to_report(r, Verdict({"a", "c"}), {})
    assert r["chosen"] == "c" and r["message"] == "2/2 nodes are available."


def test_a_chosen_node_an_extender_rejected_gives_way_even_without_scores():
    r = report(feasible("a", 90.0), feasible("c", 95.0), chosen="c")
    apply_to_report(r, Verdict({"a"}, {"c": ("https://gpu", "no gpu", True)}), {})
    assert r["chosen"] == "a"


def test_when_every_node_is_rejected_nothing_is_chosen():
    r = report(feasible("a", 90.0), chosen="a")
    apply_to_report(r, Verdict(set(), {"a": ("https://gpu", "no gpu", False)}), {})
    assert (r["chosen"], r["feasible"], r["message"]) == (None, 0, "0/1 nodes are available: 1 no gpu.")


def extended_cycle(verdict: Verdict, extra: dict, *, cpu: str = "1", config: dict | None = None):
    """decide_among on a cache of four 4-cpu nodes a, b, c, d, as the scheduler and plan call it."""
    from corral.scheduler.extenders.decide import decide_among
    from corral.scheduler.framework.podinfo import PodInfo
    from corral.testing.builders import make_node, make_pod
    from corral.testing.scheduler_harness import Harness

    h = Harness(config)
    for name in "abcd":
        h.add_node(make_node(name).capacity(cpu=4, memory="8Gi", pods=10).heartbeat_age(0))
    cache = h.scheduler.cache
    pod = PodInfo.from_object(make_pod("p").requests(cpu=cpu).obj)
    return cache, decide_among(h.scheduler.frameworks["default-scheduler"], cache, pod, verdict, extra, candidates=False)


def test_a_cycle_among_the_nodes_the_extenders_passed_chooses_by_their_scores_too():
    cache, (result, fit, post) = extended_cycle(Verdict({"a", "c"}, {"b": ("https://gpu", "no gpu", False)}),
                                                {"https://gpu": {"c": 30.0}})  # d: not asked
    assert fit is None and post is None
    assert (result.node, result.row, result.evaluated, result.feasible) == ("c", cache.table.row_of["c"], 4, 2)
    assert sorted(cache.table.names[r] for r in result.scores.rows.tolist()) == ["a", "c"]
    c = result.scores.rows.tolist().index(cache.table.row_of["c"])
    assert result.scores.by_plugin["extender https://gpu"][c] == 30.0


def test_a_tie_among_the_passed_nodes_is_broken_as_the_profile_says():
    cache, (result, _, _) = extended_cycle(Verdict({"d", "b"}), {}, config={"tieBreak": "name"})
    assert result.node == "b"  # the same scores: the first name (the default, random with seed 0, takes d)


def test_with_no_node_left_the_fit_error_says_who_refused_each_and_whether_preemption_could_help():
    cache, (result, fit, post) = extended_cycle(
        Verdict(set(), {"a": ("https://gpu", "no gpu", True), "b": ("https://gpu", "busy", False),
                        "c": ("https://gpu", "busy", False)}), {})  # d: not asked
    assert result is None and post is not None and not post.status.ok
    row = cache.table.row_of
    diagnosis = fit.diagnosis
    assert diagnosis.node_reasons(row["a"]) == ("extender https://gpu", ["no gpu"])
    assert diagnosis.node_reasons(row["d"]) == ("extender extenders", [NOT_ASKED])
    preemptable = diagnosis.preemptable_rows()
    assert [bool(preemptable[row[n]]) for n in "abcd"] == [False, True, True, True]  # "no gpu" is unresolvable
    assert fit.diagnosis.message(0) == ("0/4 nodes are available: 1 no gpu, "
                                        "1 node(s) joined while the extenders decided, 2 busy.")  # sorted as text
