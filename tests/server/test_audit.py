"""The audit log: what changed state or was refused, who asked, and what they were told."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys

import pytest

from corral.client import ApiError, Client
from corral.pki.kubeconfig import Credentials
from corral.server.http.audit import AuditLog
from corral.testing import running_server
from corral.testing.builders import PodBuilder


def lines(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f]


async def test_writes_and_refusals_are_recorded_and_successful_reads_are_not(tmp_path):
    async with running_server(str(tmp_path / "d"), scheduler=False, controllers=False) as server:
        async with server.client() as admin:
            await admin.create(PodBuilder("web").obj, raw=True)
            await admin.list("pods", None, raw=True)
            await admin.get("pods", "web", "default", raw=True)
            await admin.delete("pods", "web", "default")
        async with Client(credentials=server.issue_credentials("vera", ["dev"])) as vera:
            with pytest.raises(ApiError):
                await vera.list("pods", "default", raw=True)
        async with Client(credentials=Credentials(server.url, server.admin.ca_pem)) as anonymous:
            with pytest.raises(ApiError):
                await anonymous.create(PodBuilder("x").obj, raw=True)
        path = os.path.join(server.data_dir, "audit.log")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        got = [{k: v for k, v in line.items() if k != "time"} for line in lines(path)]
    admin_groups = ["system:masters", "system:authenticated"]
    assert got == [
        {"user": "admin", "groups": admin_groups, "verb": "create", "resource": "pods", "namespace": "default",
         "name": "", "code": 201},
        {"user": "admin", "groups": admin_groups, "verb": "delete", "resource": "pods", "namespace": "default",
         "name": "web", "code": 200},
        {"user": "vera", "groups": ["dev", "system:authenticated"], "verb": "list", "resource": "pods",
         "namespace": "default", "name": "", "code": 403},
        {"user": "system:anonymous", "groups": ["system:unauthenticated"], "verb": "create", "resource": "pods",
         "namespace": "default", "name": "", "code": 401},
    ]


def test_the_log_is_rotated_by_size_and_keeps_a_bounded_number_of_old_files(tmp_path):
    path = str(tmp_path / "audit.log")
    log = AuditLog(path, max_bytes=1000, backups=2)
    for i in range(60):
        log.record(user="u", groups=(), verb="create", resource="pods", namespace="default", name=f"p{i}", code=201)
    log.close()
    files = sorted(os.listdir(tmp_path))
    assert files == ["audit.log", "audit.log.1", "audit.log.2"]
    assert all(os.path.getsize(tmp_path / f) <= 1000 for f in files)
    newest = [entry["name"] for entry in lines(path)]
    assert newest[-1] == "p59"
    previous = [entry["name"] for entry in lines(path + ".1")]
    assert int(previous[-1][1:]) + 1 == int(newest[0][1:])  # nothing lost between the two


async def test_in_a_server_the_lines_of_one_loop_turn_are_written_together_at_its_end(tmp_path, monkeypatch):
    path = str(tmp_path / "audit.log")
    log = AuditLog(path, max_bytes=1000, backups=2)
    writes = []
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: writes.append(len(data)) or real_write(fd, data))
    for i in range(12):
        log.record(user="u", groups=(), verb="create", resource="pods", namespace="default", name=f"p{i}", code=201)
    assert writes == [] and os.path.getsize(path) == 0  # not yet: the turn has not ended
    await asyncio.sleep(0)
    # All twelve (~140 bytes each), one write per file: rotation still splits them at the limit.
    assert len(writes) == 2 and sum(writes) == os.path.getsize(path) + os.path.getsize(path + ".1")
    assert all(os.path.getsize(f) <= 1000 for f in (path, path + ".1"))
    names = [entry["name"] for entry in lines(path + ".1") + lines(path)]
    assert names == [f"p{i}" for i in range(12)]
    log.record(user="u", groups=(), verb="create", resource="pods", namespace="default", name="last", code=201)
    log.close()  # what is waiting is written before the file is closed
    assert lines(path)[-1]["name"] == "last"


def test_an_audit_log_that_cannot_be_written_stops_the_server_with_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = subprocess.run([sys.executable, "-m", "corral", "server", "--data-dir", str(tmp_path / "d"),
                           "--address", "127.0.0.1:0", "--no-write-kubeconfig",
                           "--audit-log", str(blocker / "audit.log")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == f"error: cannot open the audit log {blocker / 'audit.log'}: Not a directory\n"
