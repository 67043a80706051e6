"""`corral server --local-agent` (what `make up` runs): this machine as a node, and what stopping it leaves."""

from __future__ import annotations

import os
import signal

from corral.testing.cluster import wait_for
from corral.testing.server import ServerProcess
from tests.agent.test_end_to_end import apply, phase, pod_yaml, pods
from tests.cli.test_cli import corral


def _pid(kc: str) -> int:
    """The sleeper's process, from its container id (``process://PID``)."""
    return int(pods(kc)["sleeper"]["status"]["containerStatuses"][0]["containerID"].removeprefix("process://"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stopping_the_server_says_its_pods_keep_running_and_the_next_start_picks_them_up(tmp_path):
    """Its pods outlive it, as a kubelet's do, and the user is told so (and how to stop them);
    started again, the agent adopts the same process, and deleting the pod stops it."""
    data = str(tmp_path / "s")
    server = ServerProcess(data, "--local-agent", "--no-scheduler-process")
    pids: list[int] = []
    try:
        server.start()
        kc = server.kubeconfig
        wait_for(lambda: " Ready " in corral("get", "nodes", kubeconfig=kc).stdout, what="this machine Ready")
        apply(kc, tmp_path, pod_yaml("sleeper", ["sh", "-c", "exec sleep 600"]))
        wait_for(lambda: phase(kc, "sleeper") == "Running", what="sleeper Running")
        pids = [_pid(kc)]
        server.stop()
        assert server.proc.returncode == 0, server.log()
        assert "stopped; the 1 pod of this machine keeps running: the next start picks it up" in server.log()
        assert _alive(pids[0])

        server.start()
        wait_for(lambda: phase(kc, "sleeper") == "Running", what="sleeper Running again")
        assert [_pid(kc)] == pids
        corral("delete", "pod", "sleeper", kubeconfig=kc)
        wait_for(lambda: not _alive(pids[0]), what="the sleeper's process to end")  # the new agent adopted it
        server.stop()
        assert "keep" not in server.log()  # nothing left running: nothing said
    finally:
        server.stop()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
