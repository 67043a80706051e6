"""``corral bench``: run a scheduler benchmark workload and report it."""

from __future__ import annotations

import json
import sys

import click

from corral.bench import CREATORS, MAX_CREATORS
from corral.cli.common import CliError, kubeconfig_option, run

MIN_SAMPLE_SECONDS = 5  # one-second throughput samples needed before their percentiles mean anything
MAX_REPEAT = 20  # runs of one --repeat

__all__ = ["bench"]


class _BarProgress:
    """A rich progress bar on stderr (only on a terminal)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                  TimeElapsedColumn(), console=Console(stderr=True), transient=True)
        self._progress.start()
        self._task = None

    def phase(self, text: str, total: int) -> None:
        if self._task is not None:
            self._progress.remove_task(self._task)
        self._task = self._progress.add_task(text, total=max(total, 1))

    def advance(self, done: int) -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=done)

    def done(self) -> None:
        self._progress.stop()


def _print_table(d: dict) -> None:
    from corral.cli.printers import print_table

    t, a, e, p = d["throughput"], d["attemptLatencyMs"], d["e2eLatencyMs"], d["placement"]
    click.echo(f"{d['workload']} ({d['mode']}{', small' if d['small'] else ''}): {d['boundPods']}/{d['measuredPods']} "
               f"measured pods bound on {d['nodes']} nodes in {d['measureSeconds']} s\n")
    # Throughput's percentiles are over one-second samples: from a run of a few seconds they are the
    # one or two samples there are (a 0.2 s run printed p50 = p99 = the pod count), so only the
    # average is shown below MIN_SAMPLE_SECONDS.
    seconds = int(d["measureSeconds"])  # the full seconds sampled
    spread = [f"{t['p50']}", f"{t['p90']}", f"{t['p99']}"] if seconds >= MIN_SAMPLE_SECONDS else ["—"] * 3
    rows = [
        ["throughput (pods/s)", f"{t['average']}", *spread],
        ["attempt latency (ms)", "", f"{a['p50']}", f"{a['p90']}", f"{a['p99']}"],
        ["create→bound latency (ms)", "", f"{e['p50']}", f"{e['p90']}", f"{e['p99']}"],
    ]
    if "createLatencyMs" in d:  # (not in results saved before it was measured)
        c = d["createLatencyMs"]
        rows.append(["create request (ms)", "", f"{c['p50']}", f"{c['p90']}", f"{c['p99']}"])
    print_table(["MEASURE", "AVERAGE", "P50", "P90", "P99"], rows, out=sys.stdout)
    if seconds < MIN_SAMPLE_SECONDS:
        click.echo(f"(throughput percentiles need a measurement of {MIN_SAMPLE_SECONDS} s or more; "
                   f"this one took {d['measureSeconds']} s: a larger size gives them)")
    click.echo(f"\npeak RSS {d['peakRssBytes'] / 2**20:.0f} MiB; overcommitted nodes {d['overcommittedNodes']}; "
               f"nodes used {p['nodesUsed']}; pods per node min {p['podsPerNodeMin']} max {p['podsPerNodeMax']} "
               f"stdev {p['podsPerNodeStdev']}")
    if d.get("cpuPerPodMicros"):  # (not in results saved before it was measured)
        names = {"server": "server", "scheduler": "scheduler process", "benchmark": "benchmark client"}
        click.echo("CPU per measured pod: " + ", ".join(f"{names.get(who, who)} {us} µs"
                                                       for who, us in d["cpuPerPodMicros"].items()))
    from corral.bench.runner import held_by

    if held := held_by(d):
        click.echo(held[0].upper() + held[1:])
    checks = d["checks"]
    click.echo(f"checks: nodes with two anti-affine pods {checks['antiAffinityNodesWithTwoGreenPods']}; "
               f"largest zone skew of spread pods {checks['spreadMaxZoneSkew']}")


@click.command()
@click.argument("name", required=False, metavar="WORKLOAD/SIZE")
@click.option("--list", "list_", is_flag=True, help="List the shipped workloads and their sizes.")
@click.option("--output", "-o", type=click.Choice(["json"]), default=None, help="One JSON object, for tools.")
@click.option("--server", "-s", default=None, help="Benchmark a running server over HTTP (default: in this process).")
@kubeconfig_option
@click.option("--store", "store_url", default=None, metavar="URL",
              help="In-process only: the store to run on, as for `corral server --store` (default: SQLite "
                   "in a temporary directory). An etcd must be empty: the benchmark's objects are not removed.")
@click.option("--scheduler-process/--no-scheduler-process", "scheduler_process", default=None,
              help="In-process only: the scheduler in a child process, or inside the server. Default: as `corral "
                   "server` chooses, a child process where two cores or more are usable.")
@click.option("--small", is_flag=True, help="Pod counts divided by 10 (nodes unchanged): a quick check.")
@click.option("--timeout", default=600.0, show_default=True, help="Seconds to wait for pods to be bound.")
@click.option("--plot", default=None, metavar="FILE.png", help="Also draw throughput over time to a PNG file.")
@click.option("--creators", default=CREATORS, show_default=True, type=click.IntRange(1, MAX_CREATORS), metavar="N",
              help="Create requests in flight at once (each creator sends its next when its last is answered). "
                   "Where creates take long (etcd, a remote server) few creators hold the run below what the "
                   "cluster can schedule: raise it to load the cluster further.")
@click.option("--repeat", default=1, show_default=True, type=click.IntRange(1, MAX_REPEAT), metavar="N",
              help="In-process only: run the workload N times, each in a fresh process and cluster, and report "
                   "every run and their median (a shared machine's runs differ by tens of percent: compare medians).")
@run
async def bench(name, list_, output, server, store_url, scheduler_process, small, timeout, plot, creators,
                repeat) -> None:
    """Run a scheduler benchmark: `corral bench SchedulingBasic/5000Nodes_10000Pods`.

    Workloads follow Kubernetes' scheduler_perf (nodes of 4 cpu, 32Gi, 110 pods; pods of 100m cpu and
    500Mi). In-process, the server, store and scheduler run in this process; with --server, pods and
    nodes are created over the HTTP API of a running server."""
    from corral.bench.runner import Progress, run_workload
    from corral.bench.targets import HttpTarget, InProcessTarget
    from corral.bench.workloads import WorkloadError, load_workloads, resolve
    from corral.server.errors import ApiError

    if list_ or not name:
        for wl in load_workloads().values():
            for size, params in wl.sizes.items():
                click.echo(f"{wl.name}/{size}  " + ", ".join(f"{k}={v}" for k, v in params.items()))
        if not list_:
            click.echo("\nrun one with `corral bench WORKLOAD/SIZE`", err=True)
        return
    try:
        workload, size = resolve(name)
    except WorkloadError as exc:
        raise CliError(str(exc)) from None
    from corral.cli.common import kubeconfig_flag, server_flag

    server = server or server_flag()  # corral --server URL bench ...
    if server and store_url:
        raise CliError("--store is for in-process runs; a server given with --server has its own store")
    if server and scheduler_process is not None:
        flag = "--scheduler-process" if scheduler_process else "--no-scheduler-process"
        raise CliError(f"{flag} is for in-process runs; a server given with --server runs its scheduler "
                       "as it was started (corral server --scheduler-process or --no-scheduler-process)")
    if repeat > 1:
        if server:
            raise CliError("--repeat is for in-process runs: a server keeps the objects of the run before "
                           "(for medians over HTTP, start a fresh server for each run)")
        if store_url:
            raise CliError("--repeat is for in-process runs on their own SQLite: a store given with --store keeps "
                           "the objects of the run before (run once per empty store instead)")
        if plot:
            raise CliError("--plot draws one run: leave out --repeat, or --plot")
        await _repeat(name, repeat, small=small, timeout=timeout, scheduler_process=scheduler_process, output=output,
                      creators=creators)
        return
    if server:
        from corral.client.config import client_credentials

        target = HttpTarget(client_credentials(server, kubeconfig_flag()), lambda *a: None, connections=creators)
    else:
        from corral.server.control.cores import scheduler_in_child

        target = InProcessTarget(lambda *a: None, store_url=store_url or "",
                                 scheduler_process=scheduler_in_child(scheduler_process))
    progress = _BarProgress() if sys.stderr.isatty() else Progress()
    try:
        result = await run_workload(workload, size, target, small=small, progress=progress, timeout=timeout,
                                    creators=creators)
    except TimeoutError as exc:
        raise CliError(str(exc)) from None
    except ApiError as exc:  # in-process: the store already held the benchmark's objects
        hint = " (the store given with --store must be empty)" if store_url and exc.code == 409 else ""
        raise CliError(f"{exc.message}{hint}") from None
    except ValueError as exc:  # in-process: a store another run used (its Secrets' key is not this run's)
        raise CliError(f"{exc}" + (" (the store given with --store must be empty)" if store_url else "")) from None
    if plot:
        _plot(result.data, plot)
    if output == "json":
        click.echo(json.dumps(result.data, indent=2))
    else:
        _print_table(result.data)
        if plot:
            click.echo(f"throughput over time drawn to {plot}")


async def _repeat(name: str, times: int, *, small: bool, timeout: float, scheduler_process: bool | None,
                  output: str | None, creators: int) -> None:
    """Run ``name`` ``times`` times, each as ``corral bench NAME -o json`` in a process of its own (a run
    inherits nothing from the one before: neither its memory nor its peak RSS), one after the other,
    and report them all with their median."""
    import asyncio
    import statistics

    args = [name, "-o", "json", "--timeout", str(timeout), "--creators", str(creators), *(["--small"] if small else [])]
    if scheduler_process is not None:
        args.append("--scheduler-process" if scheduler_process else "--no-scheduler-process")
    runs = []
    for i in range(1, times + 1):
        click.echo(f"run {i}/{times}: corral bench {name}", err=True)
        # Its progress (or its error) shows on this standard error; its result comes on the pipe.
        proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "corral", "bench", *args,
                                                    stdout=asyncio.subprocess.PIPE)
        try:
            out, _ = await proc.communicate()
        except BaseException:  # interrupted: the run stops with us
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        if proc.returncode != 0:
            raise CliError(f"run {i}/{times} of {name} failed (exit status {proc.returncode}); "
                           f"{len(runs)} finished before it")
        try:
            runs.append(json.loads(out))
        except ValueError:
            raise CliError(f"run {i}/{times} of {name} printed no result (its output: {out[:200]!r})") from None

    def median(values: list[float], digits: int = 1) -> float:
        return round(statistics.median(values), digits)

    # (every run is this version's, in one mode: the same fields, and the same processes timed)
    cpu = sorted(set.intersection(*(set(one["cpuPerPodMicros"]) for one in runs)))
    summary = {
        "throughput": median([one["throughput"]["average"] for one in runs]),
        **{f"{field}P50": median([one[field]["p50"] for one in runs], 3)
           for field in ("attemptLatencyMs", "e2eLatencyMs", "createLatencyMs")},
        "cpuPerPodMicros": {who: median([one["cpuPerPodMicros"][who] for one in runs]) for who in cpu},
        "peakRssBytesMax": max(one["peakRssBytes"] for one in runs),
        "overcommittedNodesMax": max(one["overcommittedNodes"] for one in runs),
        "boundPodsMin": min(one["boundPods"] for one in runs),
    }
    first = runs[0]
    result = {"workload": first["workload"], "mode": first["mode"], "small": first["small"], "nodes": first["nodes"],
              "measuredPods": first["measuredPods"], "repeat": times, "median": summary, "runs": runs}
    if output == "json":
        click.echo(json.dumps(result, indent=2))
        return
    from corral.cli.printers import print_table

    def row(label: str, tp, attempt, e2e, cpus: dict, rss: int, bound) -> list[str]:
        return [label, f"{tp}", f"{attempt}", f"{e2e}", " ".join(f"{cpus[w]:.0f}" for w in cpu) or "—",
                f"{rss / 2**20:.0f}", f"{bound}"]

    rows = [row(f"{i}", r["throughput"]["average"], r["attemptLatencyMs"]["p50"], r["e2eLatencyMs"]["p50"],
                r["cpuPerPodMicros"], r["peakRssBytes"], f"{r['boundPods']}/{r['measuredPods']}")
            for i, r in enumerate(runs, 1)]
    rows.append(row("median", summary["throughput"], summary["attemptLatencyMsP50"], summary["e2eLatencyMsP50"],
                    summary["cpuPerPodMicros"], summary["peakRssBytesMax"],
                    f"{summary['boundPodsMin']}/{result['measuredPods']}"))
    click.echo(f"{result['workload']} ({result['mode']}{', small' if result['small'] else ''}): {times} runs, "
               f"{result['measuredPods']} measured pods on {result['nodes']} nodes each\n")
    print_table(["RUN", "PODS/S", "ATTEMPT P50 (ms)", "CREATE→BOUND P50 (ms)",
                 f"CPU/POD µs ({', '.join(cpu) or 'none'})", "PEAK RSS (MiB)", "BOUND"], rows, out=sys.stdout)
    click.echo(f"\nmedian of {times} runs: {summary['throughput']} pods/s (the median row: each column's median, "
               f"but the largest peak RSS and the fewest pods bound); overcommitted nodes in any run: "
               f"{summary['overcommittedNodesMax']}")


def _plot(d: dict, path: str) -> None:
    """Scheduled pods per second while the measured pods scheduled, with the average."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CliError("--plot needs matplotlib: pip install 'corral[plot]'") from None
    # Whole seconds only: the last, partial second would read low (the percentiles leave it out too).
    samples = d["throughputSamples"][: max(int(d["measureSeconds"]), 1)] or [d["throughput"]["average"]]
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    ax.plot(range(1, len(samples) + 1), samples, marker="o", label="pods bound per second")
    ax.axhline(d["throughput"]["average"], linestyle="--", color="gray",
               label=f"average {d['throughput']['average']:.0f} pods/s")
    ax.set_xlabel("second of the measurement")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel("pods/s")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{d['workload']} ({d['mode']}, {d['nodes']} nodes)")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as exc:
        raise CliError(f"{path}: cannot write the plot: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
