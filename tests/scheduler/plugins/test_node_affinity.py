import pytest

from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import filter_result, run_filter, run_score

NODES = [
    make_node("a").zone("z1").labels(disk="ssd", cores="8"),
    make_node("b").zone("z2").labels(disk="hdd", cores="4"),
    make_node("c").zone("z3"),
]


def _terms(*terms: dict) -> dict:
    """A pod requiring these node selector terms as written (the API would refuse the malformed ones;
    the filter must still not match on them)."""
    obj = make_pod("p").obj
    obj["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}
    return obj


def passing(pod) -> set[str]:
    return {n for n, reasons in run_filter("NodeAffinity", NODES, pod).items() if not reasons}


@pytest.mark.parametrize(
    "pod, expected",
    [
        pytest.param(make_pod("p"), {"a", "b", "c"}, id="no selector fits everywhere"),
        pytest.param(make_pod("p").node_selector(disk="ssd"), {"a"}, id="nodeSelector matches labels exactly"),
        pytest.param(make_pod("p").node_selector(disk="ssd", cores="4"), set(), id="every nodeSelector label must match"),
        pytest.param(make_pod("p").node_selector(cores="8", disk="ssd"), {"a"}, id="every nodeSelector label matches"),
        pytest.param(make_pod("p").node_selector(disk="nvme"), set(), id="a nodeSelector value no node has fits nowhere"),
        pytest.param(make_pod("p").require_node("topology.kubernetes.io/zone", "In", "z1", "z2"), {"a", "b"},
                     id="In matches any listed value"),
        pytest.param(make_pod("p").require_node("disk", "NotIn", "hdd"), {"a", "c"},
                     id="NotIn matches nodes without the label too"),
        pytest.param(make_pod("p").require_node("disk", "Exists"), {"a", "b"}, id="Exists needs the label"),
        pytest.param(make_pod("p").require_node("disk", "DoesNotExist"), {"c"}, id="DoesNotExist needs its absence"),
        pytest.param(make_pod("p").require_node("cores", "Gt", "5"), {"a"}, id="Gt compares numbers"),
        pytest.param(make_pod("p").require_node("cores", "Lt", "5"), {"b"}, id="Lt compares numbers"),
        pytest.param(make_pod("p").require_node("disk", "In", "ssd").require_node("cores", "Lt", "5"), set(),
                     id="expressions of one term must all hold"),
        pytest.param(make_pod("p").require_node_term(("disk", "In", "ssd")).require_node_term(("cores", "Lt", "5")),
                     {"a", "b"}, id="terms are alternatives"),
        pytest.param(make_pod("p").match_field("In", "c"), {"c"}, id="matchFields selects by node name"),
        pytest.param(make_pod("p").match_field("NotIn", "c"), {"a", "b"}, id="matchFields NotIn excludes by node name"),
        pytest.param(make_pod("p").match_field("In", "gone"), set(), id="matchFields naming no node fits nowhere"),
        pytest.param(make_pod("p").match_field("NotIn", "gone", "c"), {"a", "b"},
                     id="matchFields NotIn a node that does not exist excludes only those that do"),
        pytest.param(make_pod("p").require_node("cores", "Lt", "5").require_node("disk", "In", "ssd"), set(),
                     id="an In after another expression narrows, it does not replace"),
        pytest.param(make_pod("p").require_node("disk", "Exists").require_node("cores", "NotIn", "8"), {"b"},
                     id="a NotIn after another expression narrows"),
        pytest.param(make_pod("p").require_node("cores", "NotIn", "8").require_node("disk", "Exists"), {"b"},
                     id="an Exists after another expression narrows"),
        pytest.param(make_pod("p").require_node("disk", "In", "ssd").require_node("cores", "DoesNotExist"), set(),
                     id="a DoesNotExist after another expression narrows"),
        pytest.param(make_pod("p").require_node("cores", "Gt", "8"), set(), id="Gt is strictly greater"),
        pytest.param(make_pod("p").require_node("cores", "Lt", "4"), set(), id="Lt is strictly less"),
        pytest.param({**make_pod("p").obj, "spec": {**make_pod("p").obj["spec"], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "disk", "operator": "In", "values": ["hdd"]}],
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}}}}, set(),
                     id="matchFields and matchExpressions of one term must both hold"),
        pytest.param(make_pod("p").node_selector(disk="ssd").require_node("topology.kubernetes.io/zone", "In", "z2"),
                     set(), id="nodeSelector and affinity must both hold"),
        pytest.param(_terms({}), set(), id="an empty term matches no node (Kubernetes)"),
        pytest.param(_terms({}, {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}), {"a", "b"},
                     id="an empty term beside another: the other decides"),
        pytest.param(_terms({"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["many"]}]}), set(),
                     id="a Gt bound that is not a number matches nothing"),
        pytest.param(_terms({"matchExpressions": [{"key": "cores", "operator": "Lt"}]}), set(),
                     id="a Lt without a bound matches nothing"),
        pytest.param(_terms({"matchExpressions": [{"key": "disk", "operator": "Near", "values": ["ssd"]}]}), set(),
                     id="an operator it does not know matches nothing"),
    ],
)
def test_filter(pod, expected):
    assert passing(pod) == expected


def test_a_node_the_affinity_rules_out_is_no_place_preemption_could_make_room_on():
    # Unresolvable (Kubernetes' UnschedulableAndUnresolvable): evicting pods there would not change
    # the node's labels, so preemption must not look at it.
    pod = _terms({"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]})
    result = filter_result("NodeAffinity", NODES, pod)
    assert [(bool(r.unresolvable), list(r.rows[:3])) for r in result.reasons] == [(True, [False, True, True])]


def test_preferred_terms_add_their_weight():
    pod = make_pod("p").prefer_node(80, "disk", "In", "ssd").prefer_node(20, "topology.kubernetes.io/zone", "In", "z2")
    assert run_score("NodeAffinity", NODES, pod) == {"a": 100.0, "b": 25.0, "c": 0.0}


def test_the_affinity_masks_kept_for_reuse_are_bounded():
    from corral.scheduler.framework.podinfo import PodInfo
    from corral.scheduler.plugins.node_affinity import required_mask
    from corral.testing.scheduler_harness import Harness

    h = Harness()
    for node in NODES:
        h.add_node(node)
    table = h.scheduler.cache.table
    for i in range(300):  # as many different requirements: each mask kept, the memo cleared past 256
        pod = PodInfo.from_object(make_pod(f"p{i}").require_node("cores", "NotIn", str(i)).obj)
        assert required_mask(table, pod).tolist() == [i != 8, i != 4, True]
        assert len(table.memo) <= 257


def test_the_remembered_selector_mask_follows_every_node_change_a_removal_included():
    """The mask of nodes a selector admits is kept per node-table version: a node relabelled and then
    another removed is a new version twice, never the one the mask was worked out at."""
    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.framework.podinfo import PodInfo
    from corral.scheduler.plugins.node_affinity import required_mask

    cache = Cache()
    for b in NODES:
        cache.set_node(b.obj)
    table, pod = cache.table, PodInfo.from_object(make_pod("p").node_selector(disk="ssd").obj)
    assert required_mask(table, pod)[:table.size].tolist() == [True, False, False]
    cache.set_node(make_node("a").zone("z1").labels(disk="hdd").obj)
    cache.remove_node("c")
    assert required_mask(table, pod)[:table.size].tolist() == [False, False, False]
