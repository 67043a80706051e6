"""`corral server --scheduler-process`: the scheduler in a child process of the server, through the
real server and the real CLI, as a user runs them."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import pytest

from corral.testing import ServerProcess
from tests.cli.test_cli import corral
from tests.controllers.nodes.test_eviction_limits import metrics
from tests.scheduler.test_end_to_end import (_metrics, manifests, node, place_four_pods_and_one_too_big, pod,
                                             pod_nodes, wait_for)


def scheduler_children(server: ServerProcess) -> list[int]:
    """Process ids of the server's scheduler processes (its children running corral.scheduler.process)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if parent == server.proc.pid and b"corral.scheduler.process" in cmdline:
            found.append(int(entry))
    return found


@pytest.fixture
def split_server(tmp_path):
    with ServerProcess(str(tmp_path / "cluster"), "--scheduler-process") as proc:
        yield proc


def test_the_scheduler_in_its_own_process_places_pods_reports_failures_and_explains(split_server, tmp_path):
    kc = split_server.kubeconfig
    [child] = wait_for(lambda: scheduler_children(split_server), what="the scheduler process")
    place_four_pods_and_one_too_big(kc, tmp_path)
    # The child's writes other than bindings reach the store too: the pod's condition and its events.
    message = "0/2 nodes are available: 2 Insufficient cpu."
    described = wait_for(lambda: (lambda out: out if message in out else None)(
        corral("describe", "pod", "huge", kubeconfig=kc).stdout), what="the FailedScheduling condition")
    assert "FailedScheduling" in described and "Unschedulable" in described
    assert "Scheduled" in corral("describe", "pod", "web-0", kubeconfig=kc).stdout
    # Explain is asked of the child; its metrics are in the server's.
    explained = corral("explain", "pod", "huge", kubeconfig=kc).stdout
    assert message in explained and "NodeResourcesFit: Insufficient cpu" in explained
    metrics = asyncio.run(_metrics(split_server))
    assert 'corral_scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 4.0' in metrics
    assert "corral_apiserver_requests_total" in metrics  # the server's own, as before
    # A plan is decided by the child, on a copy of its state: the pod would go where capacity is left.
    later = manifests(tmp_path, pod("later", "100m"))
    planned = corral("plan", "-f", later, kubeconfig=kc).stdout
    assert "default/later" in planned and "1 pod(s) would be placed." in planned, planned
    # ... and its version asked of the child again: another one refuses the apply; the plan's, with
    # nothing changed since, lets it go ahead.
    version = planned.rsplit("--if-plan-version ", 1)[1].split()[0]
    stale = corral("apply", "-f", later, "--if-plan-version", "0" * len(version), kubeconfig=kc, check=False)
    assert stale.returncode != 0 and "later" not in corral("get", "pods", kubeconfig=kc).stdout
    corral("apply", "-f", later, "--if-plan-version", version, kubeconfig=kc)
    assert "later" in corral("get", "pods", kubeconfig=kc).stdout
    assert scheduler_children(split_server) == [child]
    # The server takes its scheduler process with it when it stops.
    split_server.stop()
    wait_for(lambda: not os.path.exists(f"/proc/{child}") or _zombie(child), what="the scheduler process to exit")


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_the_scheduler_process_takes_the_collector_over_with_its_state_not_at_the_first_pod(split_server, tmp_path):
    """Each process runs one full collection when it takes the cyclic collector over; the scheduler
    process does so once its state is in, not in the middle of the first pods it schedules (there it
    was a pause of 0.28 s at 50,000 nodes). The passes and their time are in the server's /metrics."""
    kc = split_server.kubeconfig
    corral("apply", "-f", manifests(tmp_path, node("node-a"), node("node-b")), kubeconfig=kc)
    passes, started = "corral_scheduler_gc_passes_total", '{kind="start"}'
    text = wait_for(lambda: (lambda m: m if metrics(m, passes).get(started) else None)(
        asyncio.run(_metrics(split_server))), what="the scheduler process's collector to start, before any pod")
    assert metrics(text, passes)[started] == 1
    assert metrics(text, "corral_server_gc_passes_total")[started] == 1
    assert metrics(text, "corral_scheduler_gc_pause_seconds_total")[""] > 0
    assert metrics(text, "corral_server_gc_pause_seconds_total")[""] > 0
    for kind in ("young", "full"):
        assert f'{{kind="{kind}"}}' in metrics(text, passes)

    corral("apply", "-f", manifests(tmp_path, *[pod(f"web-{i}", "100m") for i in range(3)]), kubeconfig=kc)
    wait_for(lambda: all(pod_nodes(kc).get(f"web-{i}", "<none>") != "<none>" for i in range(3)),
             what="the pods to be placed")
    assert metrics(asyncio.run(_metrics(split_server)), passes)[started] == 1  # the first pods ran none


def test_ctrl_c_in_the_servers_terminal_stops_the_server_and_its_scheduler_process_without_a_restart(tmp_path):
    """A Ctrl-C reaches every process of the terminal's foreground group, the scheduler process too,
    which may take it before the server does: it leaves stopping to the server, so the server does not
    take its end for a crash to recover from (`make up`, then Ctrl-C, had logged "the scheduler process
    exited (code 0); starting another in 1 s" as it stopped)."""
    import subprocess
    import time

    from corral.testing.process import child_env, free_port

    data = tmp_path / "cluster"
    data.mkdir()
    log_path = data / "server.log"
    with open(log_path, "wb") as log:  # in a process group of its own, as a terminal's job is
        server = subprocess.Popen([sys.executable, "-m", "corral", "server", "--data-dir", str(data),
                                   "--address", f"127.0.0.1:{free_port()}", "--scheduler-process", "--local-agent"],
                                  stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=child_env(),
                                  start_new_session=True)
    try:
        proc = ServerProcess(str(data))
        proc.proc = server
        wait_for(lambda: "listening on" in log_path.read_text(), timeout=60, what="the server to listen")
        [child] = wait_for(lambda: scheduler_children(proc), timeout=30, what="the scheduler process")
        time.sleep(1)  # its first frame taken in
        os.kill(child, signal.SIGINT)  # the child first: the order in which make up logged the restart
        time.sleep(1)
        assert not _zombie(child) and scheduler_children(proc) == [child]
        os.killpg(server.pid, signal.SIGINT)
        assert server.wait(30) == 0
        assert _zombie(child) or not os.path.exists(f"/proc/{child}")
        assert "the scheduler process exited" not in log_path.read_text()
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def test_a_scheduler_process_that_dies_is_started_again_and_places_what_came_meanwhile(split_server, tmp_path):
    kc = split_server.kubeconfig
    [first] = wait_for(lambda: scheduler_children(split_server), what="the scheduler process")
    corral("apply", "-f", manifests(tmp_path, node("node-a")), kubeconfig=kc)
    corral("apply", "-f", manifests(tmp_path, pod("before", "100m")), kubeconfig=kc)
    wait_for(lambda: pod_nodes(kc).get("before") == "node-a", what="the first pod to be placed")

    os.kill(first, signal.SIGKILL)
    corral("apply", "-f", manifests(tmp_path, pod("meanwhile", "100m")), kubeconfig=kc)
    [second] = wait_for(lambda: [p for p in scheduler_children(split_server) if p != first], timeout=30,
                        what="another scheduler process")
    assert second != first
    placed = wait_for(lambda: (lambda m: m if m.get("meanwhile") == "node-a" else None)(pod_nodes(kc)), timeout=30,
                      what="the pod created while no scheduler ran to be placed")
    assert placed["before"] == "node-a"  # counted on its node by the new child, not placed twice
    assert "the scheduler process exited" in split_server.log()


async def test_a_server_that_stops_ends_its_scheduler_process_and_keeps_running_without_it(tmp_path):
    """As a server that stops leading does: the child goes, the server (its parent) stays."""
    from corral.testing.server import running_server

    async with running_server(str(tmp_path / "inproc"), scheduler_process=True, controllers=False) as server:
        pid = await asyncio.wait_for(_pid_of(server), 30)
        assert os.path.exists(f"/proc/{pid}")
        await server._stop_leading()
        assert server.scheduler is None
        assert _zombie(pid) or not os.path.exists(f"/proc/{pid}")


async def _pid_of(server) -> int:
    while server.scheduler is None or server.scheduler.pid is None:
        await asyncio.sleep(0.05)
    return server.scheduler.pid


async def test_the_child_takes_in_changes_and_binds_while_it_answers_a_long_plan():
    """Spoken to as the server speaks to it: a plan of 2,000 pods asked, then a pod created. The new
    pod is bound (its binding asked of the server) before the plan is answered: a question does not
    hold up the changes that come after it."""
    import msgspec

    from corral.plan.expand import PlannedPod
    from corral.plan.place import asked
    from corral.scheduler.process import _frame, _read_frame, child_args
    from corral.testing.builders import make_node, make_pod
    from corral.testing.process import child_env

    def stored(obj: dict) -> bytes:
        return msgspec.json.encode(obj)

    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "uid": "ns"}}
    nodes = [make_node(f"n{i}").capacity(cpu=64, memory="256Gi", pods=5000).obj for i in range(2)]
    planned = [PlannedPod(make_pod(f"plan-{i}").requests(cpu="10m", memory="16Mi").obj, f"Pod default/plan-{i}")
               for i in range(2000)]
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "corral.scheduler.process", *child_args(None, 10.0, 10.0),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=child_env(), limit=2 ** 30)
    try:
        child.stdin.write(_frame(["changes", [[0, "default", stored(namespace)],
                                              *[[1, n["metadata"]["name"], stored(n)] for n in nodes]]]))
        child.stdin.write(_frame(["ask", 7, "plan", asked(1, planned, [], [], None)]))
        meanwhile = make_pod("meanwhile").requests(cpu="10m", memory="16Mi").obj
        child.stdin.write(_frame(["changes", [[4, "default/meanwhile", stored(meanwhile)]]]))
        await child.stdin.drain()
        seen = []
        async with asyncio.timeout(60):
            while True:
                message = await _read_frame(child.stdout)
                if message[0] == "requests":
                    seen += [("bind", args[1]) for _, op, args in message[1] if op == "bind"]
                elif message[0] == "answer" and message[1] == 7:
                    assert message[2] is True, message
                    seen.append(("answer", message[3][1]["placed"]))
                    break
    finally:
        child.stdin.close()
        await child.wait()
    assert seen == [("bind", "meanwhile"), ("answer", 2000)]


async def test_the_childs_event_create_answers_the_count_the_server_stored():
    """An event the child's recorder forgot and created again: the server adds it to the stored one
    and the count it now holds comes back to the child (which counts on from it)."""
    from corral.scheduler.process import ChannelWriter, _decode, _LENGTH

    class Out:
        def __init__(self) -> None:
            self.frames: list = []

        def write(self, data: bytes) -> None:
            self.frames.append(_decode(data[_LENGTH.size:]))

    out = Out()
    writer = ChannelWriter(out)  # type: ignore[arg-type]
    created = asyncio.create_task(writer.create_event("default", {"metadata": {"name": "p.abc"}}))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    [[kind, [[request_id, op, args]]]] = out.frames
    assert (kind, op, args[0]) == ("requests", "create_event", "default")
    writer.replied([[request_id, True, 7]])
    assert await created == 7


@pytest.fixture
def one_core():
    """This process (and so the servers it starts) on one core, as `taskset -c 0` runs it."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    yield
    os.sched_setaffinity(0, before)


def _scheduler_line(server: ServerProcess) -> str:
    return next(line for line in server.log().splitlines() if line.startswith("scheduler: "))


def test_by_default_the_scheduler_runs_in_a_child_where_two_cores_are_usable_and_inside_on_one(tmp_path):
    from corral.server.control.cores import usable_cores

    with ServerProcess(str(tmp_path / "default")) as server:
        if usable_cores() >= 2:
            assert "in a child process" in _scheduler_line(server)
            wait_for(lambda: scheduler_children(server), what="the scheduler process")
        else:  # pragma: no cover - CI has two cores
            assert _scheduler_line(server) == "scheduler: inside the server process"
    with ServerProcess(str(tmp_path / "inside"), "--no-scheduler-process") as server:
        assert _scheduler_line(server) == "scheduler: inside the server process"
        assert scheduler_children(server) == []


def test_on_one_core_the_scheduler_stays_inside_the_server_unless_asked(tmp_path, one_core):
    with ServerProcess(str(tmp_path / "one")) as server:
        assert _scheduler_line(server) == "scheduler: inside the server process"
        assert scheduler_children(server) == []
        kc = server.kubeconfig
        corral("apply", "-f", manifests(tmp_path, node("n1"), pod("p1", cpu="100m")), kubeconfig=kc)
        assert wait_for(lambda: pod_nodes(kc).get("p1"), what="p1 bound") == "n1"
    with ServerProcess(str(tmp_path / "asked"), "--scheduler-process") as server:
        assert "in a child process" in _scheduler_line(server)
        wait_for(lambda: scheduler_children(server), what="the scheduler process")


def test_no_scheduler_runs_no_scheduler_process_either(tmp_path):
    with ServerProcess(str(tmp_path / "none"), "--no-scheduler") as server:
        assert "listening on" in server.log()
        assert not any(line.startswith("scheduler: ") for line in server.log().splitlines())
        assert scheduler_children(server) == []


def test_a_server_on_etcd_starts_its_scheduler_process_without_grpc_fork_warnings(tmp_path):
    """gRPC's fork handlers logged "Other threads are currently calling into gRPC, skipping fork()
    handlers" into the server's output whenever it started its child; corral forks only to exec."""
    from corral.testing.etcd import EtcdProcess

    etcd = EtcdProcess(str(tmp_path / "etcd")).start()
    try:
        with ServerProcess(str(tmp_path / "server"), "--store", etcd.url, "--scheduler-process") as server:
            kc = server.kubeconfig
            wait_for(lambda: scheduler_children(server), what="the scheduler process")
            corral("apply", "-f", manifests(tmp_path, node("n1"), pod("p1", cpu="100m")), kubeconfig=kc)
            assert wait_for(lambda: pod_nodes(kc).get("p1"), what="p1 bound") == "n1"
            assert "fork()" not in server.log(), server.log()
    finally:
        etcd.stop()
