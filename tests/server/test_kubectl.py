"""kubectl, as a user runs it (validation on, the default), against a real server: apply of every
example, a typo refused with the field named and nothing created, explain from the OpenAPI documents."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import requests

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")
KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable))


def kubectl(kubeconfig: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([KUBECTL, "--kubeconfig", kubeconfig, *args], input=stdin, capture_output=True,
                          text=True, timeout=60)


def test_kubectl_apply_validates_through_the_server_and_takes_every_example(kubeconfig):
    """Before: "error validating data: failed to download openapi" unless --validate=false."""
    out = kubectl(kubeconfig, "apply", "-f", EXAMPLES)
    assert out.returncode == 0, out.stderr
    assert "pod/web created" in out.stdout and "failed to download openapi" not in out.stderr
    assert "deployment.apps/hello created" in out.stdout
    bare = [p for p in json.loads(kubectl(kubeconfig, "get", "pods", "-o", "json").stdout)["items"]
            if not p["metadata"].get("ownerReferences")]
    files = [f for f in os.listdir(EXAMPLES) if f.endswith(".yaml")]
    assert len(bare) == len(files) - 1  # every example is a pod, but for the Deployment


def test_kubectl_create_deployment_sends_protobuf_that_reads_as_its_json_would(kubeconfig):
    out = kubectl(kubeconfig, "create", "deployment", "made", "--image=busybox:1.36", "--replicas=2", "--port=8080",
                  "--", "sleep", "3600")
    assert out.returncode == 0, out.stderr
    deploy = json.loads(kubectl(kubeconfig, "get", "deployment", "made", "-o", "json").stdout)
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert (deploy["spec"]["replicas"], deploy["spec"]["selector"]) == (2, {"matchLabels": {"app": "made"}})
    assert (container["image"], container["command"], container["ports"]) == (
        "busybox:1.36", ["sleep", "3600"], [{"containerPort": 8080, "protocol": "TCP"}])
    assert "workingDir" not in container and "imagePullPolicy" in container  # Go's empty fields are absent
    scaled = kubectl(kubeconfig, "scale", "deployment/made", "--replicas=3")
    assert scaled.returncode == 0, scaled.stderr
    assert json.loads(kubectl(kubeconfig, "get", "deployment", "made", "-o", "json").stdout)["spec"]["replicas"] == 3


def test_kubectl_apply_refuses_a_misspelt_field_naming_it_and_creates_nothing(kubeconfig):
    manifest = ("apiVersion: v1\nkind: Pod\nmetadata: {name: typo}\nspec:\n  containers:\n"
                "  - name: c\n    image: busybox\n    imagePullPolice: Always\n")
    out = kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest)
    assert out.returncode != 0
    assert "spec.containers[0].imagePullPolice" in out.stderr, out.stderr
    assert kubectl(kubeconfig, "get", "pod", "typo").returncode != 0
    # --validate=false asks the server to ignore it: created, the field dropped from what corral acts on
    assert kubectl(kubeconfig, "apply", "--validate=false", "-f", "-", stdin=manifest).returncode == 0


def test_kubectl_explain_reads_kinds_and_fields_from_the_openapi_documents(kubeconfig):
    out = kubectl(kubeconfig, "explain", "pod.spec.containers")
    assert out.returncode == 0, out.stderr
    assert "FIELD: containers <[]Container>" in out.stdout
    assert "image\t<string>" in out.stdout and "The image to run." in out.stdout
    out = kubectl(kubeconfig, "explain", "priorityclasses")
    assert out.returncode == 0 and "KIND:       PriorityClass" in out.stdout, out.stderr


def test_openapi_v2_is_swagger_json_and_protobuf_is_refused_plainly(server_process):
    with requests.Session() as s:
        s.headers.update(server_process.credentials().headers())
        doc = s.get(server_process.url + "/openapi/v2", timeout=10, verify=server_process.ca_file).json()
        assert doc["swagger"] == "2.0"
        pod = doc["definitions"]["Pod"]
        assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "version": "v1", "kind": "Pod"}]
        patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
        assert any(p["name"] == "fieldValidation" for p in patch["parameters"])
        assert "#/components/" not in json.dumps(doc)  # every reference points into #/definitions
        r = s.get(server_process.url + "/openapi/v2", timeout=10, verify=server_process.ca_file,
                  headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
        assert r.status_code == 406 and "application/json" in r.json()["message"]


@pytest.mark.parametrize("path", ["/openapi/v3/api/v1", "/openapi/v3/apis/scheduling.k8s.io/v1"])
def test_each_kinds_schema_and_operations_carry_their_group_version_kind(server_process, path):
    doc = requests.get(server_process.url + path, headers=server_process.credentials().headers(),
                       verify=server_process.ca_file, timeout=10).json()
    kinds = {g["kind"] for s in doc["components"]["schemas"].values()
             for g in s.get("x-kubernetes-group-version-kind", [])}
    assert ("Pod" in kinds) if path.endswith("api/v1") else ("PriorityClass" in kinds)
    for item in doc["paths"].values():
        for op in item.values():
            assert op["x-kubernetes-group-version-kind"]["kind"] and op["x-kubernetes-action"]


def test_kubectl_typed_commands_send_protobuf_that_corral_reads(kubeconfig):
    """kubectl create namespace sends its Namespace as protobuf: before, 415 "corral reads Namespace
    (v1) only as JSON"."""
    out = kubectl(kubeconfig, "create", "namespace", "team-a", "-v=8")
    assert out.returncode == 0, out.stderr
    assert "application/vnd.kubernetes.protobuf" in out.stderr  # what kubectl sent, from its own log
    assert json.loads(kubectl(kubeconfig, "get", "namespace", "team-a", "-o", "json").stdout)["metadata"]["name"] == "team-a"


def test_kubectl_cluster_info_names_the_control_plane(kubeconfig, server_process):
    """Before: "the server doesn't have a resource type services". There are none (corral has no
    service networking yet), and none can be made: the list is empty, a create is refused."""
    out = kubectl(kubeconfig, "cluster-info")
    assert out.returncode == 0, out.stderr
    assert f"Kubernetes control plane is running at {server_process.url}" in out.stdout
    refused = kubectl(kubeconfig, "create", "service", "clusterip", "web", "--tcp=80")
    assert refused.returncode != 0 and "does not allow the method POST on services" in refused.stderr


def test_kubectl_create_configmap_and_secret_send_protobuf_that_corral_stores_as_kubernetes_does(kubeconfig,
                                                                                                 tmp_path):
    (tmp_path / "app.conf").write_text("port = 8080\n")
    out = kubectl(kubeconfig, "create", "configmap", "app", "--from-literal=mode=fast",
                  f"--from-file={tmp_path / 'app.conf'}")
    assert out.returncode == 0, out.stderr
    cm = json.loads(kubectl(kubeconfig, "get", "configmap", "app", "-o", "json").stdout)
    assert cm["data"] == {"mode": "fast", "app.conf": "port = 8080\n"}
    out = kubectl(kubeconfig, "create", "secret", "generic", "db", "--from-literal=password=s3cr\u00e9t")
    assert out.returncode == 0, out.stderr
    secret = json.loads(kubectl(kubeconfig, "get", "secret", "db", "-o", "json").stdout)
    assert secret["type"] == "Opaque" and secret["data"] == {"password": "czNjcsOpdA=="}  # base64, as sent
    table = kubectl(kubeconfig, "get", "configmaps,secrets").stdout
    assert "configmap/app" in table and "secret/db" in table and "Opaque" in table, table
    # stringData is folded into data on every write, and never stored
    out = kubectl(kubeconfig, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Secret\nmetadata: {name: tls}\n"
                  "type: kubernetes.io/tls\nstringData: {tls.crt: CERT}\n")
    assert out.returncode != 0 and "data[tls.key]: Required value" in out.stderr, out.stderr
    out = kubectl(kubeconfig, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Secret\nmetadata: {name: plain}\n"
                  "stringData: {user: admin}\n")
    assert out.returncode == 0, out.stderr
    plain = json.loads(kubectl(kubeconfig, "get", "secret", "plain", "-o", "json").stdout)
    assert plain["data"] == {"user": "YWRtaW4="} and "stringData" not in plain
    # An immutable ConfigMap keeps its data: the server refuses the change, naming the field
    out = kubectl(kubeconfig, "apply", "-f", "-", stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fixed}\n"
                  "immutable: true\ndata: {k: v1}\n")
    assert out.returncode == 0, out.stderr
    out = kubectl(kubeconfig, "patch", "configmap", "fixed", "-p", '{"data": {"k": "v2"}}')
    assert out.returncode != 0 and "data: Forbidden: field is immutable when `immutable` is set" in out.stderr, out.stderr


def test_kubectl_create_job_and_cronjob_send_protobuf_that_reads_as_their_json_would(kubeconfig):
    out = kubectl(kubeconfig, "create", "job", "once", "--image=busybox:1.36", "--", "sh", "-c", "echo hi")
    assert out.returncode == 0, out.stderr
    job = json.loads(kubectl(kubeconfig, "get", "job", "once", "-o", "json").stdout)
    template = job["spec"]["template"]
    assert template["spec"]["restartPolicy"] == "Never" and template["spec"]["containers"][0]["command"] == [
        "sh", "-c", "echo hi"]
    assert set(template["metadata"]) == {"labels"}  # Go's empty name, namespace, uid ... are absent
    out = kubectl(kubeconfig, "create", "cronjob", "tick", "--image=busybox:1.36", "--schedule=*/5 * * * *", "--", "date")
    assert out.returncode == 0, out.stderr
    cj = json.loads(kubectl(kubeconfig, "get", "cronjob", "tick", "-o", "json").stdout)
    assert (cj["spec"]["schedule"], cj["spec"]["concurrencyPolicy"]) == ("*/5 * * * *", "Allow")
    assert "timeZone" not in cj["spec"]
