"""What the scheduler reads from a pod: every field of PodInfo, with Kubernetes' defaults for what the
pod leaves out, and the effective requests (containers summed, init containers' maximum, overhead)."""

from __future__ import annotations

import pytest

from corral.api.selectors import LabelSelector, Requirement
from corral.scheduler.framework import podinfo
from corral.scheduler.framework.podinfo import (
    DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, AffinityTerm, HostPort, NodeSelectorRequirement,
    NodeSelectorTerm, PodInfo, Requests, SpreadConstraint, WeightedTerm,
)

Mi = 1024 * 1024


def container(name: str = "c", image: str = "app:1", **resources) -> dict:
    return {"name": name, "image": image, "resources": resources}


def requests_of(spec: dict) -> Requests:
    return PodInfo.from_object({"metadata": {"name": "p"}, "spec": spec}).requests


def test_a_pod_that_says_nothing_gets_kubernetes_defaults():
    pod = {"metadata": {"name": "p"}}
    assert PodInfo.from_object(pod) == PodInfo(
        namespace="default", name="p", uid="", labels={}, priority=0, scheduler_name="default-scheduler",
        requests=Requests(0, 0, 0, (), 0, 0), node_name="", node_selector={}, required_node_terms=(),
        preferred_node_terms=(), tolerations=(), host_ports=(), images=(), init_images=(), spread=(),
        affinity=(), anti_affinity=(), preferred_affinity=(), preferred_anti_affinity=(), has_controller=False,
        preemption_policy="PreemptLowerPriority", held=pod)
    assert PodInfo.from_object({}).key == "default/"


def test_the_fields_a_pod_sets_are_read_as_written():
    pod = {
        "metadata": {"name": "p", "namespace": "team", "uid": "u-1", "resourceVersion": "42",
                     "labels": {"app": "web"},
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
        "spec": {"priority": 7, "schedulerName": "packer", "nodeName": "n1", "nodeSelector": {"disk": "ssd"},
                 "preemptionPolicy": "Never", "tolerations": [{"key": "k", "operator": "Exists"}],
                 "containers": [container("a", "app:1"), {"name": "b"}, container("c", "side:2")],
                 "initContainers": [container("i", "init:1"), {"name": "j"}]},
    }
    info = PodInfo.from_object(pod)
    assert (info.key, info.uid, info.labels, info.priority, info.scheduler_name,
            info.node_name, info.node_selector, info.preemption_policy, info.has_controller) == (
        "team/p", "u-1", {"app": "web"}, 7, "packer", "n1", {"disk": "ssd"}, "Never", True)
    assert info.tolerations == ({"key": "k", "operator": "Exists"},)
    assert info.images == ("app:1", "side:2") and info.init_images == ("init:1",)
    owned_by_other = {"metadata": {"name": "p", "ownerReferences": [{"kind": "X", "name": "x"}]}}
    assert PodInfo.from_object(owned_by_other).has_controller is False


def test_requests_sum_containers_take_limits_as_requests_and_count_each_missing_request_as_kubernetes_does():
    spec = {"containers": [
        container(requests={"cpu": "250m", "memory": "64Mi"}),
        container(limits={"cpu": "1", "memory": "1Gi"}, requests={"memory": "512Mi"}),  # cpu from the limit
        container(),  # nothing: counted as 100m / 200Mi when scoring, 0 when fitting
    ]}
    assert requests_of(spec) == Requests(
        cpu=1250, memory=576 * Mi, ephemeral=0, extended=(),
        nonzero_cpu=250 + 1000 + DEFAULT_MILLI_CPU_REQUEST, nonzero_memory=64 * Mi + 512 * Mi + DEFAULT_MEMORY_REQUEST)


def test_the_largest_init_container_sets_a_floor_per_resource_and_overhead_is_added():
    spec = {
        "containers": [container(requests={"cpu": "100m", "memory": "1Gi"}),
                       container(requests={"cpu": "100m", "memory": "1Gi"})],
        "initContainers": [container(requests={"cpu": "500m", "memory": "64Mi"}),
                           container(requests={"cpu": "300m", "memory": "3Gi", "ephemeral-storage": "1Gi"})],
        "overhead": {"cpu": "50m", "memory": "10Mi", "example.com/fpga": "1"},
    }
    r = requests_of(spec)
    assert (r.cpu, r.memory, r.ephemeral, r.extended) == (550, 3 * 1024 * Mi + 10 * Mi, 1024 * Mi,
                                                        (("example.com/fpga", 1),))


def test_an_init_container_asking_for_zero_adds_nothing():
    spec = {"containers": [container()],
            "initContainers": [container(requests={"cpu": "0", "example.com/gpu": "0"})]}
    r = requests_of(spec)
    assert (r.cpu, r.extended) == (0, ())


def test_extended_resources_are_sorted_zero_amounts_dropped_and_bad_quantities_skipped():
    spec = {"containers": [
        container(requests={"nvidia.com/gpu": "2", "example.com/zero": "0", "cpu": "lots", "memory": "1Gi"}),
        container(requests={"example.com/a": "1", "pods": "1"}),
    ], "overhead": {"memory": "nonsense", "cpu": "10m"}}
    r = requests_of(spec)
    assert r.extended == (("example.com/a", 1), ("nvidia.com/gpu", 2))
    assert (r.cpu, r.memory) == (10, 1024 * Mi)


def test_spread_constraints_default_as_kubernetes_and_read_every_policy():
    labels = {"app": "web", "version": "v2"}
    base = {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}}
    pod = {"metadata": {"name": "p", "labels": labels}, "spec": {"topologySpreadConstraints": [
        base,
        {**base, "maxSkew": 3, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2,
         "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor", "matchLabelKeys": ["version", "absent"]},
        {"labelSelector": {}},
    ]}}
    default, explicit, bare = PodInfo.from_object(pod).spread
    web = Requirement("app", "=", frozenset({"web"}))
    assert default == SpreadConstraint(max_skew=1, topology_key="zone", hard=True, selector=LabelSelector((web,)),
                                       min_domains=1, honor_node_affinity=True, honor_node_taints=False)
    assert explicit == SpreadConstraint(
        max_skew=3, topology_key="zone", hard=False, min_domains=2, honor_node_affinity=False,
        honor_node_taints=True, selector=LabelSelector((web, Requirement("version", "=", frozenset({"v2"})))))
    assert (bare.topology_key, bare.max_skew, bare.selector) == ("", 1, LabelSelector())


def test_pod_affinity_terms_select_nothing_without_a_selector_and_default_to_the_pods_namespace():
    term = {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}}
    pod = {"metadata": {"name": "p", "namespace": "team"}, "spec": {"affinity": {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term, {"topologyKey": "zone"}],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"podAffinityTerm": {**term, "namespaceSelector": {}}},
                {"weight": 30, "podAffinityTerm": {**term, "namespaces": ["a", "b"]}}]},
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {**term, "namespaceSelector": {"matchLabels": {"tier": "x"}}}],
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": {}}]},
    }}}
    info = PodInfo.from_object(pod)
    db = LabelSelector((Requirement("app", "=", frozenset({"db"})),))
    with_selector, without = info.affinity
    assert with_selector == AffinityTerm(db, "zone", frozenset({"team"}), None)
    assert without.topology_key == "zone" and without.namespaces == frozenset({"team"})
    assert not without.selector.matches({}) and not without.selector.matches({"app": "db"})
    (everywhere, listed) = info.preferred_affinity
    assert everywhere == WeightedTerm(1, AffinityTerm(db, "zone", frozenset(), LabelSelector()))
    assert listed == WeightedTerm(30, AffinityTerm(db, "zone", frozenset({"a", "b"}), None))
    (anti,) = info.anti_affinity
    assert anti.namespaces == frozenset() and anti.namespace_selector == LabelSelector(
        (Requirement("tier", "=", frozenset({"x"})),))
    assert anti.matches("other", {"app": "db"}, {"other": {"tier": "x"}})
    assert not anti.matches("other", {"app": "db"}, {"other": {"tier": "y"}})
    assert not anti.matches("unknown", {"app": "db"}, {})
    assert everywhere.term.matches("unknown", {"app": "db"}, {})  # an empty namespace selector: all
    ((weight, empty),) = [(w.weight, w.term) for w in info.preferred_anti_affinity]
    assert weight == 5 and empty.topology_key == "" and empty.namespaces == frozenset({"team"})


def test_node_affinity_terms_and_host_ports_are_read_with_their_defaults():
    pod = {"metadata": {"name": "p"}, "spec": {
        "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
                 "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]},
                {"matchExpressions": [{}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}},
                {"weight": 40}]}},
        "containers": [{"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080},
                                                {"containerPort": 53, "hostPort": 53, "protocol": "UDP"},
                                                {"containerPort": 9000}]}],
    }}
    info = PodInfo.from_object(pod)
    assert info.required_node_terms == (
        NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("a", "b")),),
                         (NodeSelectorRequirement("metadata.name", "NotIn", ("n1",)),)),
        NodeSelectorTerm((NodeSelectorRequirement("", "", ()),)),
    )
    assert info.preferred_node_terms == (
        (1, NodeSelectorTerm((NodeSelectorRequirement("disk", "Exists", ()),))),
        (40, NodeSelectorTerm(())),
    )
    assert info.host_ports == (HostPort("TCP", 8080), HostPort("UDP", 53))


@pytest.mark.parametrize("phase_spec, expected", [
    ({"priority": None}, 0),
    ({"priority": 0}, 0),
    ({"priority": -5}, -5),
])
def test_priority_is_an_integer_defaulting_to_zero(phase_spec, expected):
    assert PodInfo.from_object({"metadata": {"name": "p"}, "spec": phase_spec}).priority == expected


def test_pods_of_one_spec_share_its_parsing_but_never_another_namespaces_terms_or_labels():
    """A spec is parsed once for every pod that has it, in one namespace: what depends on the pod's
    namespace (affinity terms' default namespace) or on its labels (matchLabelKeys) stays its own."""
    spec = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}}}]}},
            "topologySpreadConstraints": [{"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "web"}},
                                           "matchLabelKeys": ["version"]}],
            "containers": [container(requests={"cpu": "250m"})]}

    def info(namespace: str, version: str) -> PodInfo:
        return PodInfo.from_object({"metadata": {"name": f"p-{version}", "namespace": namespace, "uid": version,
                                                 "labels": {"app": "web", "version": version}}, "spec": spec})

    a, b, other = info("team", "v1"), info("team", "v2"), info("other", "v1")
    assert a.requests is b.requests  # parsed once
    assert (a.name, a.uid, b.name, b.uid) == ("p-v1", "v1", "p-v2", "v2")
    assert [t.namespaces for t in (*a.anti_affinity, *other.anti_affinity)] == [frozenset({"team"}),
                                                                                 frozenset({"other"})]
    assert [c.selector.requirements[-1] for c in (*a.spread, *b.spread)] == [
        Requirement("version", "=", frozenset({"v1"})), Requirement("version", "=", frozenset({"v2"}))]
    a.node_selector["mine"] = "only"  # a pod's node selector is its own, as before
    assert info("team", "v3").node_selector == {}
    spec["containers"][0]["resources"]["requests"]["cpu"] = "500m"  # a changed spec is parsed anew
    assert info("team", "v1").requests.cpu == 500


def test_the_parsed_specs_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(podinfo, "SPEC_PARTS_LIMIT", 3)
    podinfo._SPEC_PARTS.clear()
    for i in range(10):
        got = PodInfo.from_object({"metadata": {"name": "p"}, "spec": {"priority": i}})
        assert got.priority == i and len(podinfo._SPEC_PARTS) <= 3


def test_a_spec_that_is_not_json_is_parsed_without_being_kept():
    podinfo._SPEC_PARTS.clear()
    spec = {"nodeSelector": {"disk": "ssd"}, "extra": object()}  # a caller's own object, not JSON
    assert PodInfo.from_object({"metadata": {"name": "p"}, "spec": spec}).node_selector == {"disk": "ssd"}
    assert podinfo._SPEC_PARTS == {}
