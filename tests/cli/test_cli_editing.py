"""The first-hour CLI options kubectl users reach for: --kubeconfig and --server before the command,
get --show-labels, delete -l / --all, label, annotate and edit — run as a user runs them."""

from __future__ import annotations

import json
import os
import sys

from tests.cli.test_cli import NODE, POD, corral, manifests  # noqa: F401 - the fixture


def pod_names(kc: str) -> set[str]:
    return {p["metadata"]["name"] for p in json.loads(corral("get", "pods", "-o", "json", kubeconfig=kc).stdout)["items"]}


def test_kubeconfig_and_server_go_before_the_command_as_with_kubectl(server_process, tmp_path):
    env = {"KUBECONFIG": str(tmp_path / "missing")}
    out = corral("--kubeconfig", server_process.kubeconfig, "get", "namespaces", env=env)
    assert "kube-system" in out.stdout
    wrong = corral("--kubeconfig", server_process.kubeconfig, "--server", "https://127.0.0.1:1", "get", "ns",
                   env=env, check=False)
    assert wrong.returncode == 1 and "127.0.0.1:1" in wrong.stderr  # the global --server was used
    right = corral("--server", server_process.url, "get", "ns", env={"KUBECONFIG": server_process.kubeconfig})
    assert "default" in right.stdout


def test_label_and_annotate_set_refuse_to_overwrite_and_remove(kubeconfig, manifests):  # noqa: F811
    corral("apply", "-f", str(manifests / "pod.yaml"), kubeconfig=kubeconfig)
    assert corral("label", "pod", "web", "tier=front", kubeconfig=kubeconfig).stdout == "pod/web labeled\n"
    refused = corral("label", "pod", "web", "tier=back", kubeconfig=kubeconfig, check=False)
    assert refused.returncode == 1
    assert refused.stderr == "error: 'tier' already has a value (front), and --overwrite is false\n"
    corral("label", "pod", "web", "tier=back", "--overwrite", kubeconfig=kubeconfig)
    table = corral("get", "pods", "--show-labels", kubeconfig=kubeconfig).stdout
    assert table.split("\n")[0].split()[-1] == "LABELS" and "app=web,tier=back" in table
    corral("label", "pod", "web", "tier-", kubeconfig=kubeconfig)
    corral("annotate", "pod", "web", "owner=ops", kubeconfig=kubeconfig)
    meta = json.loads(corral("get", "pod", "web", "-o", "json", kubeconfig=kubeconfig).stdout)["metadata"]
    assert meta["labels"] == {"app": "web"} and meta["annotations"] == {"owner": "ops"}
    bad = corral("label", "pod", "web", "justakey", kubeconfig=kubeconfig, check=False)
    assert bad.returncode == 1 and "neither KEY=VALUE" in bad.stderr
    invalid = corral("label", "pod", "web", "a=not a valid value", kubeconfig=kubeconfig, check=False)
    assert invalid.returncode == 1 and "metadata.labels" in invalid.stderr  # the server's field path


def test_delete_by_selector_and_all(kubeconfig, tmp_path):
    docs = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": n, "labels": {"app": app}},
             "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
            for n, app in (("w1", "web"), ("w2", "web"), ("d1", "db"))]
    corral("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}),
           kubeconfig=kubeconfig)
    out = corral("delete", "pods", "-l", "app=web", kubeconfig=kubeconfig).stdout
    assert out == 'pod "w1" deleted\npod "w2" deleted\n' and pod_names(kubeconfig) == {"d1"}
    assert "No resources found" in corral("delete", "pods", "-l", "app=none", kubeconfig=kubeconfig).stderr
    corral("delete", "pods", "--all", kubeconfig=kubeconfig)
    assert pod_names(kubeconfig) == set()
    mixed = corral("delete", "pods", "x", "--all", kubeconfig=kubeconfig, check=False)
    assert mixed.returncode == 1 and "without names" in mixed.stderr


def test_edit_replaces_the_object_with_what_the_editor_saved(kubeconfig, manifests, tmp_path):  # noqa: F811
    corral("apply", "-f", str(manifests / "pod.yaml"), kubeconfig=kubeconfig)
    editor = tmp_path / "editor.py"
    editor.write_text("import sys\np = sys.argv[1]\ntext = open(p).read()\n"
                      "open(p, 'w').write(text.replace('image: busybox', 'image: busybox:1.36'))\n")
    env = {"EDITOR": f"{sys.executable} {editor}"}
    out = corral("edit", "pod", "web", kubeconfig=kubeconfig, env=env)
    assert out.stdout == "pod/web edited\n"
    pod = json.loads(corral("get", "pod", "web", "-o", "json", kubeconfig=kubeconfig).stdout)
    assert pod["spec"]["containers"][0]["image"] == "busybox:1.36"
    unchanged = corral("edit", "pod", "web", kubeconfig=kubeconfig, env={"EDITOR": "true"})
    assert unchanged.stdout == "Edit cancelled, no changes made.\n"
    breaker = tmp_path / "breaker.py"
    breaker.write_text("import sys\nopen(sys.argv[1], 'w').write('metadata: [unclosed\\n')\n")
    broken = corral("edit", "pod", "web", kubeconfig=kubeconfig, env={"EDITOR": f"{sys.executable} {breaker}"},
                    check=False)
    assert broken.returncode == 1 and "not valid YAML" in broken.stderr and "your edit is kept" in broken.stderr
    kept = broken.stderr.split("error: ", 1)[1].split(":", 1)[0]
    assert os.path.exists(kept)
    os.unlink(kept)
