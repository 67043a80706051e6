"""The ``corral`` command line. Each command is a thin click function over the async client.

Errors are one line on stderr starting with ``error:`` and a non-zero exit status; for manifests
the line names the file, the document and the field.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click

import corral

from corral.cli.common import (  # noqa: E402
    CliError,
    format_api_error,
    global_server_option,
    kubeconfig_option,
    make_client as _client,
    namespace_option,
    resolve_kind as _resolve,
    run,
    server_option,
)

@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(corral.__version__, "--version", prog_name="corral")
@kubeconfig_option
@global_server_option
def cli() -> None:
    """corral: a lightweight container orchestrator with a Kubernetes-compatible API.

    Start a cluster with `corral server`, then `corral apply -f pod.yaml`, `corral get pods`.
    """


# --- server ---------------------------------------------------------------------------------------------


@cli.command()
@click.option("--data-dir", default=None, metavar="DIR",
              help="Where the SQLite store lives (default: ~/.local/share/corral).")
@click.option("--address", default="127.0.0.1:7443", show_default=True, metavar="HOST:PORT",
              help="Address to serve the API on (port 0 picks a free port).")
@click.option("--store", "store_url", default=None, metavar="URL",
              help="Where the cluster state lives. sqlite:///path/to/file.db: one file, for one server "
                   "(default: corral.db in --data-dir). etcd://HOST:PORT[,HOST:PORT...]: an etcd cluster, "
                   "named by its members' client addresses; several corral servers may share it, each "
                   "serving the whole API, and they elect one leader to run the scheduler and controllers.")
@click.option("--etcd-cafile", default="", metavar="FILE",
              help="Reach the etcd store over TLS, trusting the CA in this PEM file.")
@click.option("--etcd-certfile", default="", metavar="FILE",
              help="The client certificate to present to etcd (with --etcd-keyfile; for etcd's --client-cert-auth).")
@click.option("--etcd-keyfile", default="", metavar="FILE", help="The key of --etcd-certfile.")
@click.option("--scheduler/--no-scheduler", "run_scheduler", default=True, show_default=True,
              help="Run the scheduler (inside the server or in a child process: --scheduler-process).")
@click.option("--scheduler-process/--no-scheduler-process", "scheduler_process", default=None,
              help="Run the scheduler in a child process of its own, on another core, or inside the server. Default: "
                   "a child process where two cores or more are usable (CPU affinity and cgroup quota), ~1.6x the "
                   "pods/s of the scheduler inside the server on 2 cores; inside the server on one core. Under a "
                   "burst, pods wait longer in a child's queue. Explain, plans and the scheduler's metrics are asked "
                   "of the child.")
@click.option("--scheduler-config", default=None, metavar="FILE",
              help="Scheduler profiles (a SchedulerConfiguration YAML file); default: the default profile.")
@click.option("--node-monitor-grace-period", "grace", default=40.0, show_default=True, metavar="SECONDS",
              help="A node whose lease is older than this becomes NotReady: at least twice --node-heartbeat.")
@click.option("--node-heartbeat", "heartbeat", default=10.0, show_default=True, metavar="SECONDS",
              type=click.FloatRange(min=0, min_open=True),
              help="How often the agents renew their leases (their --heartbeat), for the check above.")
@click.option("--max-node-heartbeats", "heartbeat_rate", default=1000.0, show_default=True, metavar="PER_SECOND",
              type=click.FloatRange(min=0, min_open=True),
              help="Past this many lease renewals a second (10,000 nodes at the defaults), every node's heartbeat "
                   "slows to keep to it, and the grace period and scheduling's heartbeat freshness grow with it: "
                   "at 50,000 nodes agents renew every 50 s and a silent node is NotReady after 200 s.")
@click.option("--pod-eviction-timeout", "eviction", default=300.0, show_default=True, metavar="SECONDS",
              help="Pods of a node NotReady this long are placed elsewhere.")
@click.option("--node-eviction-rate", "eviction_rate", default=0.1, show_default=True, metavar="PER_SECOND",
              type=click.FloatRange(min=0),
              help="Lost nodes whose pods are evicted a second, per zone (topology.kubernetes.io/zone). "
                   "When every node is NotReady, none are.")
@click.option("--secondary-node-eviction-rate", "secondary_rate", default=0.01, show_default=True,
              metavar="PER_SECOND", type=click.FloatRange(min=0),
              help="The same in a zone of more than --large-cluster-size-threshold nodes where at least "
                   "--unhealthy-zone-threshold of them are NotReady (a smaller such zone evicts none).")
@click.option("--unhealthy-zone-threshold", "unhealthy_threshold", default=0.55, show_default=True, metavar="SHARE",
              type=click.FloatRange(min=0, max=1), help="The NotReady share (of more than two nodes) that makes "
                                                        "a zone unhealthy.")
@click.option("--large-cluster-size-threshold", "large_cluster", default=50, show_default=True, metavar="NODES",
              type=click.IntRange(min=0), help="A zone of more nodes than this is large (see above).")
@click.option("--local-agent", is_flag=True, help="Also run this machine as a node (process runtime).")
@click.option("--leader-elect/--no-leader-elect", default=None,
              help="Run the scheduler and controllers only while holding the Lease "
                   "kube-system/corral-control-plane. Default: on with an etcd store, off with SQLite.")
@click.option("--identity", default="", metavar="NAME",
              help="This server's name in the leader Lease (default: host name and a random suffix).")
@click.option("--advertise-url", default="", metavar="URL",
              help="How the other servers reach this one, written on the leader Lease (default: the URL "
                   "it listens on; set it when listening on 0.0.0.0).")
@click.option("--leader-elect-lease-duration", "lease_seconds", default=15.0, show_default=True, metavar="SECONDS",
              help="How long a leader's Lease lasts without renewal before another server may take it.")
@click.option("--leader-elect-renew-deadline", "renew_deadline", default=10.0, show_default=True, metavar="SECONDS",
              help="A leader that has not renewed for this long stops leading.")
@click.option("--leader-elect-retry-period", "retry_period", default=2.0, show_default=True, metavar="SECONDS",
              help="How often the leader renews and the others try to acquire.")
@click.option("--tls-san", "tls_sans", multiple=True, metavar="NAME|IP",
              help="Another name or address clients reach this server by, for its certificate (repeatable).")
@click.option("--write-kubeconfig/--no-write-kubeconfig", default=True, show_default=True,
              help="Also write the admin kubeconfig to ~/.config/corral/kubeconfig when there is none there.")
@click.option("--audit-log", default="", metavar="PATH|off",
              help="Where to write one JSON line per request that changed state or was refused "
                   "(default: audit.log in --data-dir; off: none).")
@click.option("--audit-log-max-size", "audit_max_mib", default=100, show_default=True, metavar="MiB",
              type=click.IntRange(min=1), help="Rotate the audit log past this size (5 older files are kept).")
@click.option("--max-requests-inflight", "max_reads", default=400, show_default=True, type=click.IntRange(min=1),
              help="Reads in flight at once, for users and, separately, for the cluster's own components; past it 429.")
@click.option("--max-mutating-requests-inflight", "max_writes", default=200, show_default=True,
              type=click.IntRange(min=1), help="Writes in flight at once, per lane as --max-requests-inflight.")
@click.option("--encryption-key-file", "encryption_key_file", default="", metavar="PATH",
              help="The keys Secrets are encrypted with in the store, one NAME:BASE64 (32 bytes) per line; the first "
                   "encrypts, all decrypt (default: encryption.key in --data-dir, made on first start). Servers "
                   "sharing an etcd store need the same file.")
@click.option("--max-object-size", default="1536Ki", show_default=True, metavar="BYTES",
              help="The largest object the server stores, as JSON (etcd's own default limit); larger writes get "
                   "413. Also the limit on YAML request bodies. A quantity: 1536Ki, 3Mi, 2000000.")
@click.option("--quota-backend-bytes", "quota", default="2Gi", show_default=True, metavar="BYTES",
              help="SQLite store: past this much data, creates and updates get 507 and /readyz fails until "
                   "deletions and compaction (run at once when the store is full) free space; 0: no quota. "
                   "On etcd, etcd's own --quota-backend-bytes applies.")
@click.option("--history-bytes", "history", default="64Mi", show_default=True, metavar="BYTES",
              help="History kept for watches to resume from: past the larger of this and the live objects' size "
                   "in superseded versions, the oldest go (from memory and, compacted, the store), and a watch "
                   "from before them gets 410 Gone and relists. A quantity: 64Mi, 1Gi.")
@click.option("--event-ttl", "event_ttl", default=3600.0, show_default=True, metavar="SECONDS",
              type=click.FloatRange(min=1), help="Events older than this are deleted (kube-apiserver's --event-ttl).")
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]))
def server(data_dir: str | None, address: str, store_url: str | None, etcd_cafile: str, etcd_certfile: str,
           etcd_keyfile: str, run_scheduler: bool, scheduler_process: bool | None,
           scheduler_config: str | None, grace: float, heartbeat: float, heartbeat_rate: float, eviction: float,
           eviction_rate: float, secondary_rate: float, unhealthy_threshold: float, large_cluster: int,
           local_agent: bool, leader_elect: bool | None, identity: str, advertise_url: str, lease_seconds: float,
           renew_deadline: float,
           retry_period: float, tls_sans: tuple[str, ...], write_kubeconfig: bool, audit_log: str, audit_max_mib: int,
           max_reads: int, max_writes: int, encryption_key_file: str, max_object_size: str, quota: str, history: str,
           event_ttl: float,
           log_level: str) -> None:
    """Run the control plane in the foreground: API server, store and scheduler.

    \b
    One server on SQLite (the default):   corral server
    Three servers over one etcd cluster:  corral server --store etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379
    (see the README's "Running three servers" for the whole recipe)."""
    import logging

    from corral.api.kinds.coordination import HeartbeatScale
    from corral.controllers.nodes.limits import EvictionLimits
    from corral.server.app import ServerConfig, serve_forever
    from corral.server.control.cores import scheduler_in_child
    from corral.store.etcd import EtcdTLS

    if grace < 2 * heartbeat:
        raise CliError(f"--node-monitor-grace-period {grace:g}s is shorter than twice the agents' heartbeat "
                       f"({heartbeat:g}s, --node-heartbeat): a node whose agent is a moment late would go NotReady "
                       f"and back; use at least {2 * heartbeat:g}s")
    if (etcd_certfile or etcd_keyfile) and not etcd_cafile:
        raise CliError("--etcd-certfile and --etcd-keyfile need --etcd-cafile (the CA that signed etcd's certificates)")
    try:
        etcd_tls = EtcdTLS(etcd_cafile, etcd_certfile, etcd_keyfile) if etcd_cafile else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    from corral.api.quantity import QuantityError, to_units

    try:
        object_limit = to_units(max_object_size)
    except QuantityError as exc:
        raise CliError(f"--max-object-size: {exc}") from None
    if object_limit < 4096:
        raise CliError(f"--max-object-size must be at least 4Ki (a Node or Pod takes a few KiB), got {max_object_size}")
    try:
        quota_bytes = to_units(quota)
    except QuantityError as exc:
        raise CliError(f"--quota-backend-bytes: {exc}") from None
    if quota_bytes and quota_bytes < 16 * 2**20:
        raise CliError(f"--quota-backend-bytes must be 0 (none) or at least 16Mi, got {quota}")
    try:
        history_bytes = to_units(history)
    except QuantityError as exc:
        raise CliError(f"--history-bytes: {exc}") from None
    if history_bytes < 4 * 2**20:
        raise CliError(f"--history-bytes must be at least 4Mi, got {history}")
    if scheduler_process and not run_scheduler:
        raise CliError("--scheduler-process runs the scheduler in a process of its own; --no-scheduler runs none")
    in_child = run_scheduler and scheduler_in_child(scheduler_process)
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ServerConfig(data_dir=data_dir or "", store_url=store_url or "", etcd_tls=etcd_tls, address=address,
                          scheduler=run_scheduler, scheduler_process=in_child,
                          scheduler_config=scheduler_config, node_grace_seconds=grace,
                          heartbeats=HeartbeatScale(heartbeat, heartbeat_rate),
                          eviction_seconds=eviction, local_agent=local_agent, leader_elect=leader_elect,
                          eviction_limits=EvictionLimits(eviction_rate, secondary_rate, unhealthy_threshold,
                                                         large_cluster),
                          identity=identity, advertise_url=advertise_url, lease_seconds=lease_seconds, renew_deadline=renew_deadline,
                          retry_period=retry_period, tls_sans=tuple(n for v in tls_sans for n in v.split(",") if n),
                          user_kubeconfig=write_kubeconfig, audit_log=audit_log,
                          audit_log_max_bytes=audit_max_mib * 2**20, max_object_size=object_limit, quota_bytes=quota_bytes, event_ttl=event_ttl,
                          history_bytes=history_bytes, encryption_key_file=encryption_key_file,
                          max_requests_inflight=max_reads, max_mutating_requests_inflight=max_writes)
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        pass
    try:
        asyncio.run(serve_forever(config))
    except ConnectionError as exc:  # the store (etcd) could not be reached
        raise CliError(f"cannot open the store: {exc}") from None
    except OSError as exc:
        raise CliError(f"cannot serve on {address}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    except KeyboardInterrupt:
        pass


# --- apply / delete -------------------------------------------------------------------------------------


def _display(resource, name: str) -> str:
    return f"{resource.singular}/{name}"


@cli.command()
@click.option("--filename", "-f", "files", multiple=True, required=True, metavar="FILE|DIR|-",
              help="Manifest file, directory of manifests, or - for stdin (repeatable).")
@namespace_option
@server_option
@click.option("--dry-run", is_flag=True, help="Validate on the server without changing anything.")
@click.option("--if-plan-version", "plan_version", default=None, metavar="VERSION",
              help="Apply nothing unless the cluster is as `corral plan` saw it (its plan version).")
@run
async def apply(files: tuple[str, ...], namespace: str | None, server: str | None, dry_run: bool,
                plan_version: str | None) -> None:
    """Create or update objects from YAML or JSON manifests."""
    from corral.api.resources import by_kind
    from corral.cli.manifests import load_manifests
    from corral.client.rest import ApiError, NotFound

    import msgspec

    manifests = load_manifests(list(files))
    suffix = " (server dry run)" if dry_run else ""

    async def send(client, m, params) -> str:
        resource = by_kind(m.obj["kind"])
        name, ns = m.obj["metadata"]["name"], m.obj["metadata"].get("namespace")
        try:
            live = await client.get(resource, name, ns, raw=True)
        except NotFound:
            await client.create(m.obj, ns, params=params)
            return "created"
        patch = {k: v for k, v in m.obj.items() if k != "status"}
        after = await client.request("PATCH", resource.item_path(ns, name), body=patch,
                                     content_type="application/merge-patch+json", params=params)
        new_rv = msgspec.json.decode(after)["metadata"].get("resourceVersion")
        return "unchanged" if new_rv == live["metadata"].get("resourceVersion") else "configured"

    def refused(m, exc) -> None:
        what = f"{m.where} ({m.obj['kind']} {m.obj['metadata']['name']})"
        click.echo(f"error: {format_api_error(exc, what)}", err=True)

    for m in manifests:
        resource = by_kind(m.obj["kind"])
        if resource.namespaced:
            m.obj["metadata"]["namespace"] = namespace or m.obj["metadata"].get("namespace") or "default"
    async with _client(server) as client:
        if plan_version is not None:
            await _check_plan_version(client, plan_version)
        # Every document is checked by the server (a dry run: validation, admission, rights)
        # before any is sent, so a bad document 2 does not leave document 1 applied alone.
        failed = 0
        made_here: set[str] = set()  # namespaces an earlier document creates
        for m in manifests:
            try:
                verb = await send(client, m, {"dryRun": "All"})
            except ApiError as exc:
                ns = m.obj["metadata"].get("namespace")
                if exc.code == 404 and ns in made_here and f'namespaces "{ns}" not found' in exc.message:
                    continue  # its namespace comes with this apply: the server judges it once that exists
                failed += 1
                refused(m, exc)
                continue
            finally:
                if m.obj["kind"] == "Namespace":
                    made_here.add(m.obj["metadata"]["name"])
            if dry_run:
                for w in client.warnings:
                    click.echo(f"Warning: {m.where}: {w}", err=True)
                click.echo(f"{_display(by_kind(m.obj['kind']), m.obj['metadata']['name'])} {verb}{suffix}")
        if failed or dry_run:  # a refused document: one line each, and none of the others sent
            raise SystemExit(1 if failed else 0)
        for m in manifests:
            try:
                verb = await send(client, m, None)
            except ApiError as exc:  # changed since the check (another client): said, and the rest go on
                failed += 1
                refused(m, exc)
                continue
            for w in client.warnings:
                click.echo(f"Warning: {m.where}: {w}", err=True)
            click.echo(f"{_display(by_kind(m.obj['kind']), m.obj['metadata']['name'])} {verb}")
    if failed:
        raise SystemExit(1)


async def _check_plan_version(client, expected: str) -> None:
    """Refuse (before anything is sent) if what placement depends on changed since the plan."""
    import msgspec

    from corral.plan import PLAN_VERSION_PATH

    now = msgspec.json.decode(await client.request("GET", PLAN_VERSION_PATH))
    if now.get("planVersion") != expected:
        raise CliError(f"the cluster changed since the plan (plan version {expected}, now {now.get('planVersion')}): "
                       f"nothing applied; run corral plan again")


@cli.command()
@click.argument("kind", required=False)
@click.argument("names", nargs=-1)
@click.option("--filename", "-f", "files", multiple=True, metavar="FILE|DIR|-",
              help="Delete the objects these manifests describe.")
@namespace_option
@server_option
@click.option("--grace-period", type=int, default=None,
              help="Seconds a running pod gets to stop (default: the pod's own).")
@click.option("--force", is_flag=True, help="Remove at once, without waiting for the agent (grace 0).")
@click.option("--ignore-not-found", is_flag=True, help="Do not fail for objects that do not exist.")
@click.option("--selector", "-l", default=None, help="Delete every object of KIND whose labels match, e.g. app=web.")
@click.option("--all", "all_", is_flag=True, help="Delete every object of KIND (in the namespace).")
@run
async def delete(kind: str | None, names: tuple[str, ...], files: tuple[str, ...], namespace: str | None,
                 server: str | None, grace_period: int | None, force: bool, ignore_not_found: bool,
                 selector: str | None, all_: bool) -> None:
    """Delete objects: `corral delete pod web`, `corral delete pods -l app=web`, `corral delete pods --all`
    or `corral delete -f pod.yaml`."""
    from corral.api.resources import by_kind
    from corral.cli.manifests import load_manifests
    from corral.client.rest import NotFound

    targets: list[tuple[Any, str, str | None]] = []
    by_selection = selector is not None or all_
    if by_selection and (names or files or not kind):
        raise CliError("-l/--all select objects of one KIND: `corral delete pods -l app=web`, without names or -f")
    if selector is not None and all_:
        raise CliError("give either -l SELECTOR or --all, not both")
    if files:
        if kind or names:
            raise CliError("give either -f FILE or KIND NAME, not both")
        for m in load_manifests(list(files)):
            resource = by_kind(m.obj["kind"])
            ns = (namespace or m.obj["metadata"].get("namespace") or "default") if resource.namespaced else None
            targets.append((resource, m.obj["metadata"]["name"], ns))
    elif not by_selection:
        if not kind or not names:
            raise CliError("name what to delete: `corral delete KIND NAME...`, `corral delete KIND -l SELECTOR`, "
                           "`corral delete KIND --all` or `corral delete -f FILE`")
        resource = _resolve(kind)
        targets = [(resource, n, namespace or "default") for n in names]
    grace = 0 if force else grace_period
    missing = 0
    async with _client(server) as client:
        if by_selection:
            resource = _resolve(kind)  # type: ignore[arg-type]
            ns = (namespace or "default") if resource.namespaced else None
            listing = await client.list(resource, ns, label_selector=selector, raw=True)
            targets = [(resource, o["metadata"]["name"], ns) for o in listing.items]
            if not targets:
                click.echo("No resources found", err=True)
        for resource, name, ns in targets:
            try:
                await client.delete(resource, name, ns, grace_period_seconds=grace, raw=True)
            except NotFound:
                if not ignore_not_found:
                    click.echo(f'error: {resource.plural} "{name}" not found', err=True)
                    missing += 1
                continue
            click.echo(f'{resource.singular} "{name}" deleted')
    if missing:
        raise SystemExit(1)


# --- get / describe / events -----------------------------------------------------------------------------


@cli.command()
@click.argument("kind")
@click.argument("name", required=False)
@namespace_option
@click.option("--all-namespaces", "-A", is_flag=True, help="List across all namespaces.")
@click.option("--selector", "-l", default=None, help="Label selector, e.g. app=web,tier!=db.")
@click.option("--field-selector", default=None, help="Field selector, e.g. spec.nodeName=node-1.")
@click.option("--output", "-o", type=click.Choice(["wide", "json", "yaml", "name"]), default=None)
@click.option("--watch", "-w", is_flag=True, help="After listing, print changes as they happen.")
@click.option("--show-labels", is_flag=True, help="Add a LABELS column: each object's labels as k=v,...")
@server_option
@run
async def get(kind: str, name: str | None, namespace: str | None, all_namespaces: bool, selector: str | None,
              field_selector: str | None, output: str | None, watch: bool, show_labels: bool,
              server: str | None) -> None:
    """Show objects: `corral get pods`, `corral get nodes -o wide`, `corral get pod web -o yaml`,
    `corral get deployments,replicasets,pods`."""
    from corral.cli.printers import dump, print_table, table_rows

    if "," in kind:
        if name or watch:
            raise click.UsageError("several kinds at once (KIND,KIND) take no NAME and no --watch")
        await _get_kinds([_resolve(k) for k in kind.split(",") if k], namespace, all_namespaces, selector,
                         field_selector, output, show_labels, server)
        return
    resource = _resolve(kind)
    ns = None if (all_namespaces or not resource.namespaced) else (namespace or "default")
    async with _client(server) as client:
        if name:
            objs = [await client.get(resource, name, ns or "default", raw=True)]
            rv = objs[0]["metadata"].get("resourceVersion", "")
        else:
            listing = await client.list(resource, ns, label_selector=selector, field_selector=field_selector,
                                        raw=True)
            objs, rv = listing.items, listing.resource_version
        if output in ("json", "yaml"):
            doc = objs[0] if name else {"apiVersion": "v1", "kind": "List", "items": objs,
                                        "metadata": {"resourceVersion": rv}}
            click.echo(dump(doc, output), nl=False)
        elif output == "name":
            for o in objs:
                click.echo(f"{resource.singular}/{o['metadata']['name']}")
        else:
            headers, rows = table_rows(resource, objs, wide=output == "wide", all_namespaces=all_namespaces,
                                       show_labels=show_labels)
            if rows or watch:
                print_table(headers, rows)
            else:
                where = "" if not resource.namespaced or all_namespaces else f" in {ns} namespace"
                click.echo(f"No resources found{where}.", err=True)
        if not watch:
            return
        field = f"metadata.name={name}" if name else field_selector
        async for event in client.watch(resource, ns, resource_version=rv, label_selector=selector,
                                        field_selector=field, raw=True):
            if event.type == "BOOKMARK":
                continue
            if output in ("json", "yaml"):
                click.echo(dump({"type": event.type, "object": event.object}, output), nl=False)
            elif output == "name":
                click.echo(f"{resource.singular}/{event.object['metadata']['name']}")
            else:
                _, rows = table_rows(resource, [event.object], wide=output == "wide",
                                     all_namespaces=all_namespaces, show_labels=show_labels)
                suffix = "   (deleted)" if event.type == "DELETED" else ""
                click.echo("   ".join(rows[0]) + suffix)


async def _get_kinds(resources: list, namespace: str | None, all_namespaces: bool, selector: str | None,
                     field_selector: str | None, output: str | None, show_labels: bool, server: str | None) -> None:
    """``corral get KIND,KIND``: one table per kind, each name prefixed with its kind (as kubectl's)."""
    from corral.cli.printers import dump, print_table, table_rows

    found: list[tuple[Any, list[dict[str, Any]]]] = []
    async with _client(server) as client:
        for resource in resources:
            ns = None if (all_namespaces or not resource.namespaced) else (namespace or "default")
            listing = await client.list(resource, ns, label_selector=selector, field_selector=field_selector, raw=True)
            found.append((resource, listing.items))
    if output in ("json", "yaml"):
        click.echo(dump({"apiVersion": "v1", "kind": "List", "items": [o for _, objs in found for o in objs]}, output),
                   nl=False)
        return
    printed = False
    for resource, objs in found:
        prefix = f"{resource.singular}.{resource.group}/" if resource.group else f"{resource.singular}/"
        if output == "name":
            for o in objs:
                click.echo(prefix + o["metadata"]["name"])
            continue
        if not objs:
            continue
        headers, rows = table_rows(resource, objs, wide=output == "wide", all_namespaces=all_namespaces,
                                   show_labels=show_labels)
        at = headers.index("NAME")
        for row in rows:
            row[at] = prefix + row[at]
        if printed:
            click.echo()
        print_table(headers, rows)
        printed = True
    if not printed and output != "name":
        where = "" if all_namespaces else f" in {namespace or 'default'} namespace"
        click.echo(f"No resources found{where}.", err=True)


async def _events_for(client, kind: str, name: str, namespace: str | None) -> list[dict[str, Any]]:
    fields = f"involvedObject.kind={kind},involvedObject.name={name}"
    listing = await client.list("events", namespace, field_selector=fields, raw=True)
    return sorted(listing.items, key=_event_order)


def _event_order(e: dict[str, Any]) -> tuple:
    """By time, then (timestamps have whole seconds) by when the server stored them."""
    return (e.get("lastTimestamp") or e.get("eventTime") or "", int(e["metadata"].get("resourceVersion") or 0))


@cli.command()
@click.argument("kind")
@click.argument("name")
@namespace_option
@server_option
@run
async def describe(kind: str, name: str, namespace: str | None, server: str | None) -> None:
    """Show one object in detail, with its recent events."""
    from corral.cli.describe import describe_text, events_table

    resource = _resolve(kind)
    ns = (namespace or "default") if resource.namespaced else None
    async with _client(server) as client:
        obj = await client.get(resource, name, ns, raw=True)
        node_pods = None
        if resource.kind == "Node":
            node_pods = (await client.list("pods", None, field_selector=f"spec.nodeName={name}", raw=True)).items
        events = await _events_for(client, resource.kind, name, ns if resource.namespaced else None)
    click.echo(describe_text(resource.kind, obj, node_pods=node_pods), nl=False)
    events_table(events, sys.stdout)


@cli.command()
@namespace_option
@click.option("--all-namespaces", "-A", is_flag=True, help="Events of every namespace.")
@click.option("--for", "for_object", default=None, metavar="KIND/NAME", help="Only events about this object.")
@click.option("--watch", "-w", is_flag=True, help="Keep printing new events.")
@click.option("--output", "-o", type=click.Choice(["json", "yaml"]), default=None)
@server_option
@run
async def events(namespace: str | None, all_namespaces: bool, for_object: str | None, watch: bool,
                 output: str | None, server: str | None) -> None:
    """Show events, oldest first."""
    from corral.cli.printers import dump, print_table, table_rows

    fields = None
    if for_object:
        kind, _, name = for_object.partition("/")
        if not name:
            raise CliError(f"--for takes KIND/NAME, e.g. pod/web; got {for_object!r}")
        fields = f"involvedObject.kind={_resolve(kind).kind},involvedObject.name={name}"
    resource = _resolve("events")
    ns = None if all_namespaces else (namespace or "default")
    async with _client(server) as client:
        listing = await client.list(resource, ns, field_selector=fields, raw=True)
        items = sorted(listing.items, key=_event_order)
        if output:
            click.echo(dump({"apiVersion": "v1", "kind": "List", "items": items}, output), nl=False)
        elif items or watch:
            print_table(*table_rows(resource, items, all_namespaces=all_namespaces))
        else:
            click.echo("No events found." if all_namespaces else f"No events found in {ns} namespace.", err=True)
        if watch:
            async for event in client.watch(resource, ns, resource_version=listing.resource_version,
                                            field_selector=fields, raw=True):
                if event.type in ("ADDED", "MODIFIED"):
                    _, rows = table_rows(resource, [event.object], all_namespaces=all_namespaces)
                    click.echo("   ".join(rows[0]))


# --- cordon / uncordon / version --------------------------------------------------------------------------


async def _set_unschedulable(server: str | None, name: str, value: bool) -> None:
    async with _client(server) as client:
        node = await client.get("nodes", name, raw=True)
        word = "cordoned" if value else "uncordoned"
        if bool((node.get("spec") or {}).get("unschedulable")) == value:
            click.echo(f"node/{name} already {word}")
            return
        await client.patch("nodes", name, {"spec": {"unschedulable": value or None}}, raw=True)
        click.echo(f"node/{name} {word}")


@cli.command()
@click.argument("node")
@server_option
@run
async def cordon(node: str, server: str | None) -> None:
    """Mark a node unschedulable; pods already on it keep running."""
    await _set_unschedulable(server, node, True)


@cli.command()
@click.argument("node")
@server_option
@run
async def uncordon(node: str, server: str | None) -> None:
    """Mark a node schedulable again."""
    await _set_unschedulable(server, node, False)


@cli.command()
@server_option
@click.option("--client", "client_only", is_flag=True, help="Only the client's version; do not contact the server.")
@run
async def version(server: str | None, client_only: bool) -> None:
    """Print the client and server versions."""
    click.echo(f"Client Version: v{corral.__version__}")
    if client_only:
        return
    import msgspec

    async with _client(server) as client:
        info = msgspec.json.decode(await client.request("GET", "/version"))
    served = info.get("gitVersion", "?").split("+")[0]
    click.echo(f"Server Version: v{info.get('corralVersion', '?')} (Kubernetes API {served})")


def _register() -> None:
    from corral.cli.bench import bench
    from corral.cli.edit import annotate, edit, label
    from corral.cli.nodes import agent, drain, logs
    from corral.cli.plan import plan
    from corral.cli.scheduling import explain, scheduler
    from corral.cli.sim import sim
    from corral.cli.streams import attach, exec_, port_forward
    from corral.cli.tokens import token

    for command in (scheduler, explain, plan, agent, logs, drain, bench, sim, token, label, annotate, edit, exec_, attach,
                    port_forward):
        cli.add_command(command)


_register()


def main() -> None:
    cli(prog_name="corral")


if __name__ == "__main__":  # pragma: no cover
    main()
