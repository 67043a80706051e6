"""Many writes of one kind from one sync, started as Kubernetes' controllers start them."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Sequence

from corral.server import errors

__all__ = ["slow_start", "record_creates"]


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


def record_creates(controller: Any, owner: dict[str, Any], results: Sequence[Any], created: Callable[[Any, int], str]) -> None:
    """Record each create of :func:`slow_start` on ``owner`` as Kubernetes' controllers do
    (``created(result, i)``: the SuccessfulCreate message), then raise the first failure (the key
    is retried with backoff)."""
    for i, result in enumerate(results):
        if isinstance(result, errors.ApiError):
            controller.events.record(owner, "Warning", "FailedCreate", f"Error creating: {result.message}")
        elif not isinstance(result, BaseException):
            controller.events.record(owner, "Normal", "SuccessfulCreate", created(result, i))
    failures = [r for r in results if isinstance(r, BaseException)]
    if failures:
        raise failures[0]
