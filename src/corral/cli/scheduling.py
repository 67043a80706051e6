"""``corral scheduler`` (the scheduler as its own process) and ``corral explain``."""

from __future__ import annotations

import sys
from typing import Any

import click

from corral.cli.common import CliError, make_client, namespace_option, run, server_option

__all__ = ["scheduler", "explain"]


@click.command()
@server_option
@click.option("--config", "config_path", default=None, metavar="FILE",
              help="Scheduler profiles (a SchedulerConfiguration YAML file); default: the default profile.")
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
@run
async def scheduler(server: str | None, config_path: str | None, log_level: str) -> None:
    """Run the scheduler on its own, against a server's HTTP API (start that server with
    --no-scheduler, or give this scheduler's profiles their own schedulerName)."""
    import logging

    from corral.aio import wait_for_termination
    from corral.scheduler.cluster import HttpWriter
    from corral.scheduler.profiles import ConfigError, load_config
    from corral.scheduler.scheduler import Scheduler
    from corral.scheduler.sources import InformerSource

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    async with make_client(server) as client:
        await client.request("GET", "/version")  # fail early, with the usual message, if unreachable
        sched = Scheduler(config, HttpWriter(client))
        source = InformerSource(sched, client)
        await source.start()
        sched.start()
        names = ", ".join(p.scheduler_name for p in config.profiles)
        click.echo(f"corral scheduler running against {client.base_url} (profiles: {names})")
        try:
            await wait_for_termination()
        finally:
            await sched.stop()
            await source.stop()


async def _local_report(client: Any, pod: dict[str, Any], config_path: str | None) -> dict[str, Any]:
    """The same explanation, computed here from the API's objects (the server runs no scheduler)."""
    import time

    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.framework.podinfo import PodInfo
    from corral.scheduler.profiles import ConfigError, build_frameworks, load_config
    from corral.scheduler.schedule_one import explain

    nodes = (await client.list("nodes", raw=True)).items
    pods = (await client.list("pods", None, raw=True)).items
    namespaces = (await client.list("namespaces", raw=True)).items
    key = (pod["metadata"].get("namespace"), pod["metadata"]["name"])
    others = [p for p in pods if (p["metadata"].get("namespace"), p["metadata"]["name"]) != key]
    cache = Cache.from_objects(nodes, others, namespaces)
    try:
        frameworks = build_frameworks(load_config(config_path), cache=cache, clock=time.time)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    info = PodInfo.from_object({**pod, "spec": {**pod.get("spec", {}), "nodeName": ""}})
    fwk = frameworks.get(info.scheduler_name)
    if fwk is None:
        raise CliError(f"no profile for schedulerName {info.scheduler_name!r}")
    return explain(fwk, cache, info)


async def _placement_report(client: Any, placement: dict[str, Any], config_path: str | None) -> dict[str, Any]:
    """A Placement's decision as the scheduler would take it now, from the API's objects: every node."""
    import time

    from corral.scheduler.batch import decide
    from corral.scheduler.cache.cache import Cache
    from corral.scheduler.profiles import ConfigError, build_frameworks, load_config

    nodes = (await client.list("nodes", raw=True)).items
    pods = (await client.list("pods", None, raw=True)).items
    namespaces = (await client.list("namespaces", raw=True)).items
    cache = Cache.from_objects(nodes, pods, namespaces)
    try:
        frameworks = build_frameworks(load_config(config_path), cache=cache, clock=time.time)
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    name = ((((placement.get("spec") or {}).get("template") or {}).get("spec") or {}).get("schedulerName")
            or "default-scheduler")
    fwk = frameworks.get(name)
    if fwk is None:
        raise CliError(f"no profile for schedulerName {name!r}")
    keep = [d["nodeName"] for d in (placement.get("status") or {}).get("decisions") or () if d.get("selected")]
    result = decide(fwk, cache, placement, keep=keep, unselected_limit=len(nodes))
    return {"placement": f"{placement['metadata'].get('namespace', 'default')}/{placement['metadata']['name']}",
            "message": result.summary, "selected": result.selected,
            "nodes": [{"node": d.node, "selected": d.selected, "score": d.score, "reason": d.reason,
                       "scores": {k: round(v, 2) for k, v in d.scores.items()}} for d in result.decisions]}


@click.command()
@click.argument("kind", type=click.Choice(["pod", "pods", "po", "placement", "placements", "pl"]))
@click.argument("name")
@namespace_option
@click.option("--output", "-o", type=click.Choice(["json"]), default=None, help="JSON for tools.")
@click.option("--scheduler-config", default=None, metavar="FILE",
              help="Profiles to use when the server runs no scheduler of its own.")
@server_option
@run
async def explain(kind: str, name: str, namespace: str | None, output: str | None,
                  scheduler_config: str | None, server: str | None) -> None:
    """Why a pod goes where it goes, or why it cannot go anywhere: every node, with the plugin and
    reason that rejected it, or each plugin's weighted score, best first. Nothing is bound.

    For a Placement: the decision the scheduler would take now over every node, which are selected,
    each one's score by plugin and preferred term, and why the others are not."""
    import msgspec

    from corral.client.rest import NotFound

    ns = namespace or "default"
    if kind.startswith("pl"):
        async with make_client(server) as client:
            placement = await client.get("placements", name, ns, raw=True)
            report = await _placement_report(client, placement, scheduler_config)
        if output == "json":
            click.echo(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
        else:
            _print_placement(report)
        return
    async with make_client(server) as client:
        pod = await client.get("pods", name, ns, raw=True)
        try:
            report = msgspec.json.decode(
                await client.request("GET", f"/corral/v1/namespaces/{ns}/pods/{name}/explain"))
        except NotFound as exc:
            if "scheduler does not run" not in exc.message:
                raise
            report = await _local_report(client, pod, scheduler_config)
    if output == "json":
        click.echo(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
        return
    _print_report(report, pod)


def _print_placement(report: dict[str, Any]) -> None:
    from corral.cli.printers import print_table

    click.echo(f"Placement {report['placement']}: {report['message']}")
    click.echo(f"Selected: {', '.join(report['selected']) or '<none>'}")
    rows = [[n["node"], "selected" if n["selected"] else "-", f"{n['score']:g}" if n["score"] is not None else "-",
             n["reason"] or "  ".join(f"{k}={v:g}" for k, v in n["scores"].items())] for n in report["nodes"]]
    print_table(["NODE", "RESULT", "SCORE", "WHY"], rows)


def _print_report(report: dict[str, Any], pod: dict[str, Any]) -> None:
    from corral.cli.printers import print_table

    bound = (pod.get("spec") or {}).get("nodeName")
    click.echo(f"Pod {report['pod']} (scheduler {report['schedulerName']}): {report['message']}")
    if bound:
        click.echo(f"Bound to: {bound}. Below: where it would go now.")
    elif report["chosen"]:
        click.echo(f"Best node: {report['chosen']}")
    else:
        click.echo("No node can take it; each node's reason is below.")
    runner = report.get("runnerUp")
    if report["chosen"] and runner:
        if runner["by"] == 0:
            click.echo(f"{report['chosen']} is tied with {runner['node']}: the tie-break chose.")
        else:
            click.echo(f"{report['chosen']} wins by {runner['by']:g} over the runner-up, {runner['node']} "
                       f"({runner['total']:g}).")
    if report.get("nearestMisses"):
        click.echo(f"Nearest: {'; '.join(report['nearestMisses'])}")
    preemption = report.get("preemption")
    if preemption and preemption.get("node"):
        victims = ", ".join(f"{v['pod']} (priority {v['priority']})" for v in preemption["victims"])
        click.echo(f"Preemption would nominate {preemption['node']}" + (f", removing {victims}." if victims else "."))
    rows = []
    for n in report["nodes"]:
        if n["feasible"]:
            details = "  ".join(f"{plugin}={score:g}" for plugin, score in n["scores"].items())
            result = "chosen" if n["node"] == report["chosen"] else "feasible"
            rows.append([n["node"], result, f"{n['total']:g}", details])
        else:
            details = f"{n['plugin']}: {'; '.join(n['reasons'])}"
            pre = n.get("preemption")
            if pre is not None and "victims" in pre:
                taken = ", ".join(f"{v['pod']} (priority {v['priority']})" for v in pre["victims"])
                details += f"; would preempt {taken}" if taken else "; would fit once terminating pods are gone"
            elif pre is not None:
                details += f"; preemption: {'; '.join(pre['reasons'])}"
            rows.append([n["node"], "rejected", "-", details])
    if rows:
        click.echo()
        print_table(["NODE", "RESULT", "SCORE", "DETAILS"], rows, out=sys.stdout)
