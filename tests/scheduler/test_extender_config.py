"""Extender settings as an operator writes them: each accepted form read exactly (defaults
included), each mistake refused with one message naming the setting."""

from __future__ import annotations

import base64

import pytest

from corral.scheduler.extenders import Extenders
from corral.scheduler.extenders.config import ExtenderConfigError, parse_duration, parse_extenders
from corral.scheduler.framework.podinfo import PodInfo
from corral.testing.builders import make_pod


def one(**entry):
    (parsed,) = parse_extenders([{"urlPrefix": "http://ext:8888/sched/", **entry}], "s.yaml")
    return parsed


def refused(value, message: str) -> None:
    with pytest.raises(ExtenderConfigError) as err:
        parse_extenders(value, "s.yaml")
    assert str(err.value) == message


def test_the_defaults_of_an_entry_that_sets_only_its_url():
    e = one()
    assert (e.url_prefix, e.name) == ("http://ext:8888/sched", "http://ext:8888/sched")  # the trailing / dropped
    assert (e.filter_verb, e.prioritize_verb, e.bind_verb, e.preempt_verb) == ("", "", "", "")
    assert (e.weight, e.node_cache_capable, e.ignorable, e.timeout, e.tls, e.managed_resources) == (
        1, False, False, 30.0, None, ())


def test_every_setting_is_read():
    e = one(filterVerb="v1/filter", prioritizeVerb="score", bindVerb="bind", preemptVerb="preempt", weight=3,
            nodeCacheCapable=True, ignorable=True, httpTimeout="1s",
            managedResources=[{"name": "example.com/gpu", "ignoredByScheduler": True}, {"name": "example.com/fpga"}])
    assert (e.filter_verb, e.prioritize_verb, e.bind_verb, e.preempt_verb, e.weight) == (
        "v1/filter", "score", "bind", "preempt", 3)
    assert (e.node_cache_capable, e.ignorable, e.timeout) == (True, True, 1.0)
    assert e.managed_resources == (("example.com/gpu", True), ("example.com/fpga", False))


@pytest.mark.parametrize("value, seconds", [(1, 1.0), (0.5, 0.5), ("1s", 1.0), ("1500ms", 1.5), ("2m", 120.0),
                                             ("1h", 3600.0), ("0.25s", 0.25)])
def test_durations(value, seconds):
    assert parse_duration(value, "x") == seconds


@pytest.mark.parametrize("value", [0, -1, "0s", "5", "5 s", "1d", True, None, ["1s"]])
def test_what_is_no_duration(value):
    with pytest.raises(ExtenderConfigError) as err:
        parse_duration(value, "s.yaml: extenders[0].httpTimeout")
    assert str(err.value).startswith("s.yaml: extenders[0].httpTimeout: must be a positive duration")


def test_tls_over_https_defaults_to_verifying_and_reads_inline_pems(tmp_path):
    cert, key, ca = b"-----BEGIN CERTIFICATE-----\nA\n", b"-----BEGIN PRIVATE KEY-----\nB\n", b"-----CA-----\n"
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    e = one(urlPrefix="https://ext/sched", tlsConfig={"certData": b64(cert), "keyData": b64(key), "caData": b64(ca)})
    assert (e.tls.insecure, e.tls.server_name, e.tls.cert, e.tls.key, e.tls.ca) == (False, "", cert, key, ca)
    assert one(urlPrefix="https://ext/sched").tls is not None and one(urlPrefix="https://ext/sched").tls.insecure is False
    (tmp_path / "key.pem").write_bytes(key)
    e = one(urlPrefix="https://ext/sched", tlsConfig={"certData": b64(cert), "keyFile": str(tmp_path / "key.pem")})
    assert (e.tls.cert, e.tls.key) == (cert, key)


@pytest.mark.parametrize("entry, message", [
    pytest.param("http://x", "s.yaml: extenders[0]: must be a mapping", id="not a mapping"),
    pytest.param({"urlPrefix": "http://x", "weigth": 2},
                 "s.yaml: extenders[0]: unknown field 'weigth' (known: bindVerb, enableHTTPS, filterVerb, httpTimeout, "
                 "ignorable, managedResources, nodeCacheCapable, preemptVerb, prioritizeVerb, tlsConfig, urlPrefix, "
                 "weight)", id="a misspelt field, with the known ones"),
    pytest.param({"urlPrefix": "http://x", "filterVerb": "./filter"},
                 "s.yaml: extenders[0].filterVerb: must be a path segment such as 'filter', not './filter'",
                 id="a dot segment"),
    pytest.param({"urlPrefix": "http://x", "bindVerb": 7},
                 "s.yaml: extenders[0].bindVerb: must be a path segment such as 'filter', not 7", id="not a string"),
    pytest.param({"urlPrefix": "http://x", "prioritizeVerb": "p", "weight": "2"},
                 "s.yaml: extenders[0].weight: must be a positive integer when prioritizeVerb is set", id="weight a string"),
    pytest.param({"urlPrefix": "http://x", "prioritizeVerb": "p", "weight": True},
                 "s.yaml: extenders[0].weight: must be a positive integer when prioritizeVerb is set", id="weight a bool"),
    pytest.param({"urlPrefix": "http://x", "managedResources": [{"ignoredByScheduler": True}]},
                 "s.yaml: extenders[0].managedResources[0]: needs a name", id="a managed resource without a name"),
    pytest.param({"urlPrefix": "http://x", "managedResources": [{"name": ""}]},
                 "s.yaml: extenders[0].managedResources[0]: needs a name", id="an empty name"),
    pytest.param({"urlPrefix": "https://x", "tlsConfig": "insecure"},
                 "s.yaml: extenders[0].tlsConfig: must be a mapping", id="tls not a mapping"),
    pytest.param({"urlPrefix": "https://x", "tlsConfig": {"insecure": True, "cafile": "ca.pem"}},
                 "s.yaml: extenders[0].tlsConfig: unknown field 'cafile' (known: caData, caFile, certData, certFile, "
                 "insecure, keyData, keyFile, serverName)", id="a misspelt tls field, with the known ones"),
    pytest.param({"urlPrefix": "https://x", "tlsConfig": {"keyFile": "/nonexistent/key.pem"}},
                 "s.yaml: extenders[0].tlsConfig.keyFile: cannot read /nonexistent/key.pem: No such file or directory",
                 id="a key file that cannot be read"),
    pytest.param({"urlPrefix": "https://x", "tlsConfig": {"certData": "not base64!"}},
                 "s.yaml: extenders[0].tlsConfig.certData: not valid base64", id="certificate data that is not base64"),
])
def test_each_mistake_is_one_message_naming_the_setting(entry, message):
    refused([entry], message)


def test_only_one_extender_may_bind_and_extenders_is_a_list():
    refused([{"urlPrefix": "http://a", "bindVerb": "b"}, {"urlPrefix": "http://b", "bindVerb": "b"}],
            "s.yaml: extenders: only one extender may set bindVerb")
    refused({"urlPrefix": "http://a"}, "s.yaml: extenders: must be a list")
    assert parse_extenders(None, "s.yaml") == []


@pytest.mark.parametrize("resource", ["cpu", "memory", "ephemeral-storage", "example.com/gpu"])
def test_an_extender_managing_a_resource_is_asked_only_about_pods_that_request_it(resource):
    ext = Extenders(parse_extenders([{"urlPrefix": "http://x", "filterVerb": "f",
                                      "managedResources": [{"name": resource}]}], "s.yaml"), None)
    asking = make_pod("asks").obj
    asking["spec"]["containers"][0]["resources"] = {"requests": {resource: "1"}}
    assert ext.interested(PodInfo.from_object(asking), "filter_verb")
    assert not ext.interested(PodInfo.from_object(make_pod("plain").obj), "filter_verb")


def test_verbs_may_hold_capitals_and_the_url_loses_only_its_trailing_slash():
    e = one(urlPrefix="http://ext/SchedX/", filterVerb="Filter.v1", bindVerb="bind/Now")
    assert (e.url_prefix, e.name, e.filter_verb, e.bind_verb) == ("http://ext/SchedX", "http://ext/SchedX", "Filter.v1",
                                                                  "bind/Now")


def test_the_weight_of_an_extender_that_does_not_prioritize_is_not_read():
    assert one(weight="heavy").weight == 1  # as kube-scheduler, which checks it only with a prioritizeVerb
