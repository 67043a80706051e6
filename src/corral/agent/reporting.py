"""What agents and hollow nodes both send the server: pod status (coalesced per pod) and leases."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from corral.api.defaults import now_micro_rfc3339
from corral.api.resources import NODE_LEASE_NAMESPACE
from corral.client.rest import ApiError, Client, ConnectionFailed, NotFound

__all__ = ["LEASE_NAMESPACE", "renew_lease", "StatusReporter"]

log = logging.getLogger(__name__)
LEASE_NAMESPACE = NODE_LEASE_NAMESPACE


async def renew_lease(client: Client, node: str, *, duration_seconds: int = 40) -> int:
    """Renew ``node``'s Lease (creating it the first time): the heartbeat the control plane watches.
    Returns the lease's duration as the server wrote it (it sets the duration, longer in a large
    cluster: :mod:`corral.api.kinds.coordination`); the next renewal is due within a quarter of it."""
    now = now_micro_rfc3339()
    spec = {"holderIdentity": node, "leaseDurationSeconds": duration_seconds, "renewTime": now}
    try:
        lease = await client.patch("leases", node, {"spec": spec}, LEASE_NAMESPACE, raw=True)
    except NotFound:
        lease = await client.create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                     "metadata": {"name": node, "namespace": LEASE_NAMESPACE},
                                     "spec": {**spec, "acquireTime": now}}, raw=True)
    spec = lease.get("spec") if isinstance(lease, dict) else None
    written = spec.get("leaseDurationSeconds") if isinstance(spec, dict) else None
    return written if isinstance(written, int) and written > 0 else duration_seconds


class StatusReporter:
    """Writes pods' statuses through the status subresource. A pod whose status changes again before
    its last one was written gets only the newest written (latest wins), so a burst of transitions
    costs one write; at most ``concurrency`` writes are in flight. A report may name the client to
    write it with (hollow nodes: the pod's node's own identity); by default, the reporter's."""

    def __init__(self, client: Client, *, concurrency: int = 64) -> None:
        self.client = client
        self._pending: dict[str, tuple[str, str, dict[str, Any], Client]] = {}
        self._wakeup = asyncio.Event()
        self._slots = asyncio.Semaphore(concurrency)
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="status-reporter")

    async def stop(self) -> None:
        from corral.aio import cancel_and_wait

        await cancel_and_wait(self._task)

    def report(self, uid: str, namespace: str, name: str, status: dict[str, Any], *,
               client: Client | None = None) -> None:
        self._pending[uid] = (namespace, name, status, client or self.client)
        self._wakeup.set()

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            batch, self._pending = self._pending, {}
            await asyncio.gather(*(self._write(uid, *item) for uid, item in batch.items()))

    async def _write(self, uid: str, namespace: str, name: str, status: dict[str, Any], client: Client) -> None:
        body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "status": status}
        async with self._slots:
            try:
                await client.update(body, namespace, subresource="status", raw=True)
            except NotFound:
                pass  # deleted meanwhile
            except (ConnectionFailed, ApiError) as exc:
                if isinstance(exc, ApiError) and exc.code < 500 and exc.code != 429:
                    log.warning("status of %s/%s not written: %s", namespace, name, exc)
                    return
                # The server is away (or failing over to another): try again soon, unless a newer
                # status has been reported meanwhile.
                log.warning("status of %s/%s not written yet: %s; retrying", namespace, name, exc)
                self._pending.setdefault(uid, (namespace, name, status, client))
                asyncio.get_running_loop().call_later(1.0, self._wakeup.set)
