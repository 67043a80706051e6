from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import run_score


def test_the_node_where_cpu_and_memory_stay_balanced_scores_higher():
    nodes = [make_node("cpu-heavy"), make_node("balanced")]
    existing = [make_pod("e1").requests(cpu="3", memory="1Gi").node("cpu-heavy"),
                make_pod("e2").requests(cpu="1", memory="8Gi").node("balanced")]
    scores = run_score("NodeResourcesBalancedAllocation", nodes, make_pod("p").requests(cpu="1", memory="8Gi"), existing)
    assert scores["balanced"] > scores["cpu-heavy"]


def test_equal_fractions_score_100():
    scores = run_score("NodeResourcesBalancedAllocation", [make_node("n")],
                       make_pod("p").requests(cpu="2", memory="16Gi"))
    assert scores == {"n": 100.0}
