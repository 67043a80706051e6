"""The node rollout's plan, on its own (what the DaemonSet and Placement controllers do with it is
tested with them): a second pod on a node goes, the current revision's kept; a surge waits for the
new pod to be available; maxUnavailable counts nodes without an available pod; surge pods start on
as many nodes as maxSurge allows."""

from __future__ import annotations

from corral.api.defaults import rfc3339
from corral.controllers.workloads.node_rollout import HASH_LABEL, node_of, plan, pods_by_node, revision_of

NOW = 10_000.0
MIN_READY = 10


def pod(name: str, node: str, revision: str, ready_for: float | None = 100.0) -> dict:
    """A bound pod of ``revision``, ready for ``ready_for`` seconds (None: not ready)."""
    conditions = [] if ready_for is None else [{"type": "Ready", "status": "True",
                                                "lastTransitionTime": rfc3339(NOW - ready_for)}]
    return {"metadata": {"name": name, "labels": {HASH_LABEL: revision}, "creationTimestamp": rfc3339(NOW - 1000)},
            "spec": {"nodeName": node}, "status": {"phase": "Running", "conditions": conditions}}


def planned(pods: list[dict], wanted: set[str], *, surge: int = 0, max_unavailable: int | None = None):
    todo = plan(pods_by_node(pods), wanted, "new", min_ready=MIN_READY, now=NOW, surge=surge,
                max_unavailable=max_unavailable)
    live = {node: sorted(p["metadata"]["name"] for p in ps) for node, ps in todo.live.items() if ps}
    return sorted(p["metadata"]["name"] for p in todo.doomed), todo.missing, live


def test_a_second_pod_on_a_node_goes_and_the_current_revisions_is_kept():
    pods = [pod("x", "n9", "old"), pod("n1-old", "n1", "old"), pod("n1-new", "n1", "new"), pod("n2-old", "n2", "old")]
    doomed, missing, live = planned(pods, {"n1", "n2", "n3"})  # OnDelete: no budget, nothing else replaced
    assert doomed == ["n1-old", "x"] and missing == ["n3"]
    assert live == {"n1": ["n1-new"], "n2": ["n2-old"]}


def test_without_a_surge_a_second_pod_goes_even_while_the_new_one_is_not_available_yet():
    pods = [pod("n1-old", "n1", "old"), pod("n1-new", "n1", "new", ready_for=None)]
    doomed, missing, live = planned(pods, {"n1"})
    assert doomed == ["n1-old"] and missing == [] and live == {"n1": ["n1-new"]}


def test_a_surge_lets_the_old_pod_go_once_the_new_one_is_available():
    pods = [pod("x", "n9", "old"),
            pod("n1-old", "n1", "old"), pod("n1-new", "n1", "new"),  # new one available: the old goes
            pod("n2-old", "n2", "old"), pod("n2-new", "n2", "new", ready_for=5),  # not yet: both stay
            pod("n3-a", "n3", "new"), pod("n3-b", "n3", "new", ready_for=50)]  # two new ones: the readiest stays
    doomed, missing, live = planned(pods, {"n1", "n2", "n3"}, surge=1, max_unavailable=0)
    assert doomed == ["n1-old", "n3-b", "x"] and missing == []
    assert live == {"n1": ["n1-new"], "n2": ["n2-new", "n2-old"], "n3": ["n3-a"]}


def test_max_unavailable_counts_the_nodes_without_an_available_pod():
    # n3's old pod is not available (ready 5 s of 10): it costs nothing to replace and goes at once;
    # n4 has none, so with n3 two nodes are down already: a budget of 2 lets no available one go.
    pods = [pod("n1-old", "n1", "old"), pod("n2-old", "n2", "old"), pod("n3-old", "n3", "old", ready_for=5)]
    doomed, missing, _ = planned(pods, {"n1", "n2", "n3", "n4"}, max_unavailable=2)
    assert doomed == ["n3-old"] and missing == ["n4"]
    # One node down (n3, without a pod): a budget of 2 lets one available old pod go.
    pods = [pod("n1-old", "n1", "old"), pod("n2-old", "n2", "old", ready_for=200)]
    doomed, missing, _ = planned(pods, {"n1", "n2", "n3"}, max_unavailable=2)
    assert doomed == ["n1-old"] and missing == ["n3"]  # the one ready for less time goes first


def test_surge_pods_start_beside_old_ones_on_as_many_nodes_as_max_surge_allows():
    pods = [pod("n1-old", "n1", "old"), pod("n1-new", "n1", "new", ready_for=None),  # one surge under way
            pod("n2-old", "n2", "old", ready_for=None),  # not available: replaced outright, not surged
            pod("n3-old", "n3", "old"), pod("n4-old", "n4", "old")]
    doomed, missing, _ = planned(pods, {"n1", "n2", "n3", "n4"}, surge=2, max_unavailable=0)
    assert doomed == ["n2-old"] and missing == ["n3"]  # 2 - 1 under way: one more, in name order


def test_with_a_surge_available_old_pods_wait_for_their_successors_whatever_max_unavailable_allows():
    pods = [pod("n1-old", "n1", "old"), pod("n2-old", "n2", "old"), pod("n3-old", "n3", "old", ready_for=None)]
    doomed, missing, _ = planned(pods, {"n1", "n2", "n3"}, surge=1, max_unavailable=2)
    assert doomed == ["n3-old"] and missing == ["n1"]  # the unavailable one goes; one surge pod starts


def test_a_pod_already_going_is_not_counted_again_by_the_budget():
    # n1's old pod goes as the second pod on its node; the budget of 1 then takes n2's, not n1's again.
    pods = [pod("n1-old", "n1", "old", ready_for=50), pod("n1-new", "n1", "new"), pod("n2-old", "n2", "old", ready_for=200)]
    todo = plan(pods_by_node(pods), {"n1", "n2"}, "new", min_ready=MIN_READY, now=NOW, surge=0, max_unavailable=1)
    assert sorted(p["metadata"]["name"] for p in todo.doomed) == ["n1-old", "n2-old"]


def test_the_node_a_pod_is_for_and_its_revision():
    bound, unlabelled = pod("a", "n1", "r1"), pod("b", "n1", "r1")
    unlabelled["metadata"]["labels"] = {}
    assert (node_of(bound), revision_of(bound), revision_of(unlabelled)) == ("n1", "r1", "")

    def pending(operator: str, values: list[str]) -> dict:
        return {"metadata": {}, "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": operator, "values": values}]}]}}}}}

    assert node_of(pending("In", ["n2"])) == "n2"
    assert node_of(pending("NotIn", ["n2"])) == ""  # not for one node: for none
    assert node_of(pending("In", ["n2", "n3"])) == ""
    assert node_of({"metadata": {}, "spec": {}}) == ""
