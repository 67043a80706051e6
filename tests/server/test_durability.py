"""An acknowledged write survives `kill -9` of the server."""

from __future__ import annotations

import asyncio

from corral.testing import ServerProcess


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


async def test_every_acknowledged_create_survives_kill_9_with_its_resource_version(tmp_path):
    proc = ServerProcess(str(tmp_path / "data"), "--no-scheduler")
    proc.start()
    acked: dict[str, str] = {}
    try:
        async with proc.client() as client:
            async def create(i: int) -> None:
                obj = await client.create(pod(f"p-{i}"))
                acked[obj["metadata"]["name"]] = obj["metadata"]["resourceVersion"]

            # Concurrent creates, so several of them share one group commit.
            await asyncio.gather(*(create(i) for i in range(300)))
    finally:
        proc.kill()
    assert len(acked) == 300

    restarted = ServerProcess(str(tmp_path / "data"), "--no-scheduler")
    restarted.start()
    try:
        async with restarted.client() as client:
            listing = await client.list("pods", "default", raw=True)
            found = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in listing.items}
            assert found == acked
            # Revisions continue after the restart; none is handed out twice.
            new = await client.create(pod("after-restart"))
            assert int(new["metadata"]["resourceVersion"]) > max(int(v) for v in acked.values())
    finally:
        restarted.stop()
