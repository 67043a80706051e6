"""Leader election on a ``coordination.k8s.io/v1`` Lease, the way Kubernetes' components do it.

When several corral servers share one etcd, every one of them serves the API, but only one — the
holder of the Lease ``kube-system/corral-control-plane`` — runs the scheduler and the controllers.

- Kubernetes' timings: the lease lasts 15 s, the leader renews it every 2 s, candidates retry every
  2 s, and a leader that has not renewed for 10 s (the renew deadline) steps down. Since 10 s < 15 s,
  a leader cut off from the store stops before any other server may take over.
- Expiry is judged on the candidate's own monotonic clock, as client-go does: a lease is free once
  it has not changed for ``leaseDurationSeconds`` *as observed here*, so clocks that disagree between
  machines do not matter. ``renewTime`` is written for people reading the Lease. A candidate tries
  again right at that expiry rather than at its next 2 s tick: a killed leader is replaced 15–17 s
  after its last renewal.
- Fencing: every write of the Lease is a compare-and-swap, so its resourceVersion moves only when its
  holder renews it or another server takes it. The leader's bindings carry ``(lease key, the revision
  of its last renewal)`` (:class:`Fence`) and the store refuses them once the Lease has moved on, so
  two schedulers never bind in the same term. Renewal and bindings exclude each other briefly (a
  renewal waits for the bindings in flight and holds new ones back for one store round trip).
- A server that stops gracefully gives the Lease up (holder cleared), and another takes over at its
  next retry instead of after 15 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

from corral.api.defaults import apply_create_defaults, now_micro_rfc3339
from corral.api.resources import by_kind
from corral.store import Conflict, KeyExists, KeyNotFound, Store, StoreError

__all__ = ["ElectionConfig", "Fence", "LeaderElector", "NotLeader", "LEADER_URL_ANNOTATION"]

log = logging.getLogger(__name__)
LEADER_URL_ANNOTATION = "corral.dev/leader-url"  # where the leader serves (`corral explain` is sent there)


class NotLeader(Exception):
    """This server does not hold the Lease (any more): the fenced write was not attempted."""


@dataclass(frozen=True, slots=True)
class ElectionConfig:
    namespace: str = "kube-system"
    name: str = "corral-control-plane"
    lease_seconds: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_seconds:
            raise ValueError("leader election needs retry period < renew deadline < lease duration")


class Fence:
    """The leader's hold on its Lease, for the writes that must stop the moment it is lost.

    ``async with fence.hold() as lease:`` yields ``(lease key, revision)`` for a fenced store write, or
    raises :class:`NotLeader`. Holds are shared; the elector's own Lease writes are exclusive."""

    def __init__(self) -> None:
        self._lease: tuple[str, int] | None = None
        self._users = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._open = asyncio.Event()
        self._open.set()

    @property
    def held(self) -> bool:
        return self._lease is not None

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[tuple[str, int]]:
        while not self._open.is_set():
            await self._open.wait()
        if self._lease is None:
            raise NotLeader("this server does not hold the leader Lease")
        self._users += 1
        self._idle.clear()
        try:
            yield self._lease
        finally:
            self._users -= 1
            if not self._users:
                self._idle.set()

    @contextlib.asynccontextmanager
    async def exclusive(self) -> AsyncIterator[None]:
        self._open.clear()
        try:
            await self._idle.wait()
            yield
        finally:
            self._open.set()

    def grant(self, key: str, revision: int) -> None:
        self._lease = (key, revision)

    def revoke(self) -> None:
        self._lease = None


class LeaderElector:
    """Campaigns for the Lease and keeps it; ``on_started`` / ``on_stopped`` start and stop what only
    the leader runs. ``start()`` then ``stop()``; ``stop()`` releases a held Lease."""

    def __init__(self, store: Store, identity: str, *, on_started: Callable[[], Awaitable[None]],
                 on_stopped: Callable[[], Awaitable[None]], config: ElectionConfig = ElectionConfig(),
                 url: str = "", clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.identity = identity
        self.config = config
        self.url = url
        self.fence = Fence()
        self._on_started, self._on_stopped = on_started, on_stopped
        self._clock = clock
        self._resource = by_kind("Lease")
        self.key = self._resource.key(config.namespace, config.name)
        self._observed: tuple[int, float] = (0, 0.0)  # (lease revision, when this process first saw it)
        self._revision = 0  # of our own last write, while leading
        self._task: asyncio.Task | None = None
        self.leading = False
        self._lost = False  # the last attempt found the Lease taken from us
        self._expires_at = 0.0  # when the other holder's Lease runs out, as observed here
        self.transitions = 0  # terms this process has started (for tests and metrics)

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="leader-election")

    async def stop(self) -> None:
        from corral.aio import cancel_and_wait

        await cancel_and_wait(self._task)
        self._task = None
        if self.leading:
            await self._step_down("shutting down")
            await self._release()

    # --- the loop --------------------------------------------------------------------------------------

    async def _run(self) -> None:
        last_renewal = 0.0
        while True:
            if not self.leading:
                if await self._try_acquire_or_renew():
                    last_renewal = self._clock()
                    await self._become_leader()
                    await asyncio.sleep(self.config.retry_period)
                else:  # jittered, so candidates do not move in step; and no later than the expiry
                    pause = self.config.retry_period * random.uniform(1.0, 1.1)
                    await asyncio.sleep(max(0.05, min(pause, self._expires_at - self._clock() + 0.05)))
                continue
            async with self.fence.exclusive():
                renewed = await self._try_acquire_or_renew()
                if renewed:
                    self.fence.grant(self.key, self._revision)
            if renewed:
                last_renewal = self._clock()
            elif self._lost or self._clock() - last_renewal > self.config.renew_deadline:
                await self._step_down("the Lease was taken" if self._lost else "the Lease could not be renewed in time")
                continue
            await asyncio.sleep(self.config.retry_period)

    async def _become_leader(self) -> None:
        self.leading = True
        self.transitions += 1
        self.fence.grant(self.key, self._revision)
        log.info("%s is the leader now (Lease %s at revision %d)", self.identity, self.key, self._revision)
        try:
            await self._on_started()
        except Exception:
            log.exception("starting the leader's components failed")
            await self._step_down("its components failed to start")
            await self._release()

    async def _step_down(self, why: str) -> None:
        log.warning("%s stops leading: %s", self.identity, why)
        self.fence.revoke()  # fenced writes stop here, before the components are even stopped
        self.leading = False
        try:
            await self._on_stopped()
        except Exception:
            log.exception("stopping the leader's components failed")

    # --- one attempt ------------------------------------------------------------------------------------

    async def _try_acquire_or_renew(self) -> bool:
        """One read and one compare-and-swap write of the Lease; True when we hold it afterwards."""
        self._lost = False
        now, wall = self._clock(), now_micro_rfc3339()
        try:
            record = await self.store.get(self.key)
            if record is None:
                return await self._create(now, wall)
            if record.revision != self._observed[0]:
                self._observed = (record.revision, now)
            spec = dict(record.obj.get("spec") or {})
            holder = spec.get("holderIdentity") or ""
            duration = float(spec.get("leaseDurationSeconds") or self.config.lease_seconds)
            if holder != self.identity:
                if self.leading:  # someone else has held it since our last renewal
                    self._lost = True
                    return False
                if holder and now < self._observed[1] + duration:
                    self._expires_at = self._observed[1] + duration
                    return False  # held by another, not expired
            lease = self._lease_object(record.obj, spec, holder, wall)
            written = await self.store.update(self.key, lease, record.revision)
        except KeyExists:
            return False
        except (Conflict, KeyNotFound):
            if self.leading:
                self._lost = True
            return False
        except StoreError as exc:  # the store is unreachable: try again next round
            log.warning("leader election: %s", exc)
            return False
        self._revision = written.revision
        self._observed = (written.revision, now)
        return True

    async def _create(self, now: float, wall: str) -> bool:
        lease: dict[str, Any] = {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.config.name, "namespace": self.config.namespace,
                         "annotations": {LEADER_URL_ANNOTATION: self.url}},
            "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.config.lease_seconds),
                     "acquireTime": wall, "renewTime": wall, "leaseTransitions": 0},
        }
        apply_create_defaults(self._resource, lease, self.config.namespace)
        written = await self.store.create(self.key, lease)
        self._revision = written.revision
        self._observed = (written.revision, now)
        return True

    def _lease_object(self, current: dict[str, Any], spec: dict[str, Any], holder: str, wall: str) -> dict[str, Any]:
        meta = dict(current.get("metadata") or {})
        meta["annotations"] = {**(meta.get("annotations") or {}), LEADER_URL_ANNOTATION: self.url}
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=int(self.config.lease_seconds), renewTime=wall)
        if holder != self.identity:  # a new term
            spec["acquireTime"] = wall
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        return {**current, "metadata": meta, "spec": spec}

    async def _release(self) -> None:
        """Give the Lease up on the way out: the next candidate need not wait for it to expire."""
        try:
            record = await self.store.get(self.key)
            if record is None or (record.obj.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = {**(record.obj.get("spec") or {}), "holderIdentity": "", "leaseDurationSeconds": 1,
                    "renewTime": now_micro_rfc3339()}
            await self.store.update(self.key, {**record.obj, "spec": spec}, record.revision)
        except StoreError as exc:
            log.warning("could not release the leader Lease: %s", exc)
