import pytest

from corral.agent.node_info import (FlagError, allocatable, default_address, host_capacity, node_object, parse_pairs,
                                   parse_taints)
from corral.api.quantity import to_milli, to_units


def test_host_capacity_is_read_from_the_machine(tmp_path):
    cap = host_capacity(str(tmp_path))
    assert to_milli(cap["cpu"]) >= 1000 and to_units(cap["memory"]) > 0 and cap["pods"] == "110"
    assert to_units(cap["ephemeral-storage"]) > 0


def test_allocatable_is_capacity_minus_reserved_and_never_negative():
    out = allocatable({"cpu": "4", "memory": "8Gi", "pods": "110"}, {"cpu": "500m", "memory": "9Gi"})
    assert out == {"cpu": "3500m", "memory": "0", "pods": "110"}


@pytest.mark.parametrize(
    "text, expected",
    [
        pytest.param("gpu=yes:NoSchedule", [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}], id="key, value and effect"),
        pytest.param("spot:PreferNoSchedule,dedicated=db:NoExecute",
                     [{"key": "spot", "value": "", "effect": "PreferNoSchedule"},
                      {"key": "dedicated", "value": "db", "effect": "NoExecute"}], id="several, value optional"),
    ],
)
def test_taint_flags_parse(text, expected):
    assert parse_taints(text) == expected


@pytest.mark.parametrize("text", ["gpu=yes", "gpu:Sometimes"])
def test_bad_taint_flags_name_the_flag(text):
    with pytest.raises(FlagError, match="--taints"):
        parse_taints(text)


def test_pair_flags_parse_and_bad_ones_name_the_flag():
    assert parse_pairs("zone=a, rack=7", "--labels") == {"zone": "a", "rack": "7"}
    with pytest.raises(FlagError, match="--labels: expected KEY=VALUE"):
        parse_pairs("zone", "--labels")


def test_the_node_object_carries_what_the_scheduler_and_the_server_need():
    node = node_object("n1", capacity={"cpu": "2", "memory": "4Gi", "pods": "110"}, reserved={"cpu": "100m"},
                       labels={"zone": "a"}, taints=[], address="127.0.0.1", port=12345, runtime_version="x")
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "n1" and node["metadata"]["labels"]["zone"] == "a"
    assert node["status"]["allocatable"]["cpu"] == "1900m"
    assert node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 12345
    assert {"type": "InternalIP", "address": "127.0.0.1"} in node["status"]["addresses"]


def test_the_default_address_is_the_one_the_server_reaches_this_machine_on():
    from corral.server.authn.certificates import primary_address

    # Toward a server on loopback: loopback (what `make up` needs), not what the host name resolves to.
    assert default_address(toward="127.0.0.1") == "127.0.0.1"
    primary = primary_address()
    if primary:  # toward this machine's own address on the network: that address (routed through lo)
        assert default_address(toward=primary) == primary
        # toward a server beyond the LAN: the address of the route there, never loopback
        assert default_address(toward="203.0.113.7") == primary
    assert default_address(toward="no-such-host.invalid")  # unresolvable: the host name's address
