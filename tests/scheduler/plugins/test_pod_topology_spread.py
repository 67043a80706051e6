import pytest

from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import filter_result, run_filter, run_score

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NODES = [make_node("a").zone("z1"), make_node("b").zone("z2"), make_node("c").zone("z3")]


def web(name, node):
    return make_pod(name).labels(app="web").node(node)


def passing(pod, existing=(), nodes=NODES) -> set[str]:
    return {n for n, r in run_filter("PodTopologySpread", nodes, pod, list(existing)).items() if not r}


@pytest.mark.parametrize(
    "pod, existing, expected",
    [
        pytest.param(make_pod("p").labels(app="web").spread(1, ZONE, app="web"), [], {"a", "b", "c"},
                     id="empty domains all fit"),
        pytest.param(make_pod("p").labels(app="web").spread(1, ZONE, app="web"), [web("w1", "a")], {"b", "c"},
                     id="maxSkew 1 keeps the pod out of the fuller zone"),
        pytest.param(make_pod("p").labels(app="web").spread(2, ZONE, app="web"), [web("w1", "a")], {"a", "b", "c"},
                     id="a larger maxSkew allows it"),
        pytest.param(make_pod("p").labels(app="web").spread(1, ZONE, app="web"),
                     [web("w1", "a"), web("w2", "b"), web("w3", "c")], {"a", "b", "c"},
                     id="balanced domains all fit"),
        pytest.param(make_pod("p").spread(1, ZONE, app="web"), [web("w1", "a")], {"a", "b", "c"},
                     id="a pod the selector does not match adds nothing to the skew"),
        pytest.param(make_pod("p").labels(app="web").spread(1, ZONE, min_domains=5, app="web"), [web("w1", "b")],
                     {"a", "c"}, id="with fewer domains than minDomains the minimum counts as zero"),
    ],
)
def test_filter(pod, existing, expected):
    assert passing(pod, existing) == expected


def test_a_node_without_the_topology_label_is_no_place_preemption_could_make_room_on():
    # Kubernetes: a missing label is UnschedulableAndUnresolvable (evicting pods does not add it); a
    # skew is not (evicting pods of the fuller domain may even it out).
    nodes = [*NODES, make_node("d")]
    result = filter_result("PodTopologySpread", nodes, make_pod("p").labels(app="web").spread(1, ZONE, app="web"),
                           [web("w1", "a")])
    assert [(bool(r.unresolvable), list(r.rows[:4])) for r in result.reasons] == [
        (True, [False, False, False, True]), (False, [True, False, False, False])]


def test_nodes_without_the_topology_label_are_refused_with_their_own_reason():
    nodes = NODES + [make_node("nozone")]
    result = run_filter("PodTopologySpread", nodes, make_pod("p").labels(app="web").spread(1, ZONE, app="web"))
    assert result["nozone"] == ["node(s) didn't match pod topology spread constraints (missing required label)"]


def test_node_affinity_limits_the_domains_counted():
    # z1 holds 2 matching pods, z2 holds 1, z3 none. The pod may only go to z1 or z2, so the
    # minimum is taken over those (1), and z2 fits; were the empty z3 counted, nothing would fit.
    pod = make_pod("p").labels(app="web").spread(1, ZONE, app="web").require_node(ZONE, "In", "z1", "z2")
    existing = [web("w1", "a"), web("w2", "a"), web("w3", "b")]
    result = run_filter("PodTopologySpread", NODES, pod, existing)
    assert result["a"] and not result["b"]  # (c is NodeAffinity's to refuse)
    ignoring = make_pod("p").labels(app="web").spread(1, ZONE, app="web")
    ignoring.spec["topologySpreadConstraints"][0]["nodeAffinityPolicy"] = "Ignore"
    ignoring.require_node(ZONE, "In", "z1", "z2")
    assert run_filter("PodTopologySpread", NODES, ignoring, existing)["b"]


def test_schedule_anyway_only_scores_fewer_matches_higher():
    pod = make_pod("p").labels(app="web").spread(1, ZONE, hard=False, app="web")
    existing = [web("w1", "a"), web("w2", "a"), web("w3", "b")]
    assert passing(pod, existing) == {"a", "b", "c"}
    # Raw round(count × ln(3 zones + 2)): a 3, b 2, c 0; normalised 100 × (max + min − s) / max.
    assert run_score("PodTopologySpread", NODES, pod, existing, raw=True) == {"a": 3, "b": 2, "c": 0}
    assert run_score("PodTopologySpread", NODES, pod, existing) == {"a": 0, "b": 33, "c": 100}


def test_system_default_spreading_applies_to_controlled_pods_only():
    existing = [make_pod("w1").labels(app="web").controlled().node("a")]
    controlled = make_pod("p").labels(app="web").controlled()
    # Defaults hostname maxSkew 3 and zone maxSkew 5, three domains each (ln 5): a holds the one
    # matching pod: round(ln5 + 2 + ln5 + 4) = 9; b and c: 2 + 4 = 6. Normalised: 66, 100, 100.
    assert run_score("PodTopologySpread", NODES, controlled, existing) == {"a": 66, "b": 100, "c": 100}
    assert run_score("PodTopologySpread", NODES, make_pod("p").labels(app="web"), existing) == {}
    # defaultingType List: only the profile's defaultConstraints apply, and it gives none here.
    assert run_score("PodTopologySpread", NODES, controlled, existing, args={"defaultingType": "List"}) == {}


@pytest.mark.parametrize("effect", ["NoSchedule", "NoExecute"])
def test_node_taints_policy_honor_leaves_tainted_domains_out_of_the_count(effect):
    nodes = [make_node("a").zone("z1"), make_node("b").zone("z2"),
             make_node("c").zone("z3").taint("dedicated", "x", effect)]
    existing = [web("w1", "a"), web("w2", "b")]
    pod = make_pod("p").labels(app="web").spread(1, ZONE, app="web")
    # Ignore (the default): the empty tainted z3 sets the minimum at 0, so z1 and z2 are too full.
    assert {n for n, r in run_filter("PodTopologySpread", nodes, pod, existing).items() if not r} == {"c"}
    pod.spec["topologySpreadConstraints"][0]["nodeTaintsPolicy"] = "Honor"
    # Honor: z3 is not a place this pod can go, so the minimum is 1 and z1, z2 fit (c's taint is
    # TaintToleration's to refuse: for spreading, its empty domain adds nothing).
    assert {n for n, r in run_filter("PodTopologySpread", nodes, pod, existing).items() if not r} == {"a", "b", "c"}
    # The untainted nodes still count what they hold: z1 with two is one above z2's minimum of 1.
    fuller = [*existing, web("w3", "a")]
    assert {n for n, r in run_filter("PodTopologySpread", nodes, pod, fuller).items() if not r} == {"b", "c"}
    # A pod that tolerates the taint counts z3 again: its minimum is 0, so only c fits.
    pod.toleration("dedicated", "x", effect)
    assert {n for n, r in run_filter("PodTopologySpread", nodes, pod, existing).items() if not r} == {"c"}


def test_every_hard_constraint_applies_and_a_soft_one_before_them_changes_nothing():
    """Zone and hostname, both hard, after a soft one: a and b break the zone skew (z1 holds 2 web pods,
    z2 none), a also the hostname skew; c lacks the zone label; only d passes."""
    nodes = [make_node("a").zone("z1"), make_node("b").zone("z1"), make_node("c"), make_node("d").zone("z2")]
    existing = [make_pod(f"e{i}").labels(app="web").node("a") for i in range(2)]
    pod = (make_pod("p").labels(app="web").spread(1, HOST, hard=False, app="web")
           .spread(1, ZONE, app="web").spread(1, HOST, app="web"))
    skew = "node(s) didn't match pod topology spread constraints"
    assert run_filter("PodTopologySpread", nodes, pod, existing) == {
        "a": [skew], "b": [skew], "c": [skew + " (missing required label)"], "d": []}


def test_pods_on_nodes_the_pod_may_not_use_do_not_count_towards_the_skew():
    # z1 holds two web pods, but on "a-gpu", which the incoming pod's nodeSelector rules out
    # (nodeAffinityPolicy Honor, Kubernetes' default): z1 counts 0, so z1 may take the pod (this
    # plugin alone; NodeAffinity keeps it off a-gpu).
    nodes = [make_node(n).zone(z).labels(gpu="no") for n, z in (("a", "z1"), ("b", "z2"), ("c", "z3"))]
    nodes.append(make_node("a-gpu").zone("z1").labels(gpu="yes"))
    existing = [web("w1", "a-gpu"), web("w2", "a-gpu"), web("w3", "b"), web("w4", "c")]
    pod = make_pod("p").labels(app="web").spread(1, ZONE, app="web").node_selector(gpu="no")
    assert passing(pod, existing, nodes) == {"a", "a-gpu"}
    soft = make_pod("p").labels(app="web").spread(1, ZONE, hard=False, app="web").node_selector(gpu="no")
    scores = run_score("PodTopologySpread", nodes, soft, existing, raw=True)
    assert scores["a"] < scores["b"] == scores["c"]  # z1 looks emptiest to the soft spread too


async def test_system_default_spreading_moves_a_controlled_pod_away_from_its_siblings_and_never_holds_it():
    from corral.testing.scheduler_harness import Harness

    def cluster(small_cpu: int = 4) -> Harness:
        h = Harness({"tieBreak": "name"})
        h.add_node(make_node("big").capacity(cpu=16, memory="32Gi", pods=110))
        h.add_node(make_node("small").capacity(cpu=small_cpu, memory="8Gi", pods=110))
        for i in range(5):
            h.add_pod(make_pod(f"old{i}").labels(app="web").controlled().node("big").requests(cpu="100m"))
        return h

    h = cluster()
    h.add_pod(make_pod("sibling").labels(app="web").controlled().requests(cpu="100m"))
    h.add_pod(make_pod("stranger").labels(app="db").controlled().requests(cpu="100m"))  # other labels: not counted
    h.add_pod(make_pod("plain").labels(app="web").requests(cpu="100m"))  # no controller: no default spreading
    await h.run()
    assert h.placements() == {"default/sibling": "small", "default/stranger": "big", "default/plain": "big"}
    h = cluster(small_cpu=1)  # too small for it: a skew of 6 on hostnames (past maxSkew 3), only a preference
    h.add_pod(make_pod("sibling").labels(app="web").controlled().requests(cpu="2"))
    await h.run()
    assert h.placements() == {"default/sibling": "big"}
