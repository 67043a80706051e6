import pytest

from corral.api.patch import PatchError, json_patch, merge_patch


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
