"""The `corral` command, run as a user runs it, against a real server process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from corral.testing.process import child_env

CORRAL = shutil.which("corral", path=os.path.dirname(sys.executable)) or "corral"


def corral(*args: str, server: str | None = None, stdin: str | None = None, env: dict | None = None,
           check: bool = True) -> subprocess.CompletedProcess:
    full_env = child_env(env)
    if server:
        full_env["CORRAL_SERVER"] = server
    proc = subprocess.run([CORRAL, *args], input=stdin, capture_output=True, text=True, env=full_env, timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"corral {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc


POD = textwrap.dedent("""\
    apiVersion: v1
    kind: Pod
    metadata:
      name: web
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: busybox
        resources: {requests: {cpu: 100m, memory: 64Mi}}
    """)
NODE = textwrap.dedent("""\
    apiVersion: v1
    kind: Node
    metadata: {name: node-1, labels: {zone: a}}
    status:
      capacity: {cpu: "4", memory: 32Gi, pods: "110"}
    """)


@pytest.fixture
def manifests(tmp_path):
    d = tmp_path / "manifests"
    d.mkdir()
    (d / "pod.yaml").write_text(POD)
    (d / "node.yaml").write_text(NODE)
    return d


def test_apply_creates_then_reports_unchanged_then_configured(server_url, manifests):
    out = corral("apply", "-f", str(manifests), server=server_url).stdout
    assert out.splitlines() == ["node/node-1 created", "pod/web created"]
    assert corral("apply", "-f", str(manifests / "pod.yaml"), server=server_url).stdout == "pod/web unchanged\n"
    (manifests / "pod.yaml").write_text(POD.replace("app: web", "app: web, tier: front"))
    assert corral("apply", "-f", str(manifests / "pod.yaml"), server=server_url).stdout == "pod/web configured\n"


def test_apply_reads_multi_document_yaml_and_json_from_stdin(server_url):
    out = corral("apply", "-f", "-", server=server_url, stdin=POD + "---\n" + NODE).stdout
    assert out.splitlines() == ["pod/web created", "node/node-1 created"]
    as_json = json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert corral("apply", "-f", "-", server=server_url, stdin=as_json).stdout == "namespace/team-a created\n"


def test_get_shows_kubectl_columns_and_every_output_format(server_url, manifests):
    corral("apply", "-f", str(manifests), server=server_url)
    pods = corral("get", "pods", server=server_url).stdout.splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "NODE", "AGE"]
    assert pods[1].split()[:5] == ["web", "0/1", "Pending", "0", "<none>"]
    nodes = corral("get", "nodes", server=server_url).stdout.splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "CPU", "MEMORY", "AGE"]
    assert nodes[1].split()[2:4] == ["4", "32Gi"]
    as_json = json.loads(corral("get", "pod", "web", "-o", "json", server=server_url).stdout)
    assert as_json["metadata"]["labels"] == {"app": "web"}
    assert "kind: List" in corral("get", "po", "-o", "yaml", server=server_url).stdout
    assert corral("get", "pods", "-o", "name", server=server_url).stdout == "pod/web\n"
    assert "web" in corral("get", "pods", "-l", "app=web", server=server_url).stdout
    assert corral("get", "pods", "-l", "app=db", server=server_url).stdout == ""
    all_ns = corral("get", "pods", "-A", server=server_url).stdout.splitlines()
    assert all_ns[0].split()[0] == "NAMESPACE" and all_ns[1].split()[:2] == ["default", "web"]


def test_cordon_shows_scheduling_disabled_and_uncordon_clears_it(server_url, manifests):
    corral("apply", "-f", str(manifests / "node.yaml"), server=server_url)
    assert corral("cordon", "node-1", server=server_url).stdout == "node/node-1 cordoned\n"
    assert "SchedulingDisabled" in corral("get", "nodes", server=server_url).stdout
    assert corral("cordon", "node-1", server=server_url).stdout == "node/node-1 already cordoned\n"
    assert corral("uncordon", "node-1", server=server_url).stdout == "node/node-1 uncordoned\n"
    assert "SchedulingDisabled" not in corral("get", "nodes", server=server_url).stdout


def test_describe_shows_the_object_and_its_events(server_url, manifests):
    corral("apply", "-f", str(manifests / "pod.yaml"), server=server_url)
    event = {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
        "reason": "FailedScheduling", "message": "0/1 nodes are available: 1 Insufficient cpu.",
        "type": "Warning", "lastTimestamp": "2026-01-01T00:00:00Z", "source": {"component": "default-scheduler"},
    }
    corral("apply", "-f", "-", server=server_url, stdin=json.dumps(event))
    out = corral("describe", "pod", "web", server=server_url).stdout
    assert "Name:             web" in out and "Image:        busybox" in out
    assert "FailedScheduling" in out and "0/1 nodes are available: 1 Insufficient cpu." in out
    events = corral("events", "--for", "pod/web", server=server_url).stdout
    assert "FailedScheduling" in events


def test_delete_by_name_and_by_file(server_url, manifests):
    corral("apply", "-f", str(manifests), server=server_url)
    assert corral("delete", "pod", "web", server=server_url).stdout == 'pod "web" deleted\n'
    assert corral("delete", "-f", str(manifests / "node.yaml"), server=server_url).stdout == 'node "node-1" deleted\n'
    missing = corral("delete", "pod", "web", server=server_url, check=False)
    assert missing.returncode == 1 and missing.stderr == 'error: pods "web" not found\n'


def test_the_server_address_comes_from_flag_then_environment_then_config_file(server_url, manifests, tmp_path):
    config_home = tmp_path / "config"
    (config_home / "corral").mkdir(parents=True)
    (config_home / "corral" / "config.yaml").write_text(f"server: {server_url}\n")
    env = {"XDG_CONFIG_HOME": str(config_home), "CORRAL_SERVER": ""}
    assert corral("version", env=env).stdout.endswith("Server Version: v0.1.0\n")
    wrong = {**env, "CORRAL_SERVER": "http://127.0.0.1:1"}
    assert corral("version", env=wrong, check=False).returncode == 1
    assert corral("version", "--server", server_url, env=wrong).returncode == 0


@pytest.mark.parametrize(
    "content, expected",
    [
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: a\n", "document 1: not valid YAML",
                     id="malformed YAML names the document"),
        pytest.param(POD + "---\napiVersion: v1\nkind: Pod\nspec: {}\n", "document 2: metadata: Required value",
                     id="a missing field names document and field"),
        pytest.param("apiVersion: v1\nkind: Deployment\nmetadata: {name: a}\n",
                     'document 1: kind: corral does not serve kind "Deployment"', id="unknown kinds are named"),
        pytest.param(POD.replace("image: busybox", "image: 42\n    ports: [{containerPort: x}]"),
                     "document 1 (Pod web): spec.containers[0].image", id="a wrong type names the field path"),
        pytest.param(POD.replace("name: web\n  labels", "name: " + "a" * 300 + "\n  labels"),
                     "metadata.name: Too long", id="an over-long name is refused"),
    ],
)
def test_bad_manifests_get_one_clear_line_and_change_nothing(server_url, tmp_path, content, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    proc = corral("apply", "-f", str(path), server=server_url, check=False)
    assert proc.returncode == 1
    assert expected in proc.stderr and str(path) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert corral("get", "pods", "-o", "name", server=server_url).stdout == ""


def test_an_unreachable_server_is_one_clear_line():
    proc = corral("get", "pods", server="http://127.0.0.1:1", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: cannot reach the corral server at http://127.0.0.1:1")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_unknown_resource_types_are_refused():
    proc = corral("get", "deployments", server="http://127.0.0.1:1", check=False)
    assert proc.returncode == 1 and 'doesn\'t have a resource type "deployments"' in proc.stderr


def test_get_watch_prints_the_table_then_each_change(server_url, manifests):
    corral("apply", "-f", str(manifests / "node.yaml"), server=server_url)
    env = child_env({"CORRAL_SERVER": server_url})
    watcher = subprocess.Popen([CORRAL, "get", "pods", "--watch"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        header = watcher.stdout.readline()
        assert header.split()[:3] == ["NAME", "READY", "STATUS"]
        corral("apply", "-f", str(manifests / "pod.yaml"), server=server_url)
        assert watcher.stdout.readline().split()[:3] == ["web", "0/1", "Pending"]
        corral("delete", "pod", "web", server=server_url)
        # The scheduler may report on the pod (PodScheduled=False) before the deletion shows.
        lines = [watcher.stdout.readline().rstrip() for _ in range(1)]
        while not lines[-1].endswith("(deleted)") and len(lines) < 5:
            lines.append(watcher.stdout.readline().rstrip())
        assert lines[-1].startswith("web") and lines[-1].endswith("(deleted)"), lines
    finally:
        watcher.kill()
        watcher.wait()
