"""The process runtime's containment, with real processes: who pods run as, how many processes
they may have, and where they may write."""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import socket
from pathlib import Path

import pytest

from corral.agent.runtimes.base import StartError, StreamError
from corral.agent.runtimes.process import ProcessRuntime

ROOT = os.geteuid() == 0


@pytest.fixture
def runtimes():
    """ProcessRuntime(...), whose pods' directories go when the test ends (when the pods' user cannot
    reach the test's directory they are under /var/lib/corral, outside it)."""
    made = []

    def make(data_dir: str, **kwargs) -> ProcessRuntime:
        made.append(ProcessRuntime(data_dir, **kwargs))
        return made[-1]

    yield make
    for rt in made:
        if rt.cgroups is not None:  # the pods' control groups, then the agent's folders
            rt.cgroups.close()
        shutil.rmtree(rt.root, ignore_errors=True)


def pod(uid: str, *command: str, working_dir: str | None = None) -> tuple[dict, dict]:
    container = {"name": "c", "image": "none", "command": list(command)}
    if working_dir is not None:
        container["workingDir"] = working_dir
    return {"metadata": {"uid": uid, "namespace": "default", "name": uid}, "spec": {"containers": [container]}}, \
        container


async def run(rt: ProcessRuntime, uid: str, *command: str, **kw) -> str:
    p, c = pod(uid, *command, **kw)
    ref = await rt.start(p, c)
    await asyncio.wait_for(rt.wait(ref), 30)
    return rt.log_path(uid, "c").read_text()


def processes_of(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                continue
    return count


async def test_pods_run_as_an_unprivileged_user_never_as_the_agent_when_it_is_root(tmp_path, runtimes):
    rt = runtimes(str(tmp_path))
    expected = pwd.getpwnam("nobody").pw_uid if ROOT else os.geteuid()
    # It reaches its own directory by its absolute path too (as most programs do, from getcwd).
    out = await run(rt, "who", "sh", "-c", 'id -u; echo $HOME; ls "$(pwd)" >/dev/null && echo reachable')
    uid, home, reachable = out.split()
    assert int(uid) == expected and reachable == "reachable"
    if ROOT:  # its own directory, not the agent's home; the pods' directories passable, not listable
        assert home == str(rt.root / "who" / "c")
        assert os.stat(rt.root).st_mode & 0o777 == 0o711
    else:
        assert os.stat(rt.root).st_mode & 0o777 == 0o700
    assert os.stat(rt.log_path("who", "c")).st_mode & 0o777 == 0o600


async def test_a_fork_bomb_stops_at_the_process_limit(tmp_path, runtimes):
    user = pwd.getpwnam("nobody").pw_uid if ROOT else os.geteuid()
    limit = processes_of(user) + 8
    rt = runtimes(str(tmp_path), max_processes=limit)
    p, c = pod("bomb", "sh", "-c", "i=0; while [ $i -lt 60 ]; do sleep 3 & i=$((i+1)); done; wait")
    ref = await rt.start(p, c)
    await asyncio.sleep(1.5)
    assert processes_of(user) <= limit  # 60 were asked for
    await asyncio.wait_for(rt.wait(ref), 30)
    assert "fork" in rt.log_path("bomb", "c").read_text().lower()


async def test_the_working_directory_cannot_lead_out_of_the_containers_own(tmp_path, runtimes):
    rt = runtimes(str(tmp_path))
    p, c = pod("esc", "true", working_dir="../../../..")
    with pytest.raises(StartError, match="leads out of the container's directory"):
        await rt.start(p, c)
    out = await run(rt, "inside", "sh", "-c", "pwd", working_dir="/data/sub")
    assert out.strip() == str(rt.root / "inside" / "c" / "data" / "sub")


@pytest.mark.skipif(not ROOT, reason="only an agent running as root switches users; unprivileged agents run pods as themselves")
async def test_a_pod_cannot_write_outside_its_directory_or_read_the_agents_files(tmp_path, runtimes):
    (tmp_path / "agent-secret").write_text("key")
    os.chmod(tmp_path / "agent-secret", 0o600)
    rt = runtimes(str(tmp_path))
    out = await run(rt, "nosy", "sh", "-c", f"touch ../escape; cat {tmp_path}/agent-secret; ls {rt.root}; echo done")
    assert not (rt.root / "nosy" / "escape").exists()
    assert "nosy" not in out.replace("/nosy", "")  # the pods' directory cannot be listed
    assert "key" not in out and out.strip().endswith("done")


def test_the_same_under_uvloop_which_the_agent_runs_on(tmp_path, runtimes):
    """uvloop spawns processes its own way: the user, directory and limits must hold there too."""
    import uvloop

    loop = uvloop.new_event_loop()
    try:
        rt = runtimes(str(tmp_path), max_processes=4096)
        out = loop.run_until_complete(run(rt, "uv", "sh", "-c", "id -u; pwd; grep processes /proc/self/limits",
                                           working_dir="w"))
    finally:
        loop.close()
    uid, cwd, limits = out.split("\n", 2)
    assert int(uid) == (pwd.getpwnam("nobody").pw_uid if ROOT else os.geteuid())
    assert cwd == str(rt.root / "uv" / "c" / "w") and limits.split()[2:4] == ["4096", "4096"]


def test_the_pods_live_under_the_data_directory_only_when_they_run_as_the_agents_user(tmp_path, runtimes):
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp") as open_dir:  # passable now; private once the agent has its keys
        os.chmod(open_dir, 0o755)
        inside = runtimes(open_dir).root == Path(open_dir) / "pods"
        assert inside == (not ROOT)  # an agent running pods as itself always reaches its own directory
        assert runtimes(open_dir).root == runtimes(open_dir).root  # the same place on every start


@pytest.mark.skipif(not ROOT, reason="only an agent running as root runs pods as another user than its own")
async def test_port_forward_reaches_only_a_declared_port_the_pods_user_listens_on(tmp_path, runtimes):
    rt = runtimes(str(tmp_path))
    p, c = pod("pf", "sleep", "30")
    with socket.socket() as agents_own:  # the agent's (root's) listener on a port the pod declares
        agents_own.bind(("127.0.0.1", 0))
        agents_own.listen()
        port = agents_own.getsockname()[1]
        c["ports"] = [{"containerPort": port}]
        ref = await rt.start(p, c)
        try:
            with pytest.raises(StreamError, match="another user's process listens on it"):
                await rt.port_address(ref, p, port)
            with pytest.raises(StreamError, match="not a containerPort of the pod"):
                await rt.port_address(ref, p, 22)
        finally:
            await rt.stop(ref, 1)
    served = await rt.start(p, {**c, "name": "web", "command": ["python3", "-m", "http.server", str(port),
                                                               "--bind", "127.0.0.1"]})
    try:
        address = None
        for _ in range(100):
            try:
                address = await rt.port_address(served, p, port)
                break
            except StreamError:
                await asyncio.sleep(0.05)
        assert address == ("127.0.0.1", port)  # the pod's own listener, as its user
    finally:
        await rt.stop(served, 1)


async def test_exec_runs_as_the_container_in_its_directory_and_ends_what_it_started(tmp_path, runtimes):
    rt = runtimes(str(tmp_path))
    p, c = pod("ex", "sleep", "30")
    c["env"] = [{"name": "GREETING", "value": "hi"}]
    ref = await rt.start(p, c)
    try:
        session = await rt.exec(ref, p, c, ["sh", "-c", "echo $GREETING; id -u; pwd; echo e >&2; exit 4"],
                                stdin=False, tty=False)
        out = [chunk async for chunk in session.output()]
        assert await session.wait() == 4
        stdout = b"".join(d for ch, d in out if ch == 1).decode().split("\n")
        assert stdout[0] == "hi" and int(stdout[1]) == (pwd.getpwnam("nobody").pw_uid if ROOT else os.geteuid())
        assert stdout[2].endswith("/ex/c") and b"".join(d for ch, d in out if ch == 2) == b"e\n"
        lingering = await rt.exec(ref, p, c, ["sh", "-c", "sleep 300 & echo started; wait"], stdin=False, tty=False)
        async for _ in lingering.output():
            break
        await lingering.close()  # the user left: the command and its children end
        assert await asyncio.wait_for(lingering.wait(), 5) == 128 + 9
    finally:
        await rt.stop(ref, 1)
    with pytest.raises(StreamError, match="container c is not running"):
        await rt.exec(ref, p, c, ["true"], stdin=False, tty=False)


@pytest.mark.skipif(not ROOT, reason="only an agent running as root switches users; unprivileged agents run pods as themselves")
async def test_a_pod_reaches_its_own_directory_by_path_though_the_agents_data_directory_is_private(runtimes):
    """The agent makes its data directory 0700 after the runtime chose where pods live: a data
    directory that others could pass through at that moment must not hold the pods (their user
    could reach its working directory only through the open handle, and no volume by its link)."""
    import tempfile

    data_dir = tempfile.mkdtemp(prefix="corral-agent-")  # under /tmp: passable, unlike pytest's tmp_path
    os.chmod(data_dir, 0o755)
    try:
        rt = runtimes(data_dir)
        os.chmod(data_dir, 0o700)  # as the agent's credentials make it
        out = await run(rt, "self", "sh", "-c", 'echo hi > note; cat "$(pwd)/note"; ls -d "$PWD" && echo reached')
        assert "hi" in out and "reached" in out, out
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
