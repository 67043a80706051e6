"""What the REST layer checks of a write: validation's causes, then the fields corral keeps as
written; a pod spec's verdict kept by its JSON."""

import copy
import datetime

import pytest

from corral.api import write_check
from corral.api.validation import validate
from corral.api.write_check import check_write, unknown_fields
from tests.api.test_validation import POD, container, fields_of, pod


def write_fields(obj) -> set[str]:
    return {c.field for c in check_write(POD, obj)[0]}


def test_a_pod_spec_checked_once_gives_its_causes_to_every_pod_that_has_it(monkeypatch):
    """Pods of one spec share its checks' verdict (kept by the spec's JSON), never another spec's:
    a spec changed in one field is checked anew, and so is one that only encodes alike."""
    write_check._POD_SPECS.clear()
    bad = pod(restartPolicy="Sometimes")
    assert [c.field for c in check_write(POD, bad)[0]] == ["spec.restartPolicy"]
    renamed = copy.deepcopy(bad)
    renamed["metadata"]["name"] = "Not_A_Name"  # the metadata is checked for every pod
    assert write_fields(renamed) == {"metadata.name", "spec.restartPolicy"}
    assert len(write_check._POD_SPECS) == 1
    assert write_fields(pod(restartPolicy="Always")) == set()
    assert write_fields(pod(restartPolicy="Sometimes")) == {"spec.restartPolicy"}
    # A YAML body's date or number key encodes as the JSON string checked a moment ago, but is refused.
    assert write_fields(pod(containers=[container(image="2024-01-01")])) == set()
    assert write_fields(pod(containers=[container(image=datetime.date(2024, 1, 1))])) == {"spec.containers[0].image"}
    assert write_fields(pod(nodeSelector={"1": "a"})) == set()
    number_key = pod(nodeSelector={1: "a"})
    assert write_fields(number_key) == fields_of(POD, number_key) != set()
    assert write_fields(pod(containers=[container(image="2024-01-01")])) == set()
    monkeypatch.setattr(write_check, "POD_SPECS_LIMIT", 3)
    for grace in range(10):
        assert write_fields(pod(terminationGracePeriodSeconds=grace)) == set()
        assert len(write_check._POD_SPECS) <= 3
    assert write_fields(pod(terminationGracePeriodSeconds=-1)) == {"spec.terminationGracePeriodSeconds"}


@pytest.mark.parametrize("obj", [
    pod(),
    {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "Web_1", "labels": {"bad key!": "v"}},
     "spec": pod(restartPolicy="Sometimes")["spec"]},
    {"metadata": {"name": "web", "labels": "not a map"}, "spec": pod()["spec"]},
    {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": 3}]}},
    {"spec": {"containers": "no"}, "metadata": {"name": 7}},
    {"metadata": {"name": 7}, "spec": {"containers": "no"}},
    {"metadata": {"name": "web"}},
    {"metadata": {"name": "web"}, "spec": "not a map"},
    {"apiVersion": "v1", "extra": 1, "metadata": {"name": "web", "managedFields": []},
     "spec": pod(containers=[container(securityContext={})], hostUsers=False)["spec"],
     "status": {"phase": "Pending", "hostIPs": []}, "zzz": {}},
    {"spec": pod(containers=[container(securityContext={})])["spec"], "metadata": {"name": "web", "managedFields": []}},
], ids=["valid", "metadata and spec causes", "metadata type", "spec type", "both types, spec first", "both types, metadata first", "no spec",
        "spec not a map", "unknown fields around the spec", "unknown fields, spec first"])
def test_checking_a_write_finds_what_validation_and_the_unknown_field_walk_find(obj):
    """check_write, with or without the spec's verdict kept, is validate() then unknown_fields()."""
    causes = validate(POD, obj)[1]
    expected = (causes, [] if causes else unknown_fields(POD, obj))
    write_check._POD_SPECS.clear()
    assert check_write(POD, obj) == expected
    assert check_write(POD, copy.deepcopy(obj)) == expected  # the spec's verdict kept


def test_unknown_fields_are_listed_by_path_and_known_ones_are_not():
    obj = pod(containers=[container(securityContext={}), container(name="d")],
              volumes=[{"name": "v", "emptyDir": {}}, {"name": "data", "persistentVolumeClaim": {"claimName": "c"}}])
    obj["metadata"]["managedFields"] = []
    assert unknown_fields(POD, obj) == [
        "metadata.managedFields", "spec.containers[0].securityContext", "spec.volumes[1].persistentVolumeClaim",
    ]
