"""Small asyncio helpers shared by every layer."""

from __future__ import annotations

import asyncio

__all__ = ["cancel_and_wait", "wait_for_termination"]


async def cancel_and_wait(*tasks: asyncio.Task | None) -> None:
    """Cancel the tasks and wait until each has finished; a task's CancelledError is swallowed."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    for task in live:
        try:
            await task
        except asyncio.CancelledError:
            pass


async def wait_for_termination() -> None:
    """Return when the process gets SIGINT or SIGTERM (what a foreground service waits for)."""
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
