"""Waiting in a test's event loop for something the server's controllers will do."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

__all__ = ["until"]


async def until(read: Callable[[], Awaitable[Any]], check: Callable[[Any], bool], timeout: float = 15.0) -> Any:
    """Call ``read`` every 20 ms until ``check`` accepts what it returns; return that. Fails the
    test with the last value read after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check(value := await read()):
        assert loop.time() < deadline, f"not reached in {timeout}s: {value}"
        await asyncio.sleep(0.02)
    return value
