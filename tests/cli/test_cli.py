"""The `corral` command, run as a user runs it, against a real server process."""

from __future__ import annotations

import json
import re
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from corral.pki.kubeconfig import build_kubeconfig
from corral.testing.process import child_env
from corral.testing.server import ServerProcess

CORRAL = shutil.which("corral", path=os.path.dirname(sys.executable)) or "corral"


def corral(*args: str, kubeconfig: str | None = None, stdin: str | None = None, env: dict | None = None,
           check: bool = True) -> subprocess.CompletedProcess:
    full_env = child_env(env)
    if kubeconfig:
        full_env["KUBECONFIG"] = kubeconfig
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


def test_apply_creates_then_reports_unchanged_then_configured(kubeconfig, manifests):
    out = corral("apply", "-f", str(manifests), kubeconfig=kubeconfig).stdout
    assert out.splitlines() == ["node/node-1 created", "pod/web created"]
    assert corral("apply", "-f", str(manifests / "pod.yaml"), kubeconfig=kubeconfig).stdout == "pod/web unchanged\n"
    (manifests / "pod.yaml").write_text(POD.replace("app: web", "app: web, tier: front"))
    assert corral("apply", "-f", str(manifests / "pod.yaml"), kubeconfig=kubeconfig).stdout == "pod/web configured\n"


def test_apply_creates_a_namespace_and_what_goes_in_it_from_one_file(kubeconfig, tmp_path):
    """Every document is checked before any is sent, but a namespace the same apply creates is
    not there to check against yet: what goes in it is judged once it exists."""
    path = tmp_path / "team.yaml"
    path.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n---\n"
                    + POD.replace("name: web\n  labels", "name: web\n  namespace: team\n  labels"))
    assert corral("apply", "-f", str(path), kubeconfig=kubeconfig).stdout == "namespace/team created\npod/web created\n"
    assert corral("apply", "-f", str(path), kubeconfig=kubeconfig).stdout == "namespace/team unchanged\npod/web unchanged\n"


def test_apply_reads_multi_document_yaml_and_json_from_stdin(kubeconfig):
    out = corral("apply", "-f", "-", kubeconfig=kubeconfig, stdin=POD + "---\n" + NODE).stdout
    assert out.splitlines() == ["pod/web created", "node/node-1 created"]
    as_json = json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert corral("apply", "-f", "-", kubeconfig=kubeconfig, stdin=as_json).stdout == "namespace/team-a created\n"


def test_get_shows_kubectl_columns_and_every_output_format(kubeconfig, manifests):
    corral("apply", "-f", str(manifests), kubeconfig=kubeconfig)
    pods = corral("get", "pods", kubeconfig=kubeconfig).stdout.splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "NODE", "AGE"]
    assert pods[1].split()[:5] == ["web", "0/1", "Pending", "0", "<none>"]
    nodes = corral("get", "nodes", kubeconfig=kubeconfig).stdout.splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "CPU", "MEMORY", "AGE"]
    assert nodes[1].split()[2:4] == ["4", "32Gi"]
    as_json = json.loads(corral("get", "pod", "web", "-o", "json", kubeconfig=kubeconfig).stdout)
    assert as_json["metadata"]["labels"] == {"app": "web"}
    assert "kind: List" in corral("get", "po", "-o", "yaml", kubeconfig=kubeconfig).stdout
    assert corral("get", "pods", "-o", "name", kubeconfig=kubeconfig).stdout == "pod/web\n"
    assert "web" in corral("get", "pods", "-l", "app=web", kubeconfig=kubeconfig).stdout
    assert corral("get", "pods", "-l", "app=db", kubeconfig=kubeconfig).stdout == ""
    all_ns = corral("get", "pods", "-A", kubeconfig=kubeconfig).stdout.splitlines()
    assert all_ns[0].split()[0] == "NAMESPACE" and all_ns[1].split()[:2] == ["default", "web"]


def test_cordon_shows_scheduling_disabled_and_uncordon_clears_it(kubeconfig, manifests):
    corral("apply", "-f", str(manifests / "node.yaml"), kubeconfig=kubeconfig)
    assert corral("cordon", "node-1", kubeconfig=kubeconfig).stdout == "node/node-1 cordoned\n"
    assert "SchedulingDisabled" in corral("get", "nodes", kubeconfig=kubeconfig).stdout
    assert corral("cordon", "node-1", kubeconfig=kubeconfig).stdout == "node/node-1 already cordoned\n"
    assert corral("uncordon", "node-1", kubeconfig=kubeconfig).stdout == "node/node-1 uncordoned\n"
    assert "SchedulingDisabled" not in corral("get", "nodes", kubeconfig=kubeconfig).stdout


def test_describe_shows_the_object_and_its_events(kubeconfig, manifests):
    corral("apply", "-f", str(manifests / "pod.yaml"), kubeconfig=kubeconfig)
    event = {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default"},
        "reason": "FailedScheduling", "message": "0/1 nodes are available: 1 Insufficient cpu.",
        "type": "Warning", "lastTimestamp": "2026-01-01T00:00:00Z", "source": {"component": "default-scheduler"},
    }
    repeated = {**event, "metadata": {"name": "web.2", "namespace": "default"}, "reason": "BackOff",
                "message": "Back-off pulling image", "count": 16, "firstTimestamp": "2025-12-01T00:00:00Z"}
    for made in (event, repeated):
        corral("apply", "-f", "-", kubeconfig=kubeconfig, stdin=json.dumps(made))
    out = corral("describe", "pod", "web", kubeconfig=kubeconfig).stdout
    assert "Name:             web" in out and "Image:        busybox" in out
    assert "FailedScheduling" in out and "0/1 nodes are available: 1 Insufficient cpu." in out
    # A repeated event says how often since when, as kubectl shows it; a single one does not.
    (backoff,) = [line for line in out.splitlines() if "BackOff" in line]
    assert re.search(r"  \d+d \(x16 over \d+d\)  ", backoff), backoff
    assert "(x" not in next(line for line in out.splitlines() if "FailedScheduling" in line)
    events = corral("events", "--for", "pod/web", kubeconfig=kubeconfig).stdout
    assert "FailedScheduling" in events and re.search(r"\(x16 over \d+d\)", events)


def test_delete_by_name_and_by_file(kubeconfig, manifests):
    corral("apply", "-f", str(manifests), kubeconfig=kubeconfig)
    assert corral("delete", "pod", "web", kubeconfig=kubeconfig).stdout == 'pod "web" deleted\n'
    assert corral("delete", "-f", str(manifests / "node.yaml"), kubeconfig=kubeconfig).stdout == 'node "node-1" deleted\n'
    missing = corral("delete", "pod", "web", kubeconfig=kubeconfig, check=False)
    assert missing.returncode == 1 and missing.stderr == 'error: pods "web" not found\n'


def test_credentials_come_from_flag_then_environment_then_the_default_kubeconfig(server_process, tmp_path):
    home = tmp_path / "config"
    default = home / "corral" / "kubeconfig"
    default.parent.mkdir(parents=True)
    shutil.copy(server_process.kubeconfig, default)
    env = {"XDG_CONFIG_HOME": str(home)}
    assert corral("version", env=env).stdout.endswith("Server Version: v0.1.0 (Kubernetes API v1.37.0)\n")  # the default file
    broken = tmp_path / "broken.kubeconfig"
    broken.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n")
    refused = corral("version", env={**env, "KUBECONFIG": str(broken)}, check=False)  # $KUBECONFIG before the default
    assert refused.returncode == 1 and refused.stderr == f'error: {broken}: context "nowhere" is not defined\n'
    flagged = corral("version", "--kubeconfig", server_process.kubeconfig, env={**env, "KUBECONFIG": str(broken)})
    assert flagged.stdout.endswith("Server Version: v0.1.0 (Kubernetes API v1.37.0)\n")  # --kubeconfig before $KUBECONFIG
    # --server and CORRAL_SERVER replace only the URL; the kubeconfig's credentials still go with it.
    wrong = {**env, "CORRAL_SERVER": "127.0.0.1:1"}
    assert corral("version", env=wrong, check=False).returncode == 1
    assert corral("version", "--server", server_process.url, env=wrong).returncode == 0


def test_no_credentials_is_one_line_that_says_where_they_are_looked_for(server_process, tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "empty"), "CORRAL_SERVER": server_process.url}
    proc = corral("get", "pods", env=env, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: the server's certificate is not signed by a CA this client trusts: "
                                  "no kubeconfig found (looked for $KUBECONFIG, then ")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_a_wrong_token_is_refused_with_one_line_naming_the_kubeconfig(server_process, tmp_path):
    creds = server_process.credentials()
    forged = tmp_path / "forged.kubeconfig"
    forged.write_text(build_kubeconfig(creds.server, creds.ca_pem, user="admin",
                                       token=creds.token[:7] + "x" * (len(creds.token) - 7)))
    proc = corral("get", "pods", "--kubeconfig", str(forged), check=False)
    assert proc.returncode == 1
    assert proc.stderr == f"error: Unauthorized: is {forged} the kubeconfig of this server, with a valid credential?\n"


def test_a_token_with_a_line_break_is_one_line_naming_the_kubeconfig_and_field(tmp_path):
    pasted = tmp_path / "pasted.kubeconfig"  # a token pasted with the line after it: nothing is sent
    pasted.write_text(build_kubeconfig("https://127.0.0.1:1", b"", user="admin", token="abcdef.secret\nkind: x"))
    proc = corral("get", "pods", "--kubeconfig", str(pasted), check=False)
    assert proc.returncode == 1
    assert proc.stderr == (f'error: {pasted}: users["admin"].user.token: the token has a line break; a bearer token '
                           "is one line of printable ASCII characters without spaces\n")


@pytest.mark.parametrize(
    "content, expected",
    [
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: a\n", "document 1: not valid YAML",
                     id="malformed YAML names the document"),
        pytest.param(POD + "---\napiVersion: v1\nkind: Pod\nspec: {}\n", "document 2: metadata: Required value",
                     id="a missing field names document and field"),
        pytest.param("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: a}\n",
                     'document 1: kind: corral does not serve kind "StatefulSet"', id="unknown kinds are named"),
        pytest.param(POD.replace("image: busybox", "image: 42\n    ports: [{containerPort: x}]"),
                     "document 1 (Pod web): spec.containers[0].image", id="a wrong type names the field path"),
        pytest.param(POD.replace("name: web\n  labels", "name: " + "a" * 300 + "\n  labels"),
                     "metadata.name: Too long", id="an over-long name is refused"),
        pytest.param(POD + "---\n" + POD.replace("name: web", "name: second").replace("cpu: 100m", "cpu: lots"),
                     'document 2 (Pod second): spec.containers[0].resources.requests[cpu]: Invalid value: "lots"',
                     id="a document the server refuses leaves the documents before it unsent"),
        pytest.param(POD + "---\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
                     + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(6)),
                     "document 2: a YAML document of more than 200000 nodes", id="a YAML alias bomb is refused unexpanded"),
    ],
)
def test_bad_manifests_get_one_clear_line_and_change_nothing(kubeconfig, tmp_path, content, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    proc = corral("apply", "-f", str(path), kubeconfig=kubeconfig, check=False)
    assert proc.returncode == 1
    assert expected in proc.stderr and str(path) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert corral("get", "pods", "-o", "name", kubeconfig=kubeconfig).stdout == ""


def test_an_unreachable_server_is_one_clear_line():
    proc = corral("get", "pods", env={"CORRAL_SERVER": "127.0.0.1:1"}, check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: cannot reach the corral server at https://127.0.0.1:1")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_agent_address_and_port_mistakes_are_one_line(server_process, tmp_path):
    import socket

    proc = corral("agent", "--listen-address", "127.0.0.1:10250", check=False)
    assert proc.returncode == 2 and "'127.0.0.1:10250' is not an IP address (the port is --port)" in proc.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = corral("agent", *server_process.join_args(), "--name", "n1", "--data-dir", str(tmp_path / "a"),
                      "--address", "127.0.0.1", "--port", str(port), check=False)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(f"error: cannot serve the log endpoint on port {port}: ")
    assert "address already in use" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_the_docker_runtime_without_an_engine_is_one_line_saying_what_to_do(server_process, tmp_path):
    proc = corral("agent", *server_process.join_args(), "--name", "n1", "--data-dir", str(tmp_path / "a"),
                  "--runtime", "docker", "--docker-host", f"unix://{tmp_path}/no-dockerd.sock", check=False)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"error: cannot reach the Docker engine at unix://{tmp_path}/no-dockerd.sock "
                                  "(no socket there): start it") and "--runtime process" in proc.stderr


@pytest.mark.parametrize("flag, value, message", [
    ("--quota-backend-bytes", "1Mi", "--quota-backend-bytes must be 0 (none) or at least 16Mi, got 1Mi"),
    ("--quota-backend-bytes", "lots", "--quota-backend-bytes: "),
    ("--max-object-size", "1Ki", "--max-object-size must be at least 4Ki"),
    ("--history-bytes", "1Mi", "--history-bytes must be at least 4Mi, got 1Mi"),
    ("--history-bytes", "much", "--history-bytes: "),
    ("--node-monitor-grace-period", "15", "--node-monitor-grace-period 15s is shorter than twice the agents' "
                                          "heartbeat (10s, --node-heartbeat)"),
    ("--no-scheduler", "--scheduler-process", "--scheduler-process runs the scheduler in a process of its own; "
                                              "--no-scheduler runs none"),
])
def test_server_size_flags_out_of_range_are_one_line(tmp_path, flag, value, message):
    proc = corral("server", "--data-dir", str(tmp_path / "d"), "--address", "127.0.0.1:0", flag, value, check=False)
    assert proc.returncode == 1 and proc.stderr.startswith(f"error: {message}"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_the_server_lengthens_node_leases_past_its_max_node_heartbeats(tmp_path):
    """`--max-node-heartbeats 0.1` with 10 s heartbeats: past one node, every node Lease is lengthened."""
    with ServerProcess(str(tmp_path / "s"), "--no-scheduler", "--max-node-heartbeats", "0.1") as server:
        kc = server.kubeconfig
        docs = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"}} for i in range(3)]
        docs.append({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": "n0", "namespace": "kube-node-lease"},
                     "spec": {"holderIdentity": "n0", "leaseDurationSeconds": 40}})
        (tmp_path / "nodes.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        corral("apply", "-f", str(tmp_path / "nodes.json"), kubeconfig=kc)
        lease = json.loads(corral("get", "lease", "n0", "-n", "kube-node-lease", "-o", "json", kubeconfig=kc).stdout)
        assert lease["spec"]["leaseDurationSeconds"] == 120  # 3 nodes: three times the 40 s grace period


def test_unknown_resource_types_are_refused():
    proc = corral("get", "statefulsets", env={"CORRAL_SERVER": "127.0.0.1:1"}, check=False)
    assert proc.returncode == 1 and 'doesn\'t have a resource type "statefulsets"' in proc.stderr


def test_get_watch_prints_the_table_then_each_change(kubeconfig, manifests):
    corral("apply", "-f", str(manifests / "node.yaml"), kubeconfig=kubeconfig)
    env = child_env({"KUBECONFIG": kubeconfig})
    watcher = subprocess.Popen([CORRAL, "get", "pods", "--watch"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        header = watcher.stdout.readline()
        assert header.split()[:3] == ["NAME", "READY", "STATUS"]
        corral("apply", "-f", str(manifests / "pod.yaml"), kubeconfig=kubeconfig)
        assert watcher.stdout.readline().split()[:3] == ["web", "0/1", "Pending"]
        corral("delete", "pod", "web", kubeconfig=kubeconfig)
        # The scheduler may report on the pod (PodScheduled=False) before the deletion shows.
        lines = [watcher.stdout.readline().rstrip() for _ in range(1)]
        while not lines[-1].endswith("(deleted)") and len(lines) < 5:
            lines.append(watcher.stdout.readline().rstrip())
        assert lines[-1].startswith("web") and lines[-1].endswith("(deleted)"), lines
    finally:
        watcher.kill()
        watcher.wait()


def test_a_second_server_on_the_same_data_directory_is_refused_in_one_line(server_process):
    proc = corral("server", "--data-dir", server_process.data_dir, "--address", "127.0.0.1:0",
                  "--no-write-kubeconfig", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error: another corral server (pid {server_process.proc.pid}) is using ")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_sim_on_a_taken_port_is_one_line_and_without_address_takes_a_free_one(tmp_path):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        proc = corral("sim", "--nodes", "1", "--address", f"127.0.0.1:{port}", check=False)
        assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert proc.stderr.startswith(f"error: cannot serve on 127.0.0.1:{port}: ") and "--address" in proc.stderr
        with socket.socket() as default:
            default.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past any TIME_WAIT of earlier tests
            try:
                default.bind(("127.0.0.1", 7443))
                default.listen()
            except OSError:
                pass  # someone else listens there: taken all the same
            sim = subprocess.Popen([CORRAL, "sim", "--nodes", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=child_env())
            try:
                line = sim.stdout.readline()
                assert line.startswith("corral server (in-process) listening on https://127.0.0.1:"), \
                    line + sim.stderr.read() if sim.poll() is not None else line
                assert ":7443" not in line
            finally:
                sim.terminate()
                sim.wait(15)


def test_get_shows_workloads_with_kubectls_columns_and_several_kinds_at_once(server_process):
    kc = server_process.kubeconfig
    corral("apply", "-f", os.path.join(os.path.dirname(__file__), "..", "..", "examples", "deployment.yaml"),
           kubeconfig=kc)

    def listed() -> str:
        return corral("get", "deployments,replicasets,pods", kubeconfig=kc).stdout

    out = listed()
    for _ in range(100):
        if out.count("pod/hello-") == 3:
            break
        time.sleep(0.05)
        out = listed()
    tables = out.strip().split("\n\n")
    assert [t.split()[0:5] for t in tables] == [["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
                                                ["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
                                                ["NAME", "READY", "STATUS", "RESTARTS", "NODE"]]
    assert "deployment.apps/hello   0/3" in tables[0]
    assert tables[1].splitlines()[1].split()[1:4] == ["3", "3", "0"]
    assert tables[2].count("pod/hello-") == 3
    wide = corral("get", "rs", "-o", "wide", kubeconfig=kc).stdout
    assert wide.split()[5:8] == ["CONTAINERS", "IMAGES", "SELECTOR"] and "app=hello,pod-template-hash=" in wide
    refused = corral("get", "pods,nodes", "web", kubeconfig=kc, check=False)
    assert refused.returncode != 0 and "take no NAME" in refused.stderr
