import copy

import pytest

from corral.api.defaults import apply_create_defaults, qos_class
from corral.api.resources import by_kind
from corral.api.validation import validate

POD = by_kind("Pod")
NODE = by_kind("Node")


def pod(**spec) -> dict:
    base = {"metadata": {"name": "web"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    base["spec"].update(spec)
    return base


def container(**fields) -> dict:
    return {"name": "c", "image": "busybox", **fields}


def fields_of(resource, obj) -> set[str]:
    _, causes = validate(resource, obj)
    return {c.field for c in causes}


@pytest.mark.parametrize(
    "obj, bad_fields",
    [
        pytest.param(pod(), set(), id="a minimal pod is valid"),
        pytest.param({"metadata": {"name": "Web_1"}, "spec": pod()["spec"]}, {"metadata.name"},
                     id="names must be DNS-1123 subdomains"),
        pytest.param({"metadata": {"generateName": "web-"}, "spec": pod()["spec"]}, set(),
                     id="generateName stands in for a name"),
        pytest.param({"metadata": {"name": "web"}}, {"spec"}, id="a pod needs a spec"),
        pytest.param(pod(containers=[]), {"spec.containers"}, id="a pod needs containers"),
        pytest.param(pod(containers=[container(), container()]), {"spec.containers[1].name"},
                     id="container names are unique"),
        pytest.param(pod(containers=[{"name": "c"}]), {"spec.containers[0].image"}, id="images are required"),
        pytest.param(pod(containers=[container(ports=[{"containerPort": 0}, {"containerPort": 80, "hostPort": 70000}])]),
                     {"spec.containers[0].ports[0].containerPort", "spec.containers[0].ports[1].hostPort"},
                     id="ports must be in range"),
        pytest.param(pod(containers=[container(ports=[{"containerPort": 80, "protocol": "HTTP"}])]),
                     {"spec.containers[0].ports[0].protocol"}, id="protocols are TCP, UDP or SCTP"),
        pytest.param(pod(containers=[container(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})]),
                     {"spec.containers[0].resources.requests[cpu]"}, id="requests may not exceed limits"),
        pytest.param(pod(containers=[container(resources={"requests": {"memory": "lots"}})]),
                     {"spec.containers[0].resources.requests[memory]"}, id="quantities must parse"),
        pytest.param(pod(containers=[container(resources={"requests": {"cpu": "-1"}})]),
                     {"spec.containers[0].resources.requests[cpu]"}, id="quantities may not be negative"),
        pytest.param(pod(restartPolicy="Sometimes"), {"spec.restartPolicy"}, id="restart policies are enumerated"),
        pytest.param({"metadata": {"name": "web", "labels": {"bad key!": "v", "ok": "bad value!"}},
                      "spec": pod()["spec"]}, {"metadata.labels", "metadata.labels[ok]"},
                     id="label keys and values are checked"),
        pytest.param(pod(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
                     {"spec.tolerations[0].operator"}, id="an Exists toleration has no value"),
        pytest.param(pod(tolerations=[{"operator": "Equal", "value": "v"}]), {"spec.tolerations[0].operator"},
                     id="a toleration without a key must be Exists"),
        pytest.param(pod(tolerations=[{"key": "k", "effect": "Sometimes"}]), {"spec.tolerations[0].effect"},
                     id="toleration effects are enumerated"),
        pytest.param(pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}}}),
            {"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
             ".matchExpressions[0].operator"}, id="node selector operators are enumerated"),
        pytest.param(pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "cpus", "operator": "Gt", "values": ["x"]}]}]}}}),
            {"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
             ".matchExpressions[0].values"}, id="Gt takes one integer"),
        pytest.param(pod(affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "web"}}}]}}),
            {"spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"},
            id="pod affinity terms need a topology key"),
        pytest.param(pod(topologySpreadConstraints=[{"maxSkew": 0, "topologyKey": "zone",
                                                     "whenUnsatisfiable": "Maybe"}]),
                     {"spec.topologySpreadConstraints[0].maxSkew",
                      "spec.topologySpreadConstraints[0].whenUnsatisfiable"},
                     id="spread constraints need a positive skew and a known policy"),
        pytest.param(pod(containers=[container(ports=[{"containerPort": "80"}])]),
                     {"spec.containers[0].ports[0].containerPort"}, id="a wrong type is reported at its path"),
    ],
)
def test_pod_validation_names_every_bad_field(obj, bad_fields):
    assert fields_of(POD, obj) == bad_fields


@pytest.mark.parametrize(
    "taints, bad_fields",
    [
        pytest.param([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}], set(), id="a valid taint"),
        pytest.param([{"key": "k", "effect": "Sometimes"}], {"spec.taints[0].effect"}, id="effects are enumerated"),
        pytest.param([{"effect": "NoSchedule"}], {"spec.taints[0].key"}, id="taints need a key"),
        pytest.param([{"key": "k", "effect": "NoSchedule"}] * 2, {"spec.taints[1]"},
                     id="taints are unique by key and effect"),
    ],
)
def test_node_taints_are_validated(taints, bad_fields):
    assert fields_of(NODE, {"metadata": {"name": "n"}, "spec": {"taints": taints}}) == bad_fields


OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "5b1d4c6e-0000-4000-8000-000000000001"}


@pytest.mark.parametrize("refs, finalizers, messages", [
    pytest.param([OWNER, {**OWNER, "apiVersion": "v1", "kind": "ConfigMap", "controller": False}],
                 ["example.com/keep", "orphan"], [], id="complete references and qualified finalizers are valid"),
    pytest.param([{}], None, [
        'metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty',
        'metadata.ownerReferences.kind: Invalid value: "": kind must not be empty',
        'metadata.ownerReferences.name: Invalid value: "": name must not be empty',
        'metadata.ownerReferences.uid: Invalid value: "": uid must not be empty'], id="a reference names its owner"),
    pytest.param([{**OWNER, "apiVersion": "apps/"}, {**OWNER, "apiVersion": "a/b/c"}], None, [
        'metadata.ownerReferences.apiVersion: Invalid value: "apps/": version must not be empty',
        'metadata.ownerReferences.apiVersion: Invalid value: "a/b/c": version must not be empty'],
                 id="an apiVersion has a version"),
    pytest.param([{**OWNER, "controller": True}, {**OWNER, "kind": "Job", "name": "j", "controller": True}], None,
                 ['metadata.ownerReferences: Invalid value: "ReplicaSet/web": Only one reference can have Controller '
                  'set to true. Found "true" in references for ReplicaSet/web and Job/j'], id="one controller"),
    pytest.param(None, ["bad finalizer!"], ['metadata.finalizers: Invalid value: "bad finalizer!": name part must '
                                            "consist of alphanumeric characters, '-', '_' or '.', and must start and "
                                            "end with an alphanumeric character (e.g. 'MyName', or 'my.name', or "
                                            "'123-abc')"],
                 id="finalizers are qualified names"),
])
def test_owner_references_and_finalizers_are_validated_as_kubernetes_does(refs, finalizers, messages):
    obj = pod()
    obj["metadata"].update({"ownerReferences": refs, "finalizers": finalizers})
    _, causes = validate(POD, obj)
    assert [str(c) for c in causes] == messages


def test_create_defaults_fill_what_kubernetes_users_expect():
    obj = pod(containers=[container(image="busybox:1.36", ports=[{"containerPort": 80}])],
              tolerations=[{"key": "k"}])
    apply_create_defaults(POD, obj, "team")
    meta, spec = obj["metadata"], obj["spec"]
    assert meta["namespace"] == "team" and meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert spec["schedulerName"] == "default-scheduler" and spec["restartPolicy"] == "Always"
    assert spec["terminationGracePeriodSeconds"] == 30
    assert spec["containers"][0]["imagePullPolicy"] == "IfNotPresent"
    assert spec["containers"][0]["ports"][0]["protocol"] == "TCP"
    assert spec["tolerations"][0]["operator"] == "Equal"
    assert obj["status"] == {"qosClass": "BestEffort", "phase": "Pending"}
    node = {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4"}}}
    apply_create_defaults(NODE, node, None)
    assert node["status"]["allocatable"] == {"cpu": "4"}


@pytest.mark.parametrize(
    "resources, qos",
    [
        pytest.param({}, "BestEffort", id="no requests or limits is best effort"),
        pytest.param({"requests": {"cpu": "1"}}, "Burstable", id="requests alone are burstable"),
        pytest.param({"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed",
                     id="limits alone default the requests and guarantee"),
        pytest.param({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}},
                     "Burstable", id="requests below limits are burstable"),
    ],
)
def test_qos_class(resources, qos):
    assert qos_class({"containers": [container(resources=copy.deepcopy(resources))]}) == qos


@pytest.mark.parametrize("probe, bad", [
    pytest.param({"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5}, set(), id="a named port"),
    pytest.param({}, {"spec.containers[0].livenessProbe"}, id="a probe needs a handler"),
    pytest.param({"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}}, {"spec.containers[0].livenessProbe.tcpSocket"},
                 id="one handler only"),
    pytest.param({"tcpSocket": {"port": 70000}}, {"spec.containers[0].livenessProbe.tcpSocket.port"}, id="a real port"),
    pytest.param({"httpGet": {"port": "nope"}}, {"spec.containers[0].livenessProbe.httpGet.port"},
                 id="a name the container's ports have"),
    pytest.param({"exec": {"command": ["true"]}, "successThreshold": 2}, {"spec.containers[0].livenessProbe.successThreshold"},
                 id="liveness succeeds once"),
    pytest.param({"exec": {"command": ["true"]}, "periodSeconds": 0}, {"spec.containers[0].livenessProbe.periodSeconds"},
                 id="a period of at least a second"),
])
def test_probes_are_validated(probe, bad):
    obj = pod(containers=[container(ports=[{"containerPort": 8080, "name": "http"}], livenessProbe=probe)])
    assert fields_of(POD, obj) == bad


def test_probes_get_kubernetes_defaults():
    obj = pod(containers=[container(readinessProbe={"httpGet": {"port": 80}})])
    apply_create_defaults(POD, obj, "default")
    assert obj["spec"]["containers"][0]["readinessProbe"] == {
        "httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10,
        "successThreshold": 1, "failureThreshold": 3}


def test_every_kubernetes_kind_corral_serves_has_kubernetes_field_names():
    """Without them every field corral does not model counts as misspelt: kubectl apply (Strict) of
    a chart's Deployment with a securityContext was refused. tools/kubernetes_fields.py writes them."""
    from corral.api.kubectl.kubernetes_fields import KINDS
    from corral.api.resources import RESOURCES

    served = {f"{r.api_version}/{r.kind}" for r in RESOURCES if not r.group.endswith("corral.dev")}
    assert served - set(KINDS) == set()


def test_every_kubectl_explain_description_names_a_real_kind_or_field():
    """A description keyed by a misspelt model or field would never be shown."""
    import msgspec

    from corral.api import models
    from corral.api.kinds import apps, batch, config, placement, scheduling
    from corral.api.kubectl.descriptions import DESCRIPTIONS

    structs = {name: {f.encode_name for f in msgspec.structs.fields(obj)}
               for module in (models, apps, batch, config, scheduling, placement) for name, obj in vars(module).items()
               if isinstance(obj, type) and issubclass(obj, msgspec.Struct)}
    wrong = [key for key in DESCRIPTIONS
             if key.split(".")[0] not in structs or ("." in key and key.split(".", 1)[1] not in structs[key.split(".")[0]])]
    assert wrong == []
