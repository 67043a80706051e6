import copy
import re

import pytest

from corral.api.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from corral.api.resources import by_kind


def test_a_merge_patch_merges_objects_replaces_lists_and_deletes_nulls():
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2], "gone": True}
    assert merge_patch(target, {"a": {"b": 9}, "l": [3], "gone": None}) == {"a": {"b": 9, "c": 2}, "l": [3]}
    assert target["a"]["b"] == 1, "the target is not modified"


@pytest.mark.parametrize(
    "ops, expected",
    [
        pytest.param([{"op": "add", "path": "/x", "value": 1}], {"a": [1, 2], "x": 1}, id="add a key"),
        pytest.param([{"op": "add", "path": "/a/-", "value": 3}], {"a": [1, 2, 3]}, id="append to a list"),
        pytest.param([{"op": "add", "path": "/a/0", "value": 0}], {"a": [0, 1, 2]}, id="insert into a list"),
        pytest.param([{"op": "remove", "path": "/a/1"}], {"a": [1]}, id="remove a list item"),
        pytest.param([{"op": "replace", "path": "/a", "value": "z"}], {"a": "z"}, id="replace a value"),
        pytest.param([{"op": "move", "from": "/a", "path": "/b"}], {"b": [1, 2]}, id="move a value"),
        pytest.param([{"op": "copy", "from": "/a", "path": "/b"}], {"a": [1, 2], "b": [1, 2]}, id="copy a value"),
        pytest.param([{"op": "test", "path": "/a/0", "value": 1}], {"a": [1, 2]}, id="a passing test"),
        pytest.param([{"op": "add", "path": "/k~1v", "value": 1}], {"a": [1, 2], "k/v": 1}, id="escaped slash"),
    ],
)
def test_json_patch_operations(ops, expected):
    assert json_patch({"a": [1, 2]}, ops) == expected


@pytest.mark.parametrize(
    "ops",
    [
        pytest.param({"op": "add"}, id="not a list"),
        pytest.param([{"op": "remove", "path": "/missing"}], id="removing a missing key"),
        pytest.param([{"op": "replace", "path": "/missing", "value": 1}], id="replacing a missing key"),
        pytest.param([{"op": "test", "path": "/a", "value": 9}], id="a failing test"),
        pytest.param([{"op": "frobnicate", "path": "/a"}], id="an unknown operation"),
        pytest.param([{"op": "add", "path": "/a/9", "value": 1}], id="an index out of range"),
    ],
)
def test_bad_json_patches_fail_and_change_nothing(ops):
    target = {"a": [1, 2]}
    with pytest.raises(PatchError):
        json_patch(target, ops)
    assert target == {"a": [1, 2]}


POD = {
    "metadata": {"name": "web", "labels": {"app": "web"}, "finalizers": ["a"]},
    "spec": {
        "containers": [
            {"name": "web", "image": "nginx:1", "ports": [{"containerPort": 80, "name": "http"}],
             "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "log", "image": "busybox", "args": ["-v", "-x"]},
        ],
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
}
POD_KEYS = by_kind("Pod").merge_keys


def smp(patch: dict) -> dict:
    return strategic_merge_patch(POD, patch, POD_KEYS)


@pytest.mark.parametrize("patch, check", [
    pytest.param({"spec": {"containers": [{"name": "web", "image": "nginx:2"}]}},
                 lambda p: [c["image"] for c in p["spec"]["containers"]] == ["nginx:2", "busybox"]
                 and p["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "name": "http"}],
                 id="a container is patched by its name; the others and its other fields stay"),
    pytest.param({"spec": {"containers": [{"name": "side", "image": "envoy"}]}},
                 lambda p: [c["name"] for c in p["spec"]["containers"]] == ["web", "log", "side"],
                 id="an item with a new key is appended"),
    pytest.param({"spec": {"containers": [{"name": "log", "$patch": "delete"}]}},
                 lambda p: [c["name"] for c in p["spec"]["containers"]] == ["web"],
                 id="$patch: delete removes the item with that key"),
    pytest.param({"spec": {"containers": [{"name": "web", "env": [{"name": "B", "value": "3"},
                                                                   {"name": "C", "value": "4"}]}]}},
                 lambda p: p["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"},
                                                                 {"name": "C", "value": "4"}],
                 id="nested lists merge by their own keys (env by name)"),
    pytest.param({"spec": {"containers": [{"name": "web", "ports": [{"containerPort": 443}]}]}},
                 lambda p: [x["containerPort"] for x in p["spec"]["containers"][0]["ports"]] == [80, 443],
                 id="ports merge by containerPort"),
    pytest.param({"spec": {"containers": [{"name": "log", "args": ["-q"]}]}},
                 lambda p: p["spec"]["containers"][1]["args"] == ["-q"],
                 id="a list without a merge key is replaced"),
    pytest.param({"spec": {"tolerations": [{"key": "z", "operator": "Exists"}]}},
                 lambda p: p["spec"]["tolerations"] == [{"key": "z", "operator": "Exists"}],
                 id="tolerations are replaced, as Kubernetes declares them"),
    pytest.param({"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "x"}]}},
                 lambda p: p["spec"]["containers"] == [{"name": "only", "image": "x"}],
                 id="$patch: replace in a list replaces it whole"),
    pytest.param({"metadata": {"labels": {"$patch": "replace", "new": "1"}}},
                 lambda p: p["metadata"]["labels"] == {"new": "1"}, id="$patch: replace in a map replaces it"),
    pytest.param({"spec": {"volumes": [{"name": "data", "$patch": "delete"}]}},
                 lambda p: p["spec"]["volumes"] == [], id="volumes merge by name"),
    pytest.param({"metadata": {"labels": {"$patch": "delete"}}}, lambda p: "labels" not in p["metadata"],
                 id="$patch: delete in a map removes it"),
    pytest.param({"metadata": {"finalizers": ["b", "a"]}}, lambda p: p["metadata"]["finalizers"] == ["a", "b"],
                 id="a list of values with the merge strategy gains the new ones"),
    pytest.param({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
                 lambda p: p["metadata"]["finalizers"] == [], id="$deleteFromPrimitiveList removes values"),
    pytest.param({"spec": {"$setElementOrder/containers": [{"name": "log"}, {"name": "web"}],
                           "containers": [{"name": "web", "image": "nginx:3"}]}},
                 lambda p: [(c["name"], c["image"]) for c in p["spec"]["containers"]] == [("log", "busybox"),
                                                                                          ("web", "nginx:3")],
                 id="$setElementOrder orders the merged list"),
    pytest.param({"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"],
                                        "hostPath": {"path": "/x"}}]}},
                 lambda p: p["spec"]["volumes"] == [{"name": "data", "hostPath": {"path": "/x"}}],
                 id="$retainKeys drops the keys it does not list (a volume's old source)"),
    pytest.param({"metadata": {"labels": {"app": None}}}, lambda p: p["metadata"]["labels"] == {},
                 id="null deletes, as in a merge patch"),
])
def test_a_strategic_merge_patch_merges_lists_by_their_keys_and_follows_its_directives(patch, check):
    before = copy.deepcopy(POD)
    assert check(smp(patch))
    assert POD == before, "the target is not modified"


@pytest.mark.parametrize("patch, message", [
    pytest.param({"spec": {"containers": [{"image": "x"}]}}, "has no 'name'", id="an item without its merge key"),
    pytest.param({"spec": {"containers": ["web"]}}, "must be an object", id="an item that is not an object"),
    pytest.param({"$patch": "delete"}, "cannot delete the whole object", id="deleting the object"),
    pytest.param({"metadata": {"$patch": "sideways"}}, "unknown $patch directive", id="an unknown $patch"),
    pytest.param({"metadata": {"$frobnicate": 1}}, "unknown directive", id="an unknown directive"),
    pytest.param({"spec": {"tolerations": [{"$patch": "delete", "key": "k"}]}}, "cannot be used here",
                 id="a directive in a list that is replaced"),
    pytest.param({"metadata": {"finalizers": [{"a": 1}]}}, "a list of values", id="an object in a list of values"),
    pytest.param({"spec": {"volumes": [{"name": "data", "$retainKeys": ["name"], "hostPath": {}}]}},
                 "not in $retainKeys", id="a patched key outside $retainKeys"),
])
def test_bad_strategic_merge_patches_are_errors_naming_the_field(patch, message):
    with pytest.raises(PatchError, match=re.escape(message)):
        smp(patch)
