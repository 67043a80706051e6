import pytest

from corral.scheduler.plugins.image_locality import image_names
from corral.testing.builders import make_node, make_pod
from corral.testing.scheduler_harness import run_score

MB = 1024 * 1024


def test_a_node_holding_a_large_image_scores_higher():
    nodes = [make_node("has").image("registry.local/app:1", 800 * MB), make_node("lacks")]
    scores = run_score("ImageLocality", nodes, make_pod("p").image("registry.local/app:1"))
    assert scores["has"] > scores["lacks"] == 0.0


def test_an_image_no_node_holds_skips_image_locality():
    assert run_score("ImageLocality", [make_node("n")], make_pod("p").image("registry.local/other:1")) == {}


def test_an_untagged_image_matches_the_latest_tag():
    nodes = [make_node("has").image("registry.local/app:latest", 800 * MB), make_node("lacks")]
    assert run_score("ImageLocality", nodes, make_pod("p").image("registry.local/app"))["has"] > 0


def test_the_faster_link_pulls_the_missing_image_sooner():
    nodes = [make_node("holder").image("registry.local/app:1", 500 * MB).download("100Mbps"),
             make_node("fast").download("1Gbps"), make_node("slow").download("50Mbps"), make_node("unmeasured")]
    scores = run_score("NetworkThroughput", nodes, make_pod("p").image("registry.local/app:1"))
    assert scores["holder"] == 100.0  # nothing to pull
    assert scores["fast"] > scores["slow"]
    assert scores["unmeasured"] == 50.0  # neutral


async def test_a_slow_link_never_keeps_a_pod_off_the_only_node_that_can_take_it():
    from corral.testing.scheduler_harness import Harness

    h = Harness()
    # The holder tells the image's size but is cordoned; only the 1 kbps node can take the pod.
    h.add_node(make_node("holder").image("registry.local/app:1", 500 * MB).download("1Gbps").unschedulable())
    h.add_node(make_node("slow").download("1kbps"))
    h.add_pod(make_pod("p").image("registry.local/app:1"))
    await h.run()
    assert h.placements() == {"default/p": "slow"}
    await h.scheduler.events.stop()


def test_network_throughput_scores_are_the_seconds_to_pull_what_is_missing_then_kubernetes_style_0_to_100():
    nodes = [make_node("holder").image("registry.local/app:1", 500 * MB).download("100Mbps"),
             make_node("fast").download("1Gbps"), make_node("slow").download("50Mbps"), make_node("unmeasured")]
    pod = make_pod("p").image("registry.local/app:1")
    raw = run_score("NetworkThroughput", nodes, pod, raw=True)
    bits = 500 * MB * 8
    assert {n: raw[n] for n in ("holder", "fast", "slow")} == {
        "holder": 0.0, "fast": pytest.approx(bits / 1e9), "slow": pytest.approx(bits / 50e6)}
    # 100 × (1 − seconds / slowest), rounded down; unmeasured links score the neutral 50.
    assert run_score("NetworkThroughput", nodes, pod) == {"holder": 100.0, "fast": 95.0, "slow": 0.0,
                                                          "unmeasured": 50.0}
    # Two images: the missing bits add up.
    nodes[0].image("registry.local/lib:1", 100 * MB)
    two = make_pod("p").image("registry.local/app:1").container("lib", "registry.local/lib:1")
    assert run_score("NetworkThroughput", nodes, two, raw=True)["fast"] == pytest.approx(600 * MB * 8 / 1e9)


def test_network_throughput_when_every_node_holds_the_image_or_no_node_knows_its_size():
    nodes = [make_node("a").image("registry.local/app:1", 500 * MB).download("1Gbps"),
             make_node("b").image("registry.local/app:1", 500 * MB).download("50Mbps")]
    assert run_score("NetworkThroughput", nodes, make_pod("p").image("registry.local/app:1")) == {"a": 100.0,
                                                                                                 "b": 100.0}
    assert run_score("NetworkThroughput", nodes, make_pod("p").image("registry.local/unknown:1")) == {}


def test_network_throughput_counts_an_image_of_a_single_byte():
    # The smallest size a node can report still has to be pulled: 8 bits over each node's link.
    nodes = [make_node("holder").image("registry.local/tiny:1", 1).download("1Gbps"),
             make_node("lacks").download("1Gbps")]
    pod = make_pod("p").image("registry.local/tiny:1")
    assert run_score("NetworkThroughput", nodes, pod, raw=True) == {"holder": 0.0, "lacks": pytest.approx(8 / 1e9)}
    assert run_score("NetworkThroughput", nodes, pod) == {"holder": 100.0, "lacks": 0.0}


@pytest.mark.parametrize("image, names", [
    ("nginx", ("nginx", "nginx:latest")),
    ("nginx:1.25", ("nginx:1.25",)),
    ("app@sha256:abc", ("app@sha256:abc",)),
    ("registry:5000/team/app", ("registry:5000/team/app", "registry:5000/team/app:latest")),
    ("registry:5000/app:2", ("registry:5000/app:2",)),
], ids=["an untagged image is also :latest", "a tag is exact", "a digest is exact",
        "a registry's port is not a tag", "a tag after a registry's port is exact"])
def test_the_names_a_node_may_list_an_image_under(image, names):
    assert image_names(image) == names


def test_a_node_listing_the_image_under_either_name_holds_it():
    nodes = [make_node("plain").image("registry.local/app", 800 * MB),
             make_node("latest").image("registry.local/app:latest", 800 * MB), make_node("none")]
    scores = run_score("ImageLocality", nodes, make_pod("p").image("registry.local/app"))
    assert scores["plain"] == scores["latest"] > 0 == scores["none"]


def test_an_image_no_node_holds_is_skipped_even_where_nodes_report_other_images():
    nodes = [make_node("n").image("registry.local/app:1", 800 * MB)]
    assert run_score("ImageLocality", nodes, make_pod("p").image("registry.local/other:1")) == {}


def test_every_container_counts_though_an_earlier_ones_image_is_nowhere():
    nodes = [make_node("has").image("registry.local/app:1", 800 * MB), make_node("lacks")]
    pod = make_pod("p").image("registry.local/nowhere:1").container("second", "registry.local/app:1")
    assert run_score("ImageLocality", nodes, pod)["has"] > 0


def test_the_score_stops_at_100_however_large_the_images():
    nodes = [make_node("a").image("registry.local/huge:1", 5000 * MB), make_node("b").image("registry.local/huge:1",
                                                                                            5000 * MB)]
    assert run_score("ImageLocality", nodes, make_pod("p").image("registry.local/huge:1")) == {"a": 100.0, "b": 100.0}
