"""``corral plan``: what would happen if these manifests were applied now, decided by the running
scheduler on a copy of its state; nothing is written. Exit status as Nomad's ``job plan``: 0 when
every pod would be placed, 1 when some would stay Pending, 2 for an error."""

from __future__ import annotations

import functools
import re
import sys
from typing import Any, Callable

import click

from corral.cli.common import CliError, make_client, namespace_option, run, server_option
from corral.plan import PLAN_PATH

__all__ = ["plan", "parse_node_shape", "print_plan"]
_SHAPE = re.compile(r"^(?:(\d+)x)?\{(.*)\}$")


def _split(text: str) -> list[str]:
    """``a:1,b:{c:2,d:3}`` → ["a:1", "b:{c:2,d:3}"]: commas outside braces."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _pairs(text: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in _split(text):
        key, sep, value = part.partition(":")
        if not sep or not key.strip():
            raise ValueError(f"{what}: expected key:value, got {part!r}")
        out[key.strip()] = value.strip()
    return out


def parse_node_shape(text: str) -> dict[str, Any]:
    """``4x{cpu:8,memory:32Gi,pods:110,labels:{zone:a,disk:ssd}}`` → the PlanRequest's addNodes entry."""
    m = _SHAPE.match(text.strip())
    if m is None:
        raise ValueError("expected COUNTx{cpu:N,memory:Q[,pods:N][,labels:{key:value,...}]}, e.g. 4x{cpu:8,memory:32Gi}")
    shape: dict[str, Any] = {"count": int(m.group(1) or 1)}
    for key, value in _pairs(m.group(2), "the node shape").items():
        if key == "labels":
            if not (value.startswith("{") and value.endswith("}")):
                raise ValueError("labels: expected {key:value,...}")
            shape["labels"] = _pairs(value[1:-1], "labels")
        elif key == "pods":
            if not value.isdigit():
                raise ValueError(f"pods: expected a number, got {value!r}")
            shape["pods"] = int(value)
        elif key in ("cpu", "memory"):
            shape[key] = value
        else:
            raise ValueError(f"unknown key {key!r} (cpu, memory, pods and labels are known)")
    return shape


def _exit_2_on_error(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except click.ClickException as exc:
            exc.exit_code = 2
            raise

    return wrapper


def _scheduler_config(path: str) -> dict[str, Any]:
    from corral.api.wire.decoding import DecodeError, yaml_documents

    try:
        with open(path, "rb") as f:
            docs = [d for d in yaml_documents(f.read()) if d is not None]
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror}") from None
    except DecodeError as exc:
        raise CliError(f"{path}: {exc}") from None
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise CliError(f"{path}: expected one YAML document, a scheduler configuration mapping")
    return docs[0]


@click.command()
@click.option("--filename", "-f", "files", multiple=True, required=True, metavar="FILE|DIR|-",
              help="Manifest file, directory of manifests, or - for stdin (repeatable).")
@namespace_option
@click.option("--output", "-o", type=click.Choice(["json"]), default=None, help="The whole plan as JSON.")
@click.option("--without-node", "without", multiple=True, metavar="NODE",
              help="Plan as if NODE were drained or lost: its pods are placed again (repeatable).")
@click.option("--add-nodes", "add", multiple=True, metavar="SHAPE",
              help="Plan with new nodes, e.g. 4x{cpu:8,memory:32Gi,labels:{zone:b}} (repeatable).")
@click.option("--scheduler-config", default=None, metavar="FILE",
              help="Decide with this scheduler configuration instead of the running one's.")
@server_option
@_exit_2_on_error
@run
async def plan(files: tuple[str, ...], namespace: str | None, output: str | None, without: tuple[str, ...],
               add: tuple[str, ...], scheduler_config: str | None, server: str | None) -> None:
    """Where the pods of these manifests would land if they were applied now, which would stay
    Pending and why (with the nodes that came nearest), what preemption would remove, and each
    zone's requested cpu and memory before and after. The running scheduler decides, on a copy of
    its state: nothing is written. Exit status: 0 every pod placed, 1 some would stay Pending,
    2 an error. `corral apply --if-plan-version V` applies only if the cluster is still as planned."""
    import msgspec

    from corral.cli.manifests import load_manifests

    manifests = load_manifests(list(files))
    body: dict[str, Any] = {"apiVersion": "corral.dev/v1", "kind": "PlanRequest",
                            "namespace": namespace or "default", "items": [m.obj for m in manifests]}
    if without:
        body["withoutNodes"] = list(without)
    if add:
        shapes = []
        for text in add:
            try:
                shapes.append(parse_node_shape(text))
            except ValueError as exc:
                raise CliError(f"--add-nodes {text!r}: {exc}") from None
        body["addNodes"] = shapes
    if scheduler_config:
        body["schedulerConfig"] = _scheduler_config(scheduler_config)
    from corral.client.rest import ApiError

    async with make_client(server) as client:
        try:
            report = msgspec.json.decode(await client.request("POST", PLAN_PATH, body=body))
        except ApiError as exc:
            raise CliError(_refusal(exc, manifests)) from None
    if output == "json":
        click.echo(msgspec.json.format(msgspec.json.encode(report), indent=2).decode())
    else:
        print_plan(report, files)
    if report["pending"]:
        sys.exit(1)


def _refusal(exc: Any, manifests: list) -> str:
    """The server's refusal, with ``items[i]`` turned back into the file and document it came from."""
    from corral.cli.common import format_api_error

    text = format_api_error(exc)

    def where(m: re.Match) -> str:
        i = int(m.group(1))
        if i >= len(manifests):
            return m.group(0)
        obj = manifests[i].obj
        return f"{manifests[i].where} ({obj['kind']} {obj['metadata']['name']})" + (m.group(2) and f": {m.group(2)[1:]}")

    return re.sub(r"items\[(\d+)\](\.[\w.\[\]/-]+)?", where, text, count=1)


def _cpu(m: int) -> str:
    from corral.api.quantity import format_cpu

    return format_cpu(m)


def _share(requested: int, allocatable: int) -> str:
    return f"{100 * requested / allocatable:.0f}%" if allocatable else "-"


def print_plan(report: dict[str, Any], files: tuple[str, ...] = ()) -> None:
    from corral.cli.printers import human_bytes, print_table

    click.echo(f"Plan of {len(report['pods'])} pod(s) against the cluster at revision {report['resourceVersion']}.")
    rows, pending = [], []
    for p in report["pods"]:
        if p.get("node") is None:
            pending.append(p)
            continue
        if p.get("exists"):
            why = p["message"]
        elif "score" in p:
            scores = "  ".join(f"{k}={v:g}" for k, v in sorted(p["scores"].items(), key=lambda kv: -kv[1]) if v)
            runner = p.get("runnerUp")
            lead = ""
            if runner:
                lead = (f"tied with {runner['node']}; " if runner["by"] == 0
                        else f"ahead of {runner['node']} by {runner['by']:g}; ")
            why = lead + scores
        else:
            why = p.get("why", "")
        if p.get("preempts"):
            why = f"after preempting {', '.join(p['preempts'])}; {why}"
        rows.append([p["pod"], p["from"], p["node"], f"{p['score']:g}" if "score" in p else "-", why])
    if rows:
        click.echo()
        print_table(["POD", "FROM", "NODE", "SCORE", "WHY"], rows, out=sys.stdout)
    if pending:
        click.echo(f"\nWould stay Pending ({len(pending)}):")
        for p in pending:
            click.echo(f"  {p['pod']} ({p['from']}): {p['message']}")
            if p.get("nearestMisses"):
                click.echo(f"    nearest: {'; '.join(p['nearestMisses'])}")
    if report["preempted"]:
        click.echo(f"\nWould preempt ({len(report['preempted'])}):")
        for v in report["preempted"]:
            click.echo(f"  {v['pod']} on {v['node']}, for {v['by']}")
    zones = [[z["zone"] or "<none>",
              str(z["nodes"]) if z.get("nodesBefore", z["nodes"]) == z["nodes"] else f"{z['nodesBefore']} -> {z['nodes']}",
              f"{_cpu(z['cpuRequestedBefore'])} -> {_cpu(z['cpuRequestedAfter'])} of {_cpu(z['cpuAllocatable'])} "
              f"({_share(z['cpuRequestedAfter'], z['cpuAllocatable'])})",
              f"{human_bytes(z['memoryRequestedBefore'])} -> {human_bytes(z['memoryRequestedAfter'])} of "
              f"{human_bytes(z['memoryAllocatable'])} ({_share(z['memoryRequestedAfter'], z['memoryAllocatable'])})"]
             for z in report["zones"]]
    if zones:
        click.echo()
        print_table(["ZONE", "NODES", "CPU REQUESTED", "MEMORY REQUESTED"], zones, out=sys.stdout)
    for note in report.get("notes") or ():
        click.echo(f"Note: {note}")
    placed, stuck = report["placed"], report["pending"]
    click.echo(f"\n{placed} pod(s) would be placed" + (f", {stuck} would stay Pending." if stuck else "."))
    target = " ".join(f"-f {f}" for f in files) or "-f FILE"
    click.echo(f"To apply only if nothing changed since: corral apply {target} --if-plan-version {report['planVersion']}")
