import pytest

from corral.api.selectors import (
    SelectorError,
    label_selector_from_struct,
    parse_field_selector,
    parse_label_selector,
)

LABELS = {"app": "web", "tier": "front", "env": "prod"}


@pytest.mark.parametrize(
    "selector, matches",
    [
        pytest.param("", True, id="an empty selector selects everything"),
        pytest.param("app=web", True, id="equality"),
        pytest.param("app==web", True, id="double equals is equality"),
        pytest.param("app!=web", False, id="inequality"),
        pytest.param("missing!=x", True, id="inequality matches objects without the label"),
        pytest.param("app in (web, db)", True, id="set membership"),
        pytest.param("app notin (web)", False, id="set exclusion"),
        pytest.param("missing notin (x)", True, id="set exclusion matches objects without the label"),
        pytest.param("tier", True, id="existence"),
        pytest.param("!tier", False, id="non-existence"),
        pytest.param("app=web,env in (prod,staging),!debug", True, id="all requirements must hold"),
        pytest.param("app=web,env=dev", False, id="one failing requirement fails the selector"),
    ],
)
def test_label_selectors_match_as_in_kubernetes(selector, matches):
    assert parse_label_selector(selector).matches(LABELS) is matches


def test_an_empty_value_matches_the_empty_label_value():
    assert parse_label_selector("app=").matches({"app": ""})
    assert not parse_label_selector("app=").matches({"app": "web"})


@pytest.mark.parametrize("selector", ["=web", "app in web", "a b", "app in (x"])
def test_malformed_label_selectors_are_refused(selector):
    with pytest.raises(SelectorError):
        parse_label_selector(selector)


def test_field_selectors_take_only_supported_fields():
    pod = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}
    sel = parse_field_selector("spec.nodeName=n1,status.phase!=Pending", ["spec.nodeName", "status.phase"])
    assert sel.matches(pod)
    assert sel.exact("spec.nodeName") == "n1"
    assert parse_field_selector("spec.nodeName=", ["spec.nodeName"]).matches({"spec": {}})
    with pytest.raises(SelectorError, match="field label not supported"):
        parse_field_selector("spec.hostname=x", ["spec.nodeName"])


def test_struct_label_selectors_combine_match_labels_and_expressions():
    sel = label_selector_from_struct({"matchLabels": {"app": "web"},
                                      "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]})
    assert sel.matches(LABELS)
    assert not sel.matches({"app": "web", "env": "dev"})
