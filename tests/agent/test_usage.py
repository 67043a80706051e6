"""The agent's usage figures: rates between two samples, as kubectl top shows them, and the
cumulative figures Prometheus scrapes."""

from __future__ import annotations

import os
from types import SimpleNamespace

from corral.agent.usage import Sample, UsageSampler, node_figures


def sampler(*samples: Sample) -> UsageSampler:
    s = UsageSampler(SimpleNamespace(pods={}), interval=10)
    for sample in samples:
        s.previous, s.last = s.last, sample
    return s


def test_usage_is_the_rate_between_the_last_two_samples_and_memory_the_last_reading():
    before = Sample(1000.0, (50.0, 1 << 30), {("default", "burn", "c0"): (10.0, 5 << 20),
                                              ("default", "idle", "c0"): (1.0, 7 << 20)})
    after = Sample(1010.0, (62.0, 2 << 30), {("default", "burn", "c0"): (20.0, 6 << 20),
                                             ("default", "idle", "c0"): (1.0, 7 << 20),
                                             ("default", "new", "c0"): (3.0, 1 << 20)})
    stats = sampler(before, after).stats()
    assert stats["windowSeconds"] == 10.0
    assert stats["node"] == {"cpuNanoCores": 1_200_000_000, "memoryBytes": 2 << 30}
    assert stats["pods"] == [  # "new" started between the samples: no rate for it yet
        {"namespace": "default", "name": "burn", "containers": [
            {"name": "c0", "cpuNanoCores": 1_000_000_000, "memoryBytes": 6 << 20}]},
        {"namespace": "default", "name": "idle", "containers": [{"name": "c0", "cpuNanoCores": 0,
                                                                  "memoryBytes": 7 << 20}]}]


def test_no_figures_before_two_samples_and_a_counter_that_fell_is_no_negative_usage():
    assert sampler().stats() is None
    assert sampler(Sample(1.0, (5.0, 1))).stats() is None
    restarted = sampler(Sample(1.0, (5.0, 1), {("d", "p", "c"): (9.0, 1)}),
                        Sample(2.0, (6.0, 1), {("d", "p", "c"): (0.5, 1)})).stats()
    assert restarted["pods"][0]["containers"][0]["cpuNanoCores"] == 0


def test_prometheus_figures_are_cumulative_with_the_kubelets_names_and_escaped_labels():
    text = sampler(Sample(1000.0, (50.5, 1024), {("ns", 'we"ird', "c0"): (2.5, 4096)})).prometheus()
    assert "node_cpu_usage_seconds_total 50.500000 1000000" in text
    assert 'container_cpu_usage_seconds_total{container="c0",namespace="ns",pod="we\\"ird"} 2.500000 1000000' in text
    assert 'container_memory_working_set_bytes{container="c0",namespace="ns",pod="we\\"ird"} 4096 1000000' in text


def test_node_figures_count_busy_time_and_memory_not_available(tmp_path):
    (tmp_path / "stat").write_text("cpu  100 20 30 500 50 5 5 0 0 0\ncpu0 1 2 3 4\n")
    (tmp_path / "meminfo").write_text("MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\n")
    busy, memory = node_figures(str(tmp_path))
    ticks = os.sysconf("SC_CLK_TCK")
    assert busy == (100 + 20 + 30 + 5 + 5) / ticks  # idle (500) and iowait (50) are not busy
    assert memory == 600 * 1024
