"""Many writes of one kind from one sync, started as Kubernetes' controllers start them."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Sequence

__all__ = ["slow_start"]


async def slow_start(calls: Sequence[Callable[[], Awaitable[Any]]], *, limit: int = 64) -> list[Any]:
    """Make ``calls`` in batches that double (1, 2, 4, ... up to ``limit``) while every call of a batch succeeds:
    a quota or a bad template fails one pod, not hundreds, and a healthy burst is written together
    (the store commits concurrent writes in one transaction). Returns the results of the calls made,
    in order, exceptions as values; after a batch with a failure, no further call is made."""
    results: list[Any] = []
    batch = 1
    while len(results) < len(calls):
        chunk = calls[len(results):len(results) + batch]
        done = await asyncio.gather(*(call() for call in chunk), return_exceptions=True)
        results += done
        if any(isinstance(r, BaseException) for r in done):
            break
        batch = min(batch * 2, limit)
    return results
