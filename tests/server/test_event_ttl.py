"""Events expire, as kube-apiserver's --event-ttl lets them: one per scheduled pod otherwise piles up
without end (a 30-minute soak kept 33,000, and the server's memory grew with them)."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta, timezone

from corral.testing import running_server


def event(name: str, last: str | None = None) -> dict:
    obj = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
           "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"}, "reason": "Scheduled",
           "message": "m", "type": "Normal"}
    if last:
        obj["lastTimestamp"] = last
    return obj


async def test_events_older_than_the_ttl_are_deleted_by_their_last_time_else_their_creation(tmp_path):
    async with running_server(str(tmp_path / "d"), scheduler=False, controllers=False, event_ttl=600) as server:
        async with server.client() as c:
            await c.create(event("fresh"), raw=True)
            await c.create(event("seen-long-ago", last="2020-01-01T00:00:00Z"), raw=True)
            # 700 s ago, written at +14:00: as text it sorts after the cutoff, as a time it is before it.
            other_form = datetime.fromtimestamp(time.time() - 700, timezone(timedelta(hours=14))).isoformat()
            await c.create(event("seen-long-ago-in-another-form", last=other_form), raw=True)
            await c.create(event("unreadable", last="yesterday"), raw=True)  # never expired on a guess
            assert await server.expire_events() == 2
            names = sorted(e["metadata"]["name"] for e in (await c.list("events", "default", raw=True)).items)
            assert names == ["fresh", "unreadable"]
            assert await server.expire_events(now=time.time() + 300) == 0  # within the TTL of its creation
            assert await server.expire_events(now=time.time() + 700) == 1  # past it
            names = [e["metadata"]["name"] for e in (await c.list("events", "default", raw=True)).items]
            assert names == ["unreadable"]


async def test_the_leader_expires_events_on_its_own_schedule(tmp_path):
    async with running_server(str(tmp_path / "d"), scheduler=False, controllers=False, event_ttl=1,
                              compact_interval=0.3) as server:
        async with server.client() as c:
            await c.create(event("short-lived"), raw=True)
            async with asyncio.timeout(10):
                while (await c.list("events", "default", raw=True)).items:
                    await asyncio.sleep(0.2)
