"""The cyclic garbage collector of a long-running server and its scheduler process
(:class:`corral.memory.IdleCollector`): passes when the process is idle, or once enough new objects
were made; each object looked at once; cycles found, also among objects kept through a pass."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from corral.memory import CollectorMetrics, IdleCollector


class Node:
    """Something that can take part in a cycle, and be watched with a weak reference."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
async def collector():
    made = IdleCollector(young_min=1_000, young_max=50_000, growth=0.5)
    was_enabled = gc.isenabled()
    made.start()
    yield made
    await made.stop()
    gc.unfreeze()
    if was_enabled:
        gc.enable()


async def test_start_collects_moves_everything_out_of_view_and_takes_over(collector):
    assert not gc.isenabled()
    assert gc.get_freeze_count() > 0
    garbage = cycle()
    keep = [[i] for i in range(100_000)]  # far past Python's own young threshold: nothing collects
    assert garbage() is not None and gc.get_count()[0] >= 100_000
    del keep


async def test_a_busy_process_has_no_pass_until_young_max_objects_were_made(collector):
    garbage = cycle()
    keep = [[i] for i in range(10_000)]
    assert collector.step(idle=False) is None and garbage() is not None
    assert collector.step(idle=True) == "young"  # idle, and past young_min
    assert garbage() is None and gc.get_count()[0] == 0
    more = [[i] for i in range(60_000)]
    assert collector.step(idle=False) == "young"  # busy, but past young_max
    assert collector.passes == 2 and collector.seconds > 0
    del keep, more


async def test_an_idle_process_with_few_new_objects_has_no_pass(collector):
    garbage = cycle()
    assert gc.get_count()[0] < collector.young_min
    assert collector.step(idle=True) is None and garbage() is not None


async def test_what_a_pass_keeps_is_not_looked_at_again_until_a_full_pass(collector):
    kept_before = gc.get_freeze_count()
    keep = [[i] for i in range(5_000)]
    assert collector.step(idle=True) == "young"
    assert gc.get_freeze_count() >= kept_before + 5_000  # out of view: the next young pass skips them
    # A cycle alive at that pass and dropped after it is found by the next full pass only.
    held = [Node()]
    held[0].other = held[0]
    garbage = weakref.ref(held[0])
    filler = [[i] for i in range(2_000)]
    assert collector.step(idle=True) == "young"
    del held
    filler2 = [[i] for i in range(2_000)]
    assert collector.step(idle=True) == "young" and garbage() is not None
    grown = [[i] for i in range(int(collector._kept * collector.growth) + 1)]  # what is kept grows by half
    assert collector.step(idle=True) == "full" and collector.full_passes == 1
    assert garbage() is None
    del keep, filler, filler2, grown


async def test_a_busy_process_runs_a_full_pass_only_once_what_is_kept_has_doubled(collector):
    half = [[i] for i in range(int(collector._kept * 0.6))]
    assert collector.step(idle=False) == "young"  # grown by more than half, but busy: no full pass
    rest = [[i] for i in range(int(collector._kept * 0.5))]
    assert collector.step(idle=False) == "full"
    del half, rest


async def test_the_passes_of_each_kind_and_their_time_are_counted_for_prometheus(collector):
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    registry.register(CollectorMetrics(collector, "corral_test"))

    after_start = registry.get_sample_value("corral_test_gc_pause_seconds_total")
    assert registry.get_sample_value("corral_test_gc_passes_total", {"kind": "start"}) == 1 and after_start > 0
    keep = [[i] for i in range(5_000)]
    assert collector.step(idle=True) == "young"
    grown = [[i] for i in range(int(collector._kept * collector.growth) + 1)]
    assert collector.step(idle=True) == "full"
    counts = {kind: registry.get_sample_value("corral_test_gc_passes_total", {"kind": kind})
              for kind in ("start", "young", "full")}
    assert counts == {"start": 1, "young": 1, "full": 1}
    assert registry.get_sample_value("corral_test_gc_pause_seconds_total") > after_start
    assert b"# TYPE corral_test_gc_passes_total counter" in generate_latest(registry)
    del keep, grown


async def test_the_process_is_idle_when_its_cpu_time_was_under_a_quarter_of_the_time_that_passed(monkeypatch):
    wall, cpu = [0.0], [0.0]
    made = IdleCollector(interval=0.01, clock=lambda: wall[0], cpu=lambda: cpu[0])
    seen = []
    monkeypatch.setattr(made, "step", lambda idle: seen.append(idle))
    task = asyncio.create_task(made._run())
    for used in (0.2, 0.3, 0.0, 1.0):  # CPU seconds over each second that passes
        await asyncio.sleep(0)
        wall[0] += 1.0
        cpu[0] += used
        length = len(seen)
        while len(seen) == length:
            await asyncio.sleep(0.005)
    task.cancel()
    assert seen == [True, False, True, False]


async def test_stop_hands_collection_back_to_python():
    made = IdleCollector()
    made.start()
    try:
        assert not gc.isenabled()
        await made.stop()
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()
