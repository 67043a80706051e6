"""`corral bench` on every shipped workload, at 500 nodes with few pods, as a user runs it."""

from __future__ import annotations

import json

import pytest

from corral.bench.workloads import load_workloads
from tests.cli.test_cli import corral

WORKLOADS = sorted(load_workloads())


def check_invariants(result: dict) -> None:
    assert result["boundPods"] == result["measuredPods"] > 0, "every measured pod is bound"
    assert result["overcommittedNodes"] == 0
    assert result["checks"]["antiAffinityNodesWithTwoGreenPods"] == 0
    assert result["checks"]["spreadMaxZoneSkew"] <= 5
    tp, samples = result["throughput"], result["throughputSamples"]
    assert samples and min(samples) <= tp["p50"] <= tp["p90"] <= tp["p99"] <= max(samples)
    # The last sample is taken once every measured pod is bound: the samples add up to all of them.
    assert sum(samples) == result["measuredPods"]
    # The average is the measured pods over the measured time (that rounded to the millisecond, the
    # average to a tenth: 279.1 for 500 pods in 1.792 s is right, though 500 / 1.7915 = 279.096).
    seconds = result["measureSeconds"]
    low, high = result["measuredPods"] / (seconds + 0.0005), result["measuredPods"] / max(seconds - 0.0005, 1e-9)
    assert low - 0.05 <= tp["average"] <= high + 0.05
    for latencies in (result["attemptLatencyMs"], result["e2eLatencyMs"], result["createLatencyMs"]):
        assert 0 < latencies["p50"] <= latencies["p90"] <= latencies["p99"]
    # Create → bound includes the scheduling attempt itself.
    assert result["e2eLatencyMs"]["p50"] >= result["attemptLatencyMs"]["p50"]
    assert 20 * 2**20 < result["peakRssBytes"] < 4 * 2**30  # a Python process with 500 nodes: tens of MiB
    for check in ("victimsNotLowerThanPreemptors", "churnPodsNotBound", "gangsBoundBeforeComplete"):
        assert result["checks"].get(check, 0) == 0, check
    placement = result["placement"]
    assert 0 < placement["nodesUsed"] <= result["nodes"]
    assert placement["podsPerNodeMin"] <= placement["podsPerNodeMax"]
    assert placement["podsPerNodeMax"] * placement["nodesUsed"] >= result["boundPods"]


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_shipped_workload_runs_at_500_nodes_and_keeps_its_invariants(workload):
    # Preemption needs full nodes: --small would leave most of them empty.
    small = () if workload.startswith("Preemption") else ("--small",)
    result = json.loads(corral("bench", f"{workload}/500Nodes", *small, "-o", "json").stdout)
    assert result["workload"] == f"{workload}/500Nodes" and result["nodes"] == 500
    check_invariants(result)
    if workload == "SchedulingPodAntiAffinity":
        assert result["placement"]["podsPerNodeMax"] <= 1
    if workload == "MixedChurn":
        assert result["churnedPods"] > 0
    if workload == "PreemptionBasic":  # each of the 500 pods of 3 cpu preempted three of 900m
        assert result["preemption"] == {"victims": 1500, "victimsByPriority": {"1": 1500}}
    if workload == "PreemptionAsync":
        assert result["preemption"]["victims"] > 0 and result["churnedPods"] > 0


def test_bench_runs_against_a_running_server_over_http(cluster_process):
    result = json.loads(corral("bench", "SchedulingBasic/500Nodes", "--small", "-o", "json", "--creators", "8",
                               "--server", cluster_process.url, "--kubeconfig", cluster_process.kubeconfig).stdout)
    assert result["mode"] == "http" and result["creators"] == 8
    check_invariants(result)
    # What each process spent per measured pod: the server's from its metrics, the client's own.
    cpu = result["cpuPerPodMicros"]
    assert cpu["server"] > 0 and cpu["benchmark"] > 0


def test_bench_runs_in_process_with_the_scheduler_in_a_process_of_its_own():
    result = json.loads(corral("bench", "SchedulingBasic/500Nodes", "--scheduler-process", "-o", "json").stdout)
    assert result["mode"] == "in-process, scheduler process"
    check_invariants(result)
    # The attempts' latencies come from the child's metrics; the peak memory counts the child's too.
    assert 0 < result["attemptLatencyMs"]["p50"] <= result["attemptLatencyMs"]["p99"]
    # Each process's CPU per measured pod: the scheduler process's from its own metrics.
    assert set(result["cpuPerPodMicros"]) == {"server", "scheduler"}
    assert all(us > 0 for us in result["cpuPerPodMicros"].values())
    inproc = json.loads(corral("bench", "SchedulingBasic/500Nodes", "--small", "--no-scheduler-process",
                               "-o", "json").stdout)
    assert inproc["mode"] == "in-process"
    assert set(inproc["cpuPerPodMicros"]) == {"server"} and inproc["cpuPerPodMicros"]["server"] > 0
    assert result["peakRssBytes"] > inproc["peakRssBytes"] + 50 * 2**20
    for flag in ("--scheduler-process", "--no-scheduler-process"):
        both = corral("bench", "SchedulingBasic/500Nodes", flag, "--server", "https://127.0.0.1:1", check=False)
        assert both.returncode == 1 and f"{flag} is for in-process runs" in both.stderr


def test_bench_in_process_runs_the_scheduler_where_corral_server_would():
    from corral.server.control.cores import scheduler_in_child

    result = json.loads(corral("bench", "SchedulingBasic/500Nodes", "--small", "-o", "json").stdout)
    assert result["mode"] == ("in-process, scheduler process" if scheduler_in_child() else "in-process")


def test_the_list_and_a_bad_name_are_answered_clearly():
    listing = corral("bench", "--list").stdout
    assert "SchedulingBasic/5000Nodes_10000Pods" in listing and "TopologySpreading/5000Nodes_2000Pods" in listing
    bad = corral("bench", "SchedulingBasic/9Nodes", check=False)
    assert bad.returncode == 1 and "has no size '9Nodes'" in bad.stderr


def test_the_table_shows_throughput_percentiles_only_for_runs_long_enough_to_have_them(capsys):
    """Percentiles of one-second samples from a run under 5 s were the one sample there was."""
    out = corral("bench", "SchedulingBasic/500Nodes", "--small").stdout
    row = next(line for line in out.splitlines() if line.startswith("throughput (pods/s)"))
    assert row.split()[-3:] == ["—", "—", "—"] and "throughput percentiles need a measurement of 5 s" in out
    from corral.cli.bench import _print_table

    result = json.loads(corral("bench", "SchedulingBasic/500Nodes", "--small", "-o", "json").stdout)
    result["measureSeconds"] = 12.0  # as a long run reports
    result["throughput"].update(p50=101.0, p90=202.0, p99=303.0)
    _print_table(result)
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if line.startswith("throughput (pods/s)"))
    assert row.split()[-3:] == ["101.0", "202.0", "303.0"] and "need a measurement" not in printed


def test_throughput_over_time_can_be_drawn_to_a_png(tmp_path):
    path = tmp_path / "throughput.png"
    out = corral("bench", "SchedulingBasic/500Nodes", "--small", "--plot", str(path)).stdout
    assert f"drawn to {path}" in out
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_bench_runs_in_process_on_etcd_and_refuses_a_used_store(tmp_path):
    from corral.testing.etcd import EtcdProcess

    etcd = EtcdProcess(str(tmp_path / "etcd")).start()
    try:
        result = json.loads(corral("bench", "SchedulingBasic/500Nodes", "--small", "-o", "json",
                                   "--store", etcd.url).stdout)
        assert result["mode"].startswith("in-process, etcd")
        check_invariants(result)
        again = corral("bench", "SchedulingBasic/500Nodes", "--small", "--store", etcd.url, check=False)
        assert again.returncode == 1 and "must be empty" in again.stderr and "Traceback" not in again.stderr
    finally:
        etcd.stop()
    both = corral("bench", "SchedulingBasic/500Nodes", "--store", etcd.url, "--server", "http://127.0.0.1:1",
                  check=False)
    assert both.returncode == 1 and "--store is for in-process runs" in both.stderr


def test_the_soak_benchmark_runs_its_mixed_load_and_finds_nothing_lost(tmp_path):
    """bench/soak_bench.py at toy size (its real run is 30 minutes): the load, the RSS samples, the checks."""
    import os
    import subprocess
    import sys

    from corral.testing.process import child_env

    out = tmp_path / "soak.json"
    proc = subprocess.run([sys.executable, os.path.join("bench", "soak_bench.py"), "--minutes", "0.2", "--nodes", "5",
                           "--watchers", "2", "--creates-per-second", "10", "--live-pods", "20", "--json", str(out),
                           "--server-arg=--event-ttl=3600"],
                          capture_output=True, text=True, timeout=110, env=child_env(None))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["created"] >= 50 and result["deleted"] == result["created"] - result["livePods"]
    assert result["lostCount"] == 0 and result["createsUnseenByAWatcher"] == [0, 0] and result["errors"] == {}
    assert result["rssCurve"] and result["rssMiB"]["start"] > 20 and "growthOverLastThird" in result["rssMiB"]
    assert result["eventsAtEnd"] > 0  # the scheduler's and the hollow nodes' Events, listed at the end
    assert set(result["latencyMs"]) >= {"create", "update", "delete", "list"}


@pytest.mark.parametrize("script, args, says", [
    ("scheduler_bench.py", ["--nodes", "50", "--pods", "100", "--repeat", "1"], "decisions/s"),
    ("scheduler_bench.py", ["--nodes", "50", "--pods", "100", "--repeat", "1"], "too large median"),
    ("scheduler_bench.py", ["--nodes", "50", "--pods", "100", "--profile"], "function calls"),
    ("plan_bench.py", ["--nodes", "50", "--bound", "100", "--pods", "20", "--repeat", "1"], "decisions"),
    ("plan_bench.py", ["--nodes", "50", "--bound", "100", "--pods", "20", "--profile"], "function calls"),
])
def test_the_decision_benchmarks_and_their_profiles_run_from_a_fresh_install(script, args, says):
    """At toy size: each runs, and --profile needs nothing the project does not declare."""
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, os.path.join("bench", script), *args], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert says in proc.stdout


def test_the_client_benchmark_measures_the_three_clients_against_a_real_server():
    """At toy size: the README's client figures come from this script; each client's creates must
    succeed (a refused create fails the run) and each is measured in every round."""
    import os
    import re
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, os.path.join("bench", "client_bench.py"), "--requests", "40",
                           "--concurrency", "4", "--rounds", "2"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = re.findall(r"^(corral Client|bare aiohttp|bare streams) +(\d+) creates/s +client CPU +(\d+) µs"
                      r" a request +server CPU +\d+$", proc.stdout, re.M)
    assert [r[0] for r in rows] == ["corral Client", "bare aiohttp", "bare streams"] * 2
    assert all(int(rate) > 0 and int(cpu) > 0 for _, rate, cpu in rows)


def test_the_security_cost_benchmark_compares_the_real_server_with_a_plain_baseline_of_the_same_code():
    """At toy size: #10's figure comes from this script; it must keep running, measure all three
    servers in every round, and measure the baseline over plain HTTP and the real server over TLS."""
    import json
    import os
    import statistics
    import subprocess
    import sys

    from corral.testing.process import child_env

    proc = subprocess.run([sys.executable, os.path.join("bench", "security_cost.py"), "--rounds", "2", "--pods", "20",
                           "--clients", "4", "--json"], capture_output=True, text=True, timeout=110, env=child_env(None))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert [len(result["rates"][k]) for k in ("baseline", "admin", "rbac")] == [2, 2, 2]
    assert all(rate > 0 for rates in result["rates"].values() for rate in rates)
    assert result["servers"]["baseline"].startswith("http://")
    assert result["servers"]["admin"].startswith("https://") and result["servers"]["rbac"].startswith("https://")
    for kind in ("admin", "rbac"):
        summary = result["summary"][kind]
        assert summary["serverCpuMsPerCreate"] >= 0 and len(summary["costPercentQuartiles"]) == 3
        # The median of the per-round costs, each against the baseline's chunk of the same round.
        per_round = [100 * (1 - s / b) for s, b in zip(result["rates"][kind], result["rates"]["baseline"])]
        assert abs(summary["costPercent"] - statistics.median(per_round)) < 0.2


def test_the_split_benchmark_measures_the_control_plane_with_and_without_its_scheduler():
    """At toy size: both runs bind every measured pod (the stand-in writes each pod's binding and
    Scheduled event without scheduling it), and the scheduler's part of the loop's CPU is the
    difference of the two: positive, since scheduling costs something."""
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, os.path.join("bench", "split_bench.py"), "--workload",
                           "SchedulingBasic/500Nodes", "--repeat", "1", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert [len(result["runs"][mode]) for mode in ("whole", "no scheduler")] == [1, 1]
    for mode in ("whole", "no scheduler"):
        run = result["runs"][mode][0]
        assert run["podsPerSecond"] > 0 and run["loopMicrosPerPod"] > 0 and run["otherThreadsMicrosPerPod"] >= 0
    # The scheduler bound the pods of the whole run, the stand-in all of the other's (500 + 1,000).
    assert [result["runs"][mode][0]["boundByStandIn"] for mode in ("whole", "no scheduler")] == [0, 1500]
    whole, alone = (result["medians"][m]["loopMicrosPerPod"] for m in ("whole", "no scheduler"))
    assert result["schedulerLoopMicrosPerPod"] == round(whole - alone, 1) > 0
    assert result["splitGainBound"] == round(whole / alone, 2) > 1


def test_repeat_runs_the_workload_afresh_each_time_and_reports_every_run_and_their_median():
    import statistics

    result = json.loads(corral("bench", "SchedulingBasic/500Nodes", "--small", "--repeat", "3", "-o", "json").stdout)
    assert result["repeat"] == 3 and len(result["runs"]) == 3
    assert result["workload"] == "SchedulingBasic/500Nodes" and result["measuredPods"] == 100
    for run in result["runs"]:  # each on a cluster of its own: the same names created again, all bound
        check_invariants(run)
    median = result["median"]
    averages = [run["throughput"]["average"] for run in result["runs"]]
    assert median["throughput"] == round(statistics.median(averages), 1)
    assert median["e2eLatencyMsP50"] == round(statistics.median(r["e2eLatencyMs"]["p50"] for r in result["runs"]), 3)
    assert median["peakRssBytesMax"] == max(run["peakRssBytes"] for run in result["runs"])
    assert median["overcommittedNodesMax"] == 0 and median["boundPodsMin"] == 100
    assert set(median["cpuPerPodMicros"]) == set(result["runs"][0]["cpuPerPodMicros"])

    shown = corral("bench", "SchedulingBasic/500Nodes", "--small", "--repeat", "2")
    rows = [line.split() for line in shown.stdout.splitlines()]
    runs = [r for r in rows if len(r) > 1 and r[1].replace(".", "", 1).isdigit()]  # RUN, then pods/s
    assert [r[0] for r in runs] == ["1", "2", "median"] and all(float(r[1]) > 0 for r in runs)
    assert "median of 2 runs:" in shown.stdout
    assert "run 1/2: corral bench SchedulingBasic/500Nodes" in shown.stderr and "run 2/2" in shown.stderr


def test_repeat_refuses_what_cannot_be_run_afresh_and_stops_at_a_failed_run():
    for extra, says in ((("--server", "https://127.0.0.1:1"), "a server keeps the objects of the run before"),
                        (("--store", "sqlite:///nowhere.db"), "a store given with --store keeps"),
                        (("--plot", "x.png"), "--plot draws one run")):
        refused = corral("bench", "SchedulingBasic/500Nodes", "--repeat", "2", *extra, check=False)
        assert refused.returncode == 1 and says in refused.stderr, refused.stderr
        assert "run 1/2" not in refused.stderr  # refused before any run
    failed = corral("bench", "SchedulingBasic/500Nodes", "--small", "--repeat", "2", "--timeout", "0.01", check=False)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert "of the 50 init pods were not bound within 0.01 s" in failed.stderr  # the run's own error
    assert "run 1/2 of SchedulingBasic/500Nodes failed (exit status 1); 0 finished before it" in failed.stderr
    assert "run 2/2" not in failed.stderr


@pytest.mark.parametrize("creators", [1, 5])
async def test_creators_is_how_many_creates_are_in_flight_at_once(creators):
    import asyncio

    from corral.bench.runner import held_by, run_workload
    from corral.bench.targets import InProcessTarget
    from corral.bench.workloads import resolve

    in_flight, most = 0, {"Node": 0, "Pod": 0}

    class Counting(InProcessTarget):  # a server slow to answer: every creator gets to send
        async def create(self, kind, obj, namespace=None):
            nonlocal in_flight
            in_flight += 1
            most[kind] = max(most.get(kind, 0), in_flight)
            try:
                await asyncio.sleep(0.005 if kind == "Pod" and creators == 1 else 0.002)
                await super().create(kind, obj, namespace)
            finally:
                in_flight -= 1

    workload, size = resolve("SchedulingBasic/500Nodes")
    result = await run_workload(workload, size, Counting(lambda *a: None), small=True, creators=creators)
    assert most == {"Node": creators, "Pod": creators}
    assert result.data["creators"] == creators
    check_invariants(result.data)
    if creators == 1:  # 100 measured pods, one at a time, 5 ms each: the creator held the run
        assert result.data["createSeconds"] >= 0.5
        assert held_by(result.data).startswith(
            f"the measured pods were created over {result.data['createSeconds']:g} s of the "
            f"{result.data['measureSeconds']:g} s measured: the run was held by its 1 creator (each create took ")
        assert held_by(result.data).endswith("--creators 4 loads the cluster further")
    with pytest.raises(ValueError, match="creators must be 1 to 4096, got 0"):
        await run_workload(workload, size, Counting(lambda *a: None), creators=0)


def test_creators_is_refused_out_of_range_and_carried_to_every_repeated_run():
    refused = corral("bench", "SchedulingBasic/500Nodes", "--creators", "0", check=False)
    assert refused.returncode == 2 and "'--creators': 0 is not in the range 1<=x<=4096" in refused.stderr
    result = json.loads(corral("bench", "SchedulingBasic/500Nodes", "--small", "--creators", "3", "--repeat", "2",
                               "-o", "json").stdout)
    assert [run["creators"] for run in result["runs"]] == [3, 3]


def test_the_result_says_whether_its_creators_or_the_cluster_held_the_run():
    from corral.bench.runner import held_by

    run = {"measureSeconds": 2.0, "createSeconds": 1.9, "creators": 64, "createLatencyMs": {"p50": 9.44},
           "e2eLatencyMs": {"p50": 23.0}}
    assert held_by(run) == ("the measured pods were created over 1.9 s of the 2 s measured: the run was held by its "
                            "64 creators (each create took 9.4 ms p50), and the scheduler kept up (create→bound "
                            "23.0 ms p50); --creators 256 loads the cluster further")
    assert held_by({**run, "creators": 4096}).endswith("--creators 4096 loads the cluster further")
    assert held_by({**run, "createSeconds": 1.7}) == (
        "the measured pods were created over 1.7 s of the 2 s measured: the run was held by the cluster, which "
        "bound the last pods after the creates ended")
    assert held_by({"measureSeconds": 2.0}) == ""  # a result saved before createSeconds was measured
    shown = corral("bench", "SchedulingBasic/500Nodes", "--small", "--creators", "1")
    assert "The measured pods were created over " in shown.stdout
