"""Control groups for the process runtime: real groups and real processes where this machine lets
the agent write them (root, with cgroup v2's cpu, memory and pids controllers or v1 hierarchies, as
`make test` runs here), and the finding of hierarchies from /proc files of other machines' shapes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from corral.agent.runtimes import cgroups as cg
from corral.agent.runtimes.process import ProcessRuntime

AVAILABLE, WHY = cg.detect("/probe-only")
if AVAILABLE is not None:
    AVAILABLE.close()
needs_cgroups = pytest.mark.skipif(AVAILABLE is None, reason=f"no writable control groups here: {WHY}")


@pytest.fixture
def runtime(tmp_path):
    made = []

    def make(**kwargs) -> ProcessRuntime:
        made.append(ProcessRuntime(str(tmp_path / f"agent-{len(made)}"), **kwargs))
        return made[-1]

    yield make
    for rt in made:
        for ref in list(rt._procs):
            proc = rt._procs[ref]
            if proc.returncode is None:
                proc.kill()
        if rt.cgroups is not None:
            rt.cgroups.close()


def pod(uid: str, command: str, limits: dict | None = None) -> tuple[dict, dict]:
    container = {"name": "c", "image": "none", "command": ["sh", "-c", command]}
    if limits:
        container["resources"] = {"limits": limits}
    return {"metadata": {"uid": uid, "namespace": "default", "name": uid}, "spec": {"containers": [container]}}, \
        container


def group_file(rt: ProcessRuntime, controller: str, *parts: str) -> str:
    return rt.cgroups.roots[controller].joinpath(*parts).read_text().strip()


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@needs_cgroups
async def test_a_container_runs_in_a_group_of_its_own_with_its_limits_and_the_pods_process_cap(runtime):
    rt = runtime(max_processes=50)
    p, c = pod("limited", "cat /proc/self/cgroup; sleep 30", {"cpu": "250m", "memory": "64Mi"})
    ref = await rt.start(p, c)
    try:
        await asyncio.sleep(0.3)
        if rt.cgroups.version == "v2":
            assert group_file(rt, "cpu", "limited", "c", "cpu.max") == "25000 100000"
            assert group_file(rt, "memory", "limited", "c", "memory.max") == str(64 * 2**20)
        else:
            assert group_file(rt, "cpu", "limited", "c", "cpu.cfs_quota_us") == "25000"
            assert group_file(rt, "cpu", "limited", "c", "cpu.cfs_period_us") == "100000"
            assert group_file(rt, "memory", "limited", "c", "memory.limit_in_bytes") == str(64 * 2**20)
        assert group_file(rt, "pids", "limited", "pids.max") == "50"  # the pod's, over all its containers
        pid = int(ref.id.removeprefix("process://"))
        assert pid in rt.cgroups.pids("limited", "c")
        groups = rt.log_path("limited", "c").read_text()
        assert "/limited/c" in groups  # what the container itself sees
    finally:
        await rt.stop(ref, 1)
        await rt.wait(ref)
    assert not rt.cgroups.roots["memory"].joinpath("limited", "c").exists()  # gone with the container


@needs_cgroups
async def test_a_container_over_its_memory_limit_is_oom_killed_and_one_under_it_is_not(runtime):
    rt = runtime()
    p, c = pod("hog", "dd if=/dev/zero of=/dev/null bs=64M count=1", {"memory": "16Mi"})
    info = await asyncio.wait_for(rt.wait(await rt.start(p, c)), 30)
    assert (info.exit_code, info.oom_killed) == (137, True)
    p, c = pod("frugal", "dd if=/dev/zero of=/dev/null bs=1M count=1", {"memory": "64Mi"})
    info = await asyncio.wait_for(rt.wait(await rt.start(p, c)), 30)
    assert (info.exit_code, info.oom_killed) == (0, False)


@needs_cgroups
async def test_what_a_container_leaves_behind_ends_with_it_even_outside_its_session(runtime):
    rt = runtime()
    p, c = pod("daemon", "setsid sleep 300 & echo $!; exit 0")
    await asyncio.wait_for(rt.wait(await rt.start(p, c)), 30)
    escaped = int(rt.log_path("daemon", "c").read_text().split()[0])
    assert not alive(escaped)

    p, c = pod("stuck", "setsid sleep 300 & echo $!; exec sleep 300")
    ref = await rt.start(p, c)
    await asyncio.sleep(0.3)
    escaped = int(rt.log_path("stuck", "c").read_text().split()[0])
    await rt.stop(ref, 0.5)
    await asyncio.wait_for(rt.wait(ref), 10)
    assert not alive(escaped)


async def test_without_cgroups_the_runtime_says_why_and_runs_pods_all_the_same(runtime):
    rt = runtime(cgroups=False)
    assert rt.cgroups is None and rt.cgroups_missing == "turned off (--no-cgroups)"
    p, c = pod("plain", "echo ran")
    info = await asyncio.wait_for(rt.wait(await rt.start(p, c)), 30)
    assert info.exit_code == 0 and rt.log_path("plain", "c").read_text() == "ran\n"


# --- finding the hierarchies, on the shapes of other machines ---------------------------------------


def fake_proc(tmp_path: Path, cgroup: str, mountinfo: str) -> str:
    proc = tmp_path / "proc"
    proc.mkdir(parents=True)
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text(mountinfo)
    return str(proc)


def test_on_a_pure_v2_host_the_agents_group_hands_cpu_memory_and_pids_down(tmp_path):
    fs = tmp_path / "cgroup"
    group = fs / "system.slice" / "corral-agent.service"
    group.mkdir(parents=True)
    (group / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    proc = fake_proc(tmp_path, "0::/system.slice/corral-agent.service\n",
                     f"35 24 0:30 / {fs} rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n")
    found, why = cg.detect("/var/lib/corral/agent", proc=proc)
    assert why == "" and found.version == "v2"
    top = group / cg._folder_name("/var/lib/corral/agent")
    assert set(found.roots.values()) == {top}
    assert (group / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert (top / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    procs = found.prepare("uid-1", "web", limits=cg.Limits(cpu_millis=1500, memory_bytes=2**30), max_processes=100)
    assert procs == (str(top / "uid-1" / "web" / "cgroup.procs"),)
    assert (top / "uid-1" / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert (top / "uid-1" / "pids.max").read_text() == "100"
    assert (top / "uid-1" / "web" / "cpu.max").read_text() == "150000 100000"
    assert (top / "uid-1" / "web" / "memory.max").read_text() == str(2**30)
    found.prepare("uid-1", "sidecar", limits=cg.Limits(), max_processes=100)  # no limits: none set
    assert (top / "uid-1" / "sidecar" / "cpu.max").read_text() == "max 100000"
    assert (top / "uid-1" / "sidecar" / "memory.max").read_text() == "max"
    (top / "uid-1" / "web" / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert found.oom_killed("uid-1", "web") and not found.oom_killed("uid-1", "sidecar")


def test_a_v2_hierarchy_without_the_controllers_falls_back_to_v1_and_neither_means_none(tmp_path):
    fs = tmp_path / "cgroup"
    (fs / "unified").mkdir(parents=True)
    (fs / "unified" / "cgroup.controllers").write_text("hugetlb\n")
    for c in ("cpu", "memory", "pids"):
        (fs / c / "agent").mkdir(parents=True)
    mountinfo = (f"41 31 0:38 / {fs}/unified rw,relatime - cgroup2 cgroup2 rw\n"
                 f"32 31 0:29 / {fs}/cpu rw,relatime - cgroup cgroup rw,cpu\n"
                 f"35 31 0:32 / {fs}/memory rw,relatime - cgroup cgroup rw,memory\n"
                 f"39 31 0:36 /agent {fs}/pids rw,relatime - cgroup cgroup rw,pids\n")  # mounted from inside
    proc = fake_proc(tmp_path, "8:pids:/agent\n4:memory:/agent\n1:cpu:/agent\n0::/\n", mountinfo)
    found, why = cg.detect("/d", proc=proc)
    name = cg._folder_name("/d")
    assert found.version == "v1"
    assert found.roots == {"cpu": fs / "cpu" / "agent" / name, "memory": fs / "memory" / "agent" / name,
                           "pids": fs / "pids" / name}
    found.prepare("u", "c", limits=cg.Limits(cpu_millis=1, memory_bytes=1000), max_processes=7)
    assert (found.roots["cpu"] / "u" / "c" / "cpu.cfs_quota_us").read_text() == "1000"  # the kernel's minimum
    assert (found.roots["memory"] / "u" / "c" / "memory.limit_in_bytes").read_text() == "1000"
    assert (found.roots["pids"] / "u" / "pids.max").read_text() == "7"

    none, why = cg.detect("/d", proc=fake_proc(tmp_path / "x", "0::/\n", f"41 31 0:38 / {fs}/unified rw - cgroup2 cgroup2 rw\n"))
    assert none is None
    assert why == (f"cgroup v2 at {fs}/unified lacks ['cpu', 'memory', 'pids'] (held by v1 hierarchies); "
                   "no cgroup v1 hierarchy for cpu")


def test_limits_are_read_as_docker_reads_them():
    assert cg.limits_of({"resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}) == cg.Limits(2000, 2**30)
    assert cg.limits_of({"resources": {"requests": {"cpu": "2"}}}) == cg.Limits(None, None)
    assert cg.cpu_quota_us(250) == 25_000 and cg.cpu_quota_us(1) == 1_000
