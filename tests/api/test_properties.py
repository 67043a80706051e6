"""Property tests for what clients send: decoding, quantities, selectors and patches. Whatever the
input, the answer is a value or the module's own error (which the server turns into a 4xx), never
another exception (a 500), never a long stall, and a rejected patch leaves its target as it was."""

from __future__ import annotations

import copy
import time
from fractions import Fraction

from hypothesis import example, given, settings
from hypothesis import strategies as st

from corral.api.wire.decoding import DecodeError, decode_json, decode_yaml
from corral.api.patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from corral.api.quantity import QuantityError, parse_quantity
from corral.api.resources import by_kind
from corral.api.selectors import SelectorError, parse_field_selector, parse_label_selector

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20)
# Text near the grammar as well as far from it: what a fuzzer needs to reach the parsers' corners.
quantity_text = st.text(alphabet="0123456789.+-eEinumkKMGTPi ", max_size=24) | st.text(max_size=12)
selector_text = st.text(alphabet="abc=!,() .-_/in notin", max_size=30) | st.text(max_size=16)


@given(st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_any_bytes_decode_to_a_value_or_a_decode_error(raw):
    for decode in (decode_json, decode_yaml):
        try:
            decode(raw)
        except DecodeError:
            pass


@given(st.one_of(quantity_text, st.integers(), st.floats(), st.booleans(), st.none()))
@example("1" * 5000)  # past Python's 4,300-digit limit on int(): a ValueError, i.e. a 500, before
@example("1e" + "0" * 5000)
def test_any_quantity_parses_exactly_or_is_a_quantity_error_at_once(value):
    start = time.perf_counter()
    try:
        parsed = parse_quantity(value)
    except QuantityError:
        pass
    else:
        assert isinstance(parsed, Fraction)
    assert time.perf_counter() - start < 0.05


@settings(max_examples=50)
@given(st.integers(min_value=-10**6, max_value=10**6), st.sampled_from(["e", "E"]))
def test_a_quantity_with_a_huge_exponent_is_refused_at_once(exponent, e):
    start = time.perf_counter()
    try:
        parse_quantity(f"1{e}{exponent}")
    except QuantityError:
        assert abs(exponent) > 64
    else:
        assert abs(exponent) <= 64
    assert time.perf_counter() - start < 0.05


@given(selector_text, st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=4))
def test_any_label_selector_parses_or_is_a_selector_error_and_matching_never_fails(text, labels):
    try:
        selector = parse_label_selector(text)
    except SelectorError:
        return
    assert selector.matches(labels) in (True, False)


@given(selector_text, json_values)
def test_any_field_selector_parses_or_is_a_selector_error_and_matching_never_fails(text, obj):
    try:
        selector = parse_field_selector(text, ("spec.nodeName", "status.phase"))
    except SelectorError:
        return
    assert selector.matches(obj if isinstance(obj, dict) else {"spec": obj}) in (True, False)


TARGET = {"metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["f"]},
          "spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}}
ops = st.fixed_dictionaries({"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "x"]),
                             "path": st.sampled_from(["", "/metadata", "/metadata/labels/a", "/spec/containers/0",
                                                      "/spec/containers/-", "/nope/x", "/spec/containers/9"])},
                            optional={"value": json_values, "from": st.sampled_from(["/metadata", "/spec", "/x"])})


@given(st.one_of(json_values, st.lists(ops, max_size=5)))
def test_any_patch_applies_or_is_a_patch_error_and_never_changes_its_target(patch):
    target = copy.deepcopy(TARGET)
    for apply in (lambda t, p: json_patch(t, p), lambda t, p: merge_patch(t, p) if isinstance(p, dict) else None,
                  lambda t, p: strategic_merge_patch(t, p, by_kind("Pod").merge_keys)):
        try:
            apply(target, patch)
        except PatchError:
            pass
        assert target == TARGET


strategic = st.recursive(
    st.none() | st.integers() | st.text(max_size=4)
    | st.sampled_from([{"$patch": "delete"}, {"$patch": "replace"}, {"$patch": "merge"}, {"$patch": "x"}]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["metadata", "spec", "containers", "name", "image", "ports", "containerPort", "labels",
                         "finalizers", "$retainKeys", "$setElementOrder/containers",
                         "$deleteFromPrimitiveList/finalizers", "$bogus"]), inner, max_size=4),
    max_leaves=15)


@given(strategic)
def test_strategic_merge_patches_near_the_directives_apply_or_are_patch_errors(patch):
    target = copy.deepcopy(TARGET)
    try:
        strategic_merge_patch(target, patch, by_kind("Pod").merge_keys)
    except PatchError:
        pass
    assert target == TARGET
