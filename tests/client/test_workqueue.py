from __future__ import annotations

import asyncio

import pytest

from corral.client import ShutDown, WorkQueue


async def test_a_key_added_many_times_before_it_is_taken_is_processed_once():
    q: WorkQueue[str] = WorkQueue()
    for _ in range(5):
        q.add("a")
    q.add("b")
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]


async def test_a_key_being_processed_is_not_handed_out_again_until_done():
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")  # changed while a worker holds it
    assert len(q) == 0
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(q.get(), 0.05)
    q.done(key)
    assert await asyncio.wait_for(q.get(), 1) == "a"


async def test_backoff_doubles_per_failure_and_forget_resets_it():
    now = [0.0]
    q: WorkQueue[str] = WorkQueue(base_delay=1.0, max_delay=5.0, clock=lambda: now[0])
    assert [q.add_rate_limited("a") for _ in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert q.num_requeues("a") == 5
    q.forget("a")
    assert q.add_rate_limited("a") == 1.0


async def test_a_rate_limited_key_arrives_after_its_delay():
    q: WorkQueue[str] = WorkQueue(base_delay=0.05)
    q.add_rate_limited("slow")
    q.add("fast")
    assert await q.get() == "fast"
    loop = asyncio.get_running_loop()
    start = loop.time()
    assert await asyncio.wait_for(q.get(), 2) == "slow"
    assert loop.time() - start >= 0.03


async def test_workers_stop_on_shutdown():
    q: WorkQueue[str] = WorkQueue()
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    q.shutdown()
    with pytest.raises(ShutDown):
        await asyncio.wait_for(waiter, 1)


async def test_many_workers_never_process_one_key_concurrently():
    q: WorkQueue[int] = WorkQueue()
    active: set[int] = set()
    processed: list[int] = []

    async def worker() -> None:
        try:
            while True:
                key = await q.get()
                assert key not in active, "two workers held the same key"
                active.add(key)
                await asyncio.sleep(0.001)
                processed.append(key)
                active.discard(key)
                q.done(key)
        except ShutDown:
            return

    workers = [asyncio.create_task(worker()) for _ in range(8)]
    for _ in range(20):
        for key in range(5):
            q.add(key)
        await asyncio.sleep(0.002)
    async with asyncio.timeout(10):  # until every key added is processed and none is held
        while len(q) or active or len(processed) < 5:
            await asyncio.sleep(0.005)
    q.shutdown()
    await asyncio.gather(*workers)
    assert set(processed) == set(range(5))
