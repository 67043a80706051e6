"""`corral token` as an administrator uses it, and a real kubectl with the kubeconfigs corral writes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.cli.test_cli import corral

KUBECTL = shutil.which("kubectl", path=os.path.dirname(sys.executable))


def test_a_user_token_is_printed_as_a_kubeconfig_listed_without_its_secret_and_revoked(kubeconfig, tmp_path):
    printed = corral("token", "create", "--user", "alice", "--group", "dev", "--ttl", "7d",
                     "--description", "alice's laptop", kubeconfig=kubeconfig).stdout
    doc = yaml.safe_load(printed)
    token = doc["users"][0]["user"]["token"]
    path = tmp_path / "alice.kubeconfig"
    path.write_text(printed)
    denied = corral("get", "pods", "--kubeconfig", str(path), check=False)  # authenticated, no role yet
    assert denied.returncode == 1 and denied.stderr.startswith('error: pods is forbidden: User "alice" cannot list')
    binding = tmp_path / "dev-view.yaml"
    binding.write_text(yaml.safe_dump({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "dev-view", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "dev"}]}))
    corral("apply", "-f", str(binding), kubeconfig=kubeconfig)
    assert corral("get", "pods", "--kubeconfig", str(path)).returncode == 0
    # kubectl asks with a protobuf SelfSubjectAccessReview; the answer matches what the server then does.
    can_i = [KUBECTL, "--kubeconfig", str(path), "auth", "can-i"]
    assert subprocess.run([*can_i, "list", "pods"], capture_output=True, text=True).stdout == "yes\n"
    no = subprocess.run([*can_i, "create", "pods"], capture_output=True, text=True)
    assert no.returncode == 1 and no.stdout.startswith("no")
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c, image: x}]}\n")
    refused_write = corral("apply", "-f", str(pod), "--kubeconfig", str(path), check=False)
    assert refused_write.returncode == 1
    assert 'pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace ' \
           '"default"' in refused_write.stderr
    assert corral("get", "pods", "-o", "name", kubeconfig=kubeconfig).stdout == ""  # nothing was created
    listed = corral("token", "list", kubeconfig=kubeconfig).stdout
    row = next(line for line in listed.splitlines() if line.startswith(token.split(".")[0]))
    assert row.split()[1:4] == ["alice", "dev", "authentication"] and row.endswith("alice's laptop")
    assert token.split(".")[1] not in listed
    assert corral("token", "revoke", token, kubeconfig=kubeconfig).stdout == f"token/{token.split('.')[0]} revoked\n"
    refused = corral("get", "pods", "--kubeconfig", str(path), check=False)
    assert refused.returncode == 1 and refused.stderr.startswith("error: Unauthorized")
    missing = corral("token", "revoke", "zzzzzz", kubeconfig=kubeconfig, check=False)
    assert missing.returncode == 1 and missing.stderr == 'error: token "zzzzzz" not found\n'


def test_a_join_token_prints_the_whole_join_command(server_process, kubeconfig):
    line = corral("token", "create", "--join", kubeconfig=kubeconfig).stdout.strip()
    with open(server_process.ca_file, "rb") as f:
        from corral.pki.ca import ca_pin

        pin = ca_pin(f.read())
    assert line.startswith(f"corral agent --server {server_process.url} --token ")
    assert line.endswith(f"--ca-cert-hash {pin}")
    row = next(r for r in corral("token", "list", kubeconfig=kubeconfig).stdout.splitlines()
               if r.startswith(line.split("--token ")[1][:6]))
    assert " join " in row and "never" not in row  # join tokens expire (24 h by default)


@pytest.mark.parametrize("args, message", [
    (["--join", "--user", "x"], "--join makes a token for joining nodes"),
    ([], "give --user NAME"),
    (["--user", "x", "--ttl", "soon"], "--ttl must be a duration like 30m"),
])
def test_bad_token_requests_are_one_line(kubeconfig, args, message):
    proc = corral("token", "create", *args, kubeconfig=kubeconfig, check=False)
    assert proc.returncode == 1 and message in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_kubectl_works_with_the_admin_kubeconfig_the_server_wrote(server_process):
    env = {**os.environ, "KUBECONFIG": server_process.kubeconfig}
    run = lambda *a: subprocess.run([KUBECTL, *a], capture_output=True, text=True, env=env, timeout=60)  # noqa: E731
    got = run("get", "namespaces", "-o", "name")
    assert "namespace/default" in got.stdout, got.stderr
    forged = subprocess.run([KUBECTL, "get", "pods", "--server", server_process.url, "--token", "abcdef." + "0" * 32,
                             "--certificate-authority", server_process.ca_file],
                            capture_output=True, text=True, env={**os.environ, "KUBECONFIG": "/nonexistent"}, timeout=60)
    assert forged.returncode == 1 and "(Unauthorized)" in forged.stderr


def test_kubectl_patch_merges_a_pods_containers_by_name_as_against_kubernetes(server_process, tmp_path):
    """kubectl's default patch is a strategic merge patch: the Kubernetes docs' way of changing one
    container's image names only that container, and the pod's other containers and fields stay."""
    env = {**os.environ, "KUBECONFIG": server_process.kubeconfig}
    run = lambda *a: subprocess.run([KUBECTL, *a], capture_output=True, text=True, env=env, timeout=60)  # noqa: E731
    pod = tmp_path / "pair.yaml"
    pod.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pair"}, "spec": {
        "containers": [{"name": "web", "image": "web:1", "command": ["sleep", "60"],
                        "env": [{"name": "A", "value": "1"}]},
                       {"name": "log", "image": "log:1", "command": ["sleep", "60"]}]}}))
    created = run("create", "-f", str(pod), "--validate=false")
    assert created.returncode == 0, created.stderr
    patched = run("patch", "pod", "pair", "-p", '{"spec":{"containers":[{"name":"web","image":"web:2"}]}}')
    assert patched.returncode == 0, patched.stderr
    got = yaml.safe_load(run("get", "pod", "pair", "-o", "yaml").stdout)
    containers = {c["name"]: c for c in got["spec"]["containers"]}
    assert containers["web"]["image"] == "web:2" and containers["log"]["image"] == "log:1"
    assert containers["web"]["env"] == [{"name": "A", "value": "1"}] and containers["web"]["command"] == ["sleep", "60"]
    gone = run("patch", "pod", "pair", "--type", "json", "-p", '[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]')
    assert gone.returncode == 0, gone.stderr
    applied = run("patch", "pod", "pair", "--type", "merge", "-p", '{"metadata":{"labels":{"c":"d"}}}')
    assert applied.returncode == 0 and yaml.safe_load(run("get", "pod", "pair", "-o", "yaml").stdout)["metadata"][
        "labels"] == {"a": "b", "c": "d"}
