"""Leader election on a Lease: one leader at a time, takeover after expiry or release, fencing."""

from __future__ import annotations

import asyncio
import time

import pytest

from corral.server.control.leader import ElectionConfig, LeaderElector, NotLeader
from corral.store import Fenced, Unavailable, open_store

FAST = ElectionConfig(lease_seconds=2, renew_deadline=1.2, retry_period=0.1)


class Recorder:
    """What a server would start and stop while leading, with the times it happened."""

    def __init__(self) -> None:
        self.started: list[float] = []
        self.stopped: list[float] = []

    async def start(self) -> None:
        self.started.append(time.monotonic())

    async def stop(self) -> None:
        self.stopped.append(time.monotonic())


def elector(store, identity: str, rec: Recorder, config: ElectionConfig = FAST) -> LeaderElector:
    return LeaderElector(store, identity, on_started=rec.start, on_stopped=rec.stop, config=config,
                         url=f"http://{identity}")


async def renewals(store, key: str, count: int, timeout: float = 10.0) -> None:
    """Wait until the Lease at ``key`` has been written ``count`` more times."""
    seen, last = 0, (await store.get(key)).revision
    deadline = time.monotonic() + timeout
    while seen < count:
        assert time.monotonic() < deadline, f"the lease was renewed {seen} times, not {count}"
        await asyncio.sleep(0.02)
        revision = (await store.get(key)).revision
        seen, last = seen + (revision != last), revision


async def until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


@pytest.fixture
async def store(tmp_path):
    s = await open_store(f"sqlite://{tmp_path}/state.db")
    yield s
    await s.close()


async def test_one_of_two_candidates_leads_and_the_lease_names_it(store):
    ra, rb = Recorder(), Recorder()
    a, b = elector(store, "a", ra), elector(store, "b", rb)
    a.start()
    await until(lambda: a.leading)
    b.start()
    await renewals(store, a.key, 3)  # a keeps renewing while b tries (same period) and fails
    assert a.leading and not b.leading and rb.started == []
    lease = (await store.get(a.key)).obj
    assert lease["spec"]["holderIdentity"] == "a"
    assert lease["spec"]["leaseDurationSeconds"] == 2
    assert lease["metadata"]["annotations"]["corral.dev/leader-url"] == "http://a"
    await a.stop()
    await b.stop()


async def test_a_crashed_leader_is_replaced_only_after_its_lease_expires_and_its_fence_is_refused(store):
    ra, rb = Recorder(), Recorder()
    a, b = elector(store, "a", ra), elector(store, "b", rb)
    a.start()
    await until(lambda: a.leading)
    pod = await store.create("/core/pods/default/p", {"metadata": {"name": "p"}})
    async with a.fence.hold() as stale_fence:
        pass
    b.start()
    a._task.cancel()  # a "crashes": no more renewals, no release
    crashed = time.monotonic()
    await until(lambda: b.leading)
    waited = rb.started[0] - crashed
    assert waited >= FAST.lease_seconds - FAST.retry_period  # not before the lease ran out
    lease = (await store.get(b.key)).obj["spec"]
    assert lease["holderIdentity"] == "b" and lease["leaseTransitions"] == 1
    # The old leader's bindings, fenced by the revision of its last renewal, no longer land.
    with pytest.raises(Fenced):
        await store.update(pod.key, {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}}, pod.revision,
                           fence=stale_fence)
    async with b.fence.hold() as fence:
        bound = await store.update(pod.key, {"metadata": {"name": "p"}, "spec": {"nodeName": "n2"}},
                                   pod.revision, fence=fence)
    assert bound.obj["spec"]["nodeName"] == "n2"
    await b.stop()


async def test_a_leader_that_stops_gives_the_lease_up_and_another_takes_over_at_once(store):
    ra, rb = Recorder(), Recorder()
    slow = ElectionConfig(lease_seconds=30, renew_deadline=20, retry_period=0.1)
    a, b = elector(store, "a", ra, slow), elector(store, "b", rb, slow)
    a.start()
    await until(lambda: a.leading)
    b.start()
    await renewals(store, a.key, 2)  # b is campaigning against a held lease
    await a.stop()
    assert ra.stopped and not a.leading
    with pytest.raises(NotLeader):
        async with a.fence.hold():
            pass
    await until(lambda: b.leading, timeout=3)  # far sooner than the 30 s lease
    await b.stop()


class FlakyStore:
    """The real store, until ``down`` is set: then every call fails as an unreachable etcd would."""

    def __init__(self, store) -> None:
        self.store, self.down = store, False

    def __getattr__(self, name):
        attr = getattr(self.store, name)
        if not callable(attr):
            return attr

        async def call(*args, **kwargs):
            if self.down:
                raise Unavailable("etcd did not answer")
            return await attr(*args, **kwargs)
        return call


async def test_a_leader_cut_off_from_the_store_stops_within_the_renew_deadline(store):
    flaky, ra = FlakyStore(store), Recorder()
    a = elector(flaky, "a", ra)
    a.start()
    await until(lambda: a.leading)
    flaky.down = True
    cut = time.monotonic()
    await until(lambda: not a.leading, timeout=5)
    stopped_after = ra.stopped[0] - cut
    assert stopped_after <= FAST.renew_deadline + 0.5
    assert stopped_after < FAST.lease_seconds  # before anyone else could take over
    flaky.down = False
    await until(lambda: a.leading, timeout=5)  # and campaigns again once it is back
    assert a.transitions == 2
    await a.stop()


async def test_renewal_waits_for_bindings_in_flight_and_they_use_the_newest_revision(store):
    ra = Recorder()
    a = elector(store, "a", ra)
    a.start()
    await until(lambda: a.leading)
    pods = [await store.create(f"/core/pods/default/p{i}", {"metadata": {"name": f"p{i}"}}) for i in range(40)]

    async def bind(record):
        await asyncio.sleep(0.01 * (int(record.key[-1])))
        async with a.fence.hold() as fence:
            await asyncio.sleep(0.02)  # a binding that takes a while, across a renewal
            return await store.update(record.key, {"metadata": {"name": "x"}, "spec": {"nodeName": "n"}},
                                      record.revision, fence=fence)

    for _ in range(3):  # across several renewals (every 0.1 s)
        done = await asyncio.gather(*(bind(p) for p in pods))
        pods = done
    assert all(r.obj["spec"]["nodeName"] == "n" for r in pods)
    await a.stop()


def test_timings_must_leave_the_leader_time_to_stop_before_its_lease_ends():
    with pytest.raises(ValueError):
        ElectionConfig(lease_seconds=10, renew_deadline=10, retry_period=2)
