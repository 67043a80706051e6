"""How many cores a server can use: its CPU affinity, and a cgroup's CPU quota (a container's --cpus)."""

from __future__ import annotations

import os

import pytest

from corral.server.control.cores import usable_cores


def _tree(tmp_path, proc_cgroup: str, files: dict[str, str]):
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (tmp_path / "self-cgroup").write_text(proc_cgroup)
    return str(root), str(tmp_path / "self-cgroup")


@pytest.fixture
def two_cores():
    before = os.sched_getaffinity(0)
    if len(before) < 2:  # pragma: no cover - CI has two cores
        pytest.fail("these checks need a machine with two cores or more")
    yield len(before)
    os.sched_setaffinity(0, before)


@pytest.mark.parametrize(("proc_cgroup", "files", "expected"), [
    # cgroup v2: the smallest quota on the way from the process's group to the root counts.
    ("0::/box/inner\n", {"box/inner/cpu.max": "max 100000\n", "box/cpu.max": "100000 100000\n"}, 1),
    ("0::/box\n", {"box/cpu.max": "150000 100000\n"}, 2),  # 1.5 cores of quota: two to run on
    ("0::/box\n", {"box/cpu.max": "50000 100000\n"}, 1),
    ("0::/\n", {"cpu.max": "100000 100000\n"}, 1),  # a container's own root
    # cgroup v1: the cpu controller's hierarchy.
    ("4:memory:/x\n3:cpu,cpuacct:/box\n", {"cpu/box/cpu.cfs_quota_us": "100000\n",
                                            "cpu/box/cpu.cfs_period_us": "100000\n"}, 1),
])
def test_a_cpu_quota_below_the_affinity_limits_the_usable_cores(tmp_path, two_cores, proc_cgroup, files, expected):
    assert usable_cores(*_tree(tmp_path, proc_cgroup, files)) == expected


@pytest.mark.parametrize(("proc_cgroup", "files"), [
    ("0::/box\n", {"box/cpu.max": "max 100000\n"}),
    ("3:cpu,cpuacct:/box\n", {"cpu/box/cpu.cfs_quota_us": "-1\n", "cpu/box/cpu.cfs_period_us": "100000\n"}),
    ("0::/box\n", {}),  # nothing readable
    ("0::/box\n", {"box/cpu.max": "garbage\n"}),
])
def test_without_a_quota_the_affinity_decides(tmp_path, two_cores, proc_cgroup, files):
    assert usable_cores(*_tree(tmp_path, proc_cgroup, files)) == two_cores
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    assert usable_cores(*_tree(tmp_path, proc_cgroup, files)) == 1
