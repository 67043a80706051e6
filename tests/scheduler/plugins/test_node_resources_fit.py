import pytest

from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import run_filter, run_score


def small(name="n"):
    return make_node(name).capacity(cpu=2, memory="4Gi", pods=3, ephemeral_storage="10Gi")


@pytest.mark.parametrize(
    "pod, existing, reasons",
    [
        pytest.param(make_pod("p").requests(cpu="1", memory="1Gi"), [], [], id="a pod that fits an empty node passes"),
        pytest.param(make_pod("p").requests(cpu="2"), [], [], id="a pod that exactly fills the node passes"),
        pytest.param(make_pod("p").requests(cpu="2100m"), [], ["Insufficient cpu"], id="too much cpu is refused"),
        pytest.param(make_pod("p").requests(memory="5Gi"), [], ["Insufficient memory"], id="too much memory is refused"),
        pytest.param(make_pod("p").requests(cpu="3", memory="5Gi"), [], ["Insufficient cpu", "Insufficient memory"],
                     id="every short resource is named"),
        pytest.param(make_pod("p").requests(cpu="1"), [make_pod("e").requests(cpu="1500m").node("n")],
                     ["Insufficient cpu"], id="pods already on the node count"),
        pytest.param(make_pod("p"), [make_pod(f"e{i}").node("n") for i in range(3)], ["Too many pods"],
                     id="the pod count is a resource too"),
        pytest.param(make_pod("p").requests(**{"example.com/gpu": 1}), [], ["Insufficient example.com/gpu"],
                     id="an extended resource the node lacks is refused"),
        pytest.param(make_pod("p").requests(cpu="1"), [make_pod("done").requests(cpu="2").node("n").phase("Succeeded")],
                     [], id="finished pods free their resources"),
        pytest.param(make_pod("p").requests(cpu="1"), [make_pod("big").requests(memory="6Gi").node("n")], [],
                     id="a resource overcommitted by a bound pod does not refuse a pod that asks for none of it"),
        pytest.param(make_pod("p").requests(ephemeral_storage="11Gi"), [], ["Insufficient ephemeral-storage"],
                     id="ephemeral storage is a resource too"),
        pytest.param(make_pod("p").requests(ephemeral_storage="10Gi"), [], [], id="ephemeral storage that fits passes"),
    ],
)
def test_filter(pod, existing, reasons):
    assert run_filter("NodeResourcesFit", [small()], pod, existing) == {"n": reasons}


def test_extended_resources_fit_where_offered():
    node = make_node("gpu").capacity(cpu=4, memory="8Gi", pods=10, **{"example.com/gpu": 2})
    pod = make_pod("p").requests(**{"example.com/gpu": 2})
    assert run_filter("NodeResourcesFit", [node], pod) == {"gpu": []}


def test_least_allocated_prefers_the_emptier_node():
    nodes = [make_node("busy"), make_node("idle")]
    existing = [make_pod("e").requests(cpu="3", memory="24Gi").node("busy")]
    scores = run_score("NodeResourcesFit", nodes, make_pod("p").requests(cpu="1", memory="1Gi"), existing)
    assert scores["idle"] > scores["busy"]
    # Kubernetes' arithmetic: cpu (4000-1000)*100/4000 = 75, memory (32-1)*100/32 = 96 → (75+96)//2 = 85.
    assert scores["idle"] == 85


def test_most_allocated_prefers_the_fuller_node():
    nodes = [make_node("busy"), make_node("idle")]
    existing = [make_pod("e").requests(cpu="3", memory="24Gi").node("busy")]
    args = {"scoringStrategy": {"type": "MostAllocated"}}
    scores = run_score("NodeResourcesFit", nodes, make_pod("p").requests(cpu="500m", memory="1Gi"), existing, args=args)
    # busy: (3500*100/4000 = 87 + 25Gi*100/32Gi = 78) / 2 = 82; idle: (12 + 3) / 2 = 7.
    assert scores == {"busy": 82, "idle": 7}


def test_requested_to_capacity_ratio_follows_its_shape():
    nodes = [make_node("busy"), make_node("idle")]
    existing = [make_pod("e").requests(cpu="2", memory="16Gi").node("busy")]
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}}}
    scores = run_score("NodeResourcesFit", nodes, make_pod("p").requests(cpu="1", memory="1Gi"), existing, args=args)
    # Utilisation busy 75 / 53, idle 25 / 3, on the line 0 → 0, 100 → 100: round((75+53)/2) = 64, round(28/2) = 14.
    assert scores == {"busy": 64, "idle": 14}


def test_a_pod_requesting_nothing_is_scored_as_requesting_the_defaults():
    nodes = [make_node("n")]
    scores = run_score("NodeResourcesFit", nodes, make_pod("p"))
    # Non-zero defaults: 100m of 4 cpu → 97; 200Mi of 32Gi → 99; (97+99)//2 = 98.
    assert scores == {"n": 98.0}


def test_extended_resources_can_be_scored_when_configured():
    nodes = [make_node("busy").capacity(cpu=4, memory="8Gi", pods=10, **{"example.com/gpu": 4}),
             make_node("idle").capacity(cpu=4, memory="8Gi", pods=10, **{"example.com/gpu": 4})]
    existing = [make_pod("e").requests(**{"example.com/gpu": 3}).node("busy")]
    args = {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "example.com/gpu", "weight": 1}]}}
    scores = run_score("NodeResourcesFit", nodes, make_pod("p").requests(**{"example.com/gpu": 1}), existing, args=args)
    assert scores == {"busy": 0.0, "idle": 75.0}  # (4-4)*100/4 and (4-1)*100/4


@pytest.mark.parametrize("shape, message", [
    pytest.param(None, "shape: at least one point must be specified", id="no shape"),
    pytest.param([{"utilization": 0, "score": 0}, {"utilization": 101, "score": 10}],
                 "shape[1].utilization must be an integer from 0 to 100, not 101", id="utilisation over 100"),
    pytest.param([{"utilization": 50, "score": 0}, {"utilization": 50, "score": 10}],
                 "shape[1].utilization values must be sorted in increasing order", id="not increasing"),
    pytest.param([{"utilization": 0, "score": 11}], "shape[0].score must be an integer from 0 to 10, not 11",
                 id="score over 10"),
    pytest.param([{"utilization": 0, "score": -1}], "shape[0].score must be an integer from 0 to 10, not -1",
                 id="negative score"),
    pytest.param([{"utilization": "0", "score": 1}], "shape[0].utilization must be an integer from 0 to 100, not '0'",
                 id="utilisation as text"),
])
def test_a_requested_to_capacity_ratio_shape_kube_scheduler_refuses_is_refused(shape, message):
    ratio = {"shape": shape} if shape is not None else {}
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": ratio}}
    with pytest.raises(ValueError) as err:
        run_score("NodeResourcesFit", [small()], make_pod("p"), args=args)
    assert str(err.value) == "NodeResourcesFit: requestedToCapacityRatio." + message


@pytest.mark.parametrize("weight", [-1, 101])
def test_a_resource_weight_outside_1_to_100_is_refused(weight):
    args = {"scoringStrategy": {"resources": [{"name": "cpu", "weight": weight}]}}
    with pytest.raises(ValueError, match=r"^NodeResourcesFit: resource weight of cpu not in valid range \[1, 100\]$"):
        run_score("NodeResourcesFit", [small()], make_pod("p"), args=args)


def test_weights_at_both_ends_of_1_to_100_are_taken_and_weigh_the_score():
    """cpu 75 free of 100, memory 50 free of 100: weighted 100 to 1 the score is cpu's, almost."""
    args = {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 100}, {"name": "memory", "weight": 1}]}}
    pod = make_pod("p").requests(cpu="500m", memory="2Gi")
    assert run_score("NodeResourcesFit", [small()], pod, args=args, raw=True) == {"n": (75 * 100 + 50) // 101}
