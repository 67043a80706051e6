"""kubectl exec, cp, port-forward and top against a real cluster (one agent, process runtime), as a
user runs them: through the server, which authorises the user and relays to (or asks) the pod's agent."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import socket
import struct
import subprocess
import sys
import termios
import time

import pytest

from corral.testing.cluster import wait_for
from tests.agent.test_end_to_end import _http, apply, local_cluster, phase, pod_yaml
from tests.agent.test_official_client import KUBECTL
from tests.cli.test_cli import corral

WEB_PORT = 18791


def run(kc: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([KUBECTL, "--kubeconfig", kc, *args], capture_output=True, text=True, input=stdin,
                          timeout=60)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("streams")
    with local_cluster(tmp_path, 1) as c:
        apply(c.kubeconfig, tmp_path, pod_yaml("web", ["python3", "-m", "http.server", str(WEB_PORT)], port=WEB_PORT))
        apply(c.kubeconfig, tmp_path, pod_yaml("done", ["true"], restart="Never"))
        apply(c.kubeconfig, tmp_path, pod_yaml("burn", ["sh", "-c", "while :; do :; done"]))
        apply(c.kubeconfig, tmp_path, pod_yaml("echo", ["sh", "-c", 'while read line; do echo "echo: $line"; done'])
              .replace("    command:", "    stdin: true\n    command:", 1))
        wait_for(lambda: [phase(c.kubeconfig, n) for n in ("web", "done", "burn", "echo")]
                 == ["Running", "Succeeded", "Running", "Running"], what="web, burn and echo Running, done Succeeded")
        c.tmp_path = tmp_path
        yield c


def test_exec_runs_in_the_pod_as_its_user_with_its_environment_and_returns_its_exit_code(cluster):
    out = run(cluster.kubeconfig, "exec", "web", "--", "sh", "-c", "echo $HOSTNAME; id -un; echo oops >&2; exit 3")
    assert out.returncode == 3, out.stderr
    assert out.stdout == "web\nnobody\n"
    assert "oops" in out.stderr and "command terminated with exit code 3" in out.stderr
    ok = run(cluster.kubeconfig, "exec", "web", "-c", "c0", "--", "pwd")
    assert ok.returncode == 0 and ok.stdout.strip().endswith("/c0")  # the container's working directory


def test_exec_with_stdin_reads_what_the_user_pipes_in_to_its_end(cluster):
    out = run(cluster.kubeconfig, "exec", "-i", "web", "--", "sh", "-c", "tr a-z A-Z; echo done", stdin="hello\nworld\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout == "HELLO\nWORLD\ndone\n"


def test_exec_with_a_terminal_gives_a_tty_of_the_users_size_and_a_shell_that_answers(cluster):
    code, screen = _in_terminal(cluster.kubeconfig, ["exec", "-it", "web", "--", "sh"],
                                keys=b"tty; stty size; echo answer $((6*7))\rexit 5\r")
    assert code == 5, screen
    assert b"/dev/pts/" in screen and b"33 101" in screen and b"answer 42" in screen


def test_errors_reach_the_user_in_words(cluster):
    missing = run(cluster.kubeconfig, "exec", "web", "--", "no-such-program-xyz")
    assert missing.returncode != 0 and 'exec: "no-such-program-xyz": executable file not found' in missing.stderr
    bad_container = run(cluster.kubeconfig, "exec", "web", "-c", "nope", "--", "true")
    assert bad_container.returncode != 0 and "container nope is not valid for pod web" in bad_container.stderr
    finished = run(cluster.kubeconfig, "exec", "done", "--", "true")
    assert finished.returncode != 0 and "completed pod" in finished.stderr


def test_cp_copies_files_into_the_pod_and_back_out(cluster):
    src = cluster.tmp_path / "upload.txt"
    src.write_text("uploaded through kubectl cp\n")
    up = run(cluster.kubeconfig, "cp", str(src), "web:upload.txt")
    assert up.returncode == 0, up.stderr
    assert run(cluster.kubeconfig, "exec", "web", "--", "cat", "upload.txt").stdout == "uploaded through kubectl cp\n"
    back = cluster.tmp_path / "download.txt"
    down = run(cluster.kubeconfig, "cp", "web:upload.txt", str(back))
    assert down.returncode == 0, down.stderr
    assert back.read_text() == "uploaded through kubectl cp\n"


def test_port_forward_reaches_the_pods_http_port_for_each_connection(cluster):
    local = _free_port()
    with _port_forward(cluster.kubeconfig, f"{local}:{WEB_PORT}") as pf:
        for _ in range(3):  # one SPDY session, a tunnel per connection
            body = wait_for(lambda: _http(f"http://127.0.0.1:{local}/"), what="the forwarded port to answer")
            assert b"Directory listing" in body
    assert pf.stdout.read().count("Handling connection for") >= 3


def test_port_forward_to_a_port_the_pod_does_not_declare_is_refused_with_the_reason(cluster):
    local = _free_port()
    with _port_forward(cluster.kubeconfig, f"{local}:22") as pf:
        assert _http(f"http://127.0.0.1:{local}/") is None
    assert "port 22 is not a containerPort of the pod" in pf.stderr.read()


def test_attach_shows_the_containers_output_from_now_and_feeds_its_open_stdin(cluster):
    proc = subprocess.Popen([KUBECTL, "--kubeconfig", cluster.kubeconfig, "attach", "-i", "echo"], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        time.sleep(1.5)  # attached (kubectl says nothing on stdout until the container does)
        proc.stdin.write("hello\nworld\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "echo: hello\n" and proc.stdout.readline() == "echo: world\n"
    finally:
        proc.terminate()  # detaching leaves the container running, as in Kubernetes
        proc.wait(timeout=10)
    assert phase(cluster.kubeconfig, "echo") == "Running"
    again = subprocess.Popen([KUBECTL, "--kubeconfig", cluster.kubeconfig, "attach", "-i", "echo"], text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:  # its stdin stayed open for the next attachment
        time.sleep(1.5)
        again.stdin.write("again\n")
        again.stdin.flush()
        assert again.stdout.readline() == "echo: again\n"
    finally:
        again.terminate()
        again.wait(timeout=10)


def test_top_shows_what_a_pod_burns_and_what_the_node_uses(cluster):
    kc = cluster.kubeconfig

    def burning() -> int | None:
        out = run(kc, "top", "pods", "--no-headers")
        rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()}
        millicores = int(rows["burn"][1].rstrip("m")) if "burn" in rows else 0
        return millicores if millicores >= 500 else None  # one busy loop: about a core

    assert wait_for(burning, what="kubectl top pods to show the busy loop") <= 1100
    nodes = run(kc, "top", "nodes", "--no-headers").stdout.split()
    assert nodes[0] == "node-0" and int(nodes[1].rstrip("m")) >= 500 and nodes[3].endswith("Mi")
    containers = run(kc, "top", "pod", "burn", "--containers", "--no-headers").stdout.split()
    assert containers[:2] == ["burn", "c0"]
    scraped = run(kc, "get", "--raw", "/api/v1/nodes/node-0/proxy/metrics/resource").stdout
    line = next(x for x in scraped.splitlines()
                if x.startswith('container_cpu_usage_seconds_total{container="c0",namespace="default",pod="burn"}'))
    assert float(line.split()[1]) > 0.5 and "node_memory_working_set_bytes" in scraped
    assert "container_cpu_usage_seconds_total" in run(kc, "get", "--raw", "/api/v1/nodes/node-0/proxy/metrics").stdout


def test_a_view_user_may_neither_exec_nor_port_forward(cluster):
    kc = cluster.tmp_path / "vera.kubeconfig"
    kc.write_text(corral("token", "create", "--user", "vera", kubeconfig=cluster.kubeconfig).stdout)
    corral("apply", "-f", "-", kubeconfig=cluster.kubeconfig, stdin=json.dumps({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "vera-view", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "vera"}]}))
    assert run(str(kc), "get", "pod", "web").returncode == 0
    out = run(str(kc), "exec", "web", "--", "id")
    assert out.returncode != 0 and 'cannot create resource "pods/exec"' in out.stderr
    local = _free_port()
    with _port_forward(str(kc), f"{local}:{WEB_PORT}", wait=False) as pf:
        pf.wait(timeout=30)
    assert 'cannot create resource "pods/portforward"' in pf.stderr.read()
    assert "burn" in run(str(kc), "top", "pods").stdout  # but may see what its pods use
    proxied = run(str(kc), "get", "--raw", "/api/v1/nodes/node-0/proxy/metrics/resource")
    assert proxied.returncode != 0 and 'cannot get resource "nodes/proxy"' in proxied.stderr


# --- helpers ------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _port_forward:
    def __init__(self, kc: str, ports: str, *, wait: bool = True) -> None:
        self.args = [KUBECTL, "--kubeconfig", kc, "port-forward", "pod/web", ports, "--address", "127.0.0.1"]
        self.wait = wait

    def __enter__(self) -> subprocess.Popen:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if self.wait:
            line = self.proc.stdout.readline()
            assert line.startswith("Forwarding from"), (line, self.proc.stderr.read() if self.proc.poll() else "")
        return self.proc

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=10)


def _in_terminal(kc: str, args: list[str], *, keys: bytes, seconds: float = 20) -> tuple[int, bytes]:
    """Run kubectl on a pseudo-terminal of 101×33, type ``keys`` once it is connected, and return its
    exit code and what it showed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 101, 0, 0))
    proc = subprocess.Popen([KUBECTL, "--kubeconfig", kc, *args], stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True)
    os.close(slave)
    screen, typed, deadline = b"", False, time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 4096)
                except OSError:  # EIO: kubectl has exited
                    break
                screen += chunk
            if not typed and b"$ " in screen:  # the shell's prompt: it is listening
                os.write(master, keys)
                typed = True
            if proc.poll() is not None and not ready:
                break
        return proc.wait(timeout=10), screen
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def test_the_official_python_client_execs_with_stdin_and_forwards_ports_over_its_channel_protocol(cluster):
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config
    from kubernetes.stream import portforward, stream

    config = k8s.Configuration()
    k8s_config.load_kube_config(config_file=cluster.kubeconfig, client_configuration=config)
    with k8s.ApiClient(config) as client:
        api = k8s.CoreV1Api(client)
        assert stream(api.connect_get_namespaced_pod_exec, "web", "default", command=["sh", "-c", "echo $HOSTNAME"],
                      stderr=True, stdin=False, stdout=True, tty=False) == "web\n"
        session = stream(api.connect_get_namespaced_pod_exec, "web", "default", _preload_content=False,
                         command=["sh", "-c", "read x; echo got $x; exit 7"], stderr=True, stdin=True, stdout=True,
                         tty=False)
        session.write_stdin("piped\n")  # as a text frame: the client's way with str
        session.run_forever(timeout=10)
        assert session.read_stdout() == "got piped\n" and session.returncode == 7

        forwarded = portforward(api.connect_get_namespaced_pod_portforward, "web", "default", ports=str(WEB_PORT))
        sock = forwarded.socket(WEB_PORT)
        sock.setblocking(True)
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.0 200 OK") and b"Directory listing" in answer
        assert forwarded.error(WEB_PORT) is None

        refused = portforward(api.connect_get_namespaced_pod_portforward, "web", "default", ports="22")
        wait_for(lambda: refused.error(22), what="the refusal on the error channel")
        assert "port 22 is not a containerPort of the pod" in refused.error(22)


def test_corral_exec_and_port_forward_do_what_kubectls_do(cluster):
    kc = cluster.kubeconfig
    out = corral("exec", "web", "--", "sh", "-c", "echo $HOSTNAME; echo e >&2; exit 3", kubeconfig=kc, check=False)
    assert (out.returncode, out.stdout, out.stderr) == (3, "web\n", "e\n")
    piped = corral("exec", "-i", "web", "--", "sh", "-c", "cat; echo end", kubeconfig=kc, stdin="abc\n")
    assert piped.stdout == "abc\nend\n"
    for args, said in ((("nope", "--", "true"), 'error: pods "nope" not found'),
                       (("web", "-c", "zz", "--", "true"), "error: container zz is not valid for pod web"),
                       (("web", "--", "no-such-cmd"), 'error: exec: "no-such-cmd": executable file not found')):
        failed = corral("exec", *args, kubeconfig=kc, check=False)
        assert failed.returncode == 1 and failed.stderr.startswith(said), failed.stderr

    proc = subprocess.Popen([sys.executable, "-m", "corral", "port-forward", "web", f"0:{WEB_PORT}", "0:22"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "KUBECONFIG": kc})
    try:
        web, ssh = (int(proc.stdout.readline().split()[2].rsplit(":", 1)[1]) for _ in range(2))
        assert b"Directory listing" in _http(f"http://127.0.0.1:{web}/")
        assert _http(f"http://127.0.0.1:{ssh}/") is None
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "error: forwarding to port 22: port 22 is not a containerPort of the pod" in err
