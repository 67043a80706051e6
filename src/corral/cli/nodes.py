"""``corral agent``, ``corral logs`` and ``corral drain``: the node side of the cluster."""

from __future__ import annotations

import asyncio
import sys

import click

from corral.cli.common import CliError, make_client, namespace_option, run, server_option

__all__ = ["agent", "logs", "drain"]


def _ip_address(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    import ipaddress

    if value is None:
        return None
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an IP address (the port is --port)") from None


@click.command()
@click.option("--server", "-s", default=None, metavar="URL",
              help="The API server (to join; later the one in <data-dir>/kubeconfig). Several: comma-separated.")
@click.option("--token", default=None, envvar="CORRAL_JOIN_TOKEN", metavar="TOKEN",
              help="Join token for the first start (`corral server` prints one; `corral token create --join`). "
                   "Default: $CORRAL_JOIN_TOKEN.")
@click.option("--ca-cert-hash", default=None, metavar="sha256:HEX",
              help="The cluster CA's pin: joining stops unless the server's CA matches it.")
@click.option("--kubeconfig", "kubeconfig", default=None, metavar="FILE",
              help="Use this kubeconfig's credential instead of the node's own (<data-dir>/kubeconfig).")
@click.option("--name", default=None, help="Node name (default: this machine's hostname).")
@click.option("--runtime", type=click.Choice(["process", "docker"]), default="process", show_default=True,
              help="process: containers are local processes; docker: containers in the Docker engine.")
@click.option("--labels", default=None, metavar="K=V,...", help="Extra node labels.")
@click.option("--taints", default=None, metavar="K[=V]:EFFECT,...", help="Node taints, e.g. gpu=yes:NoSchedule.")
@click.option("--capacity", default=None, metavar="R=Q,...", help="Override what the host reports, e.g. cpu=4,memory=8Gi.")
@click.option("--reserved", default=None, metavar="R=Q,...", help="Kept for the system: allocatable = capacity − reserved.")
@click.option("--data-dir", default=None, metavar="DIR", help="Working directories and logs (default: ~/.local/share/corral/agent-NAME).")
@click.option("--address", default=None, metavar="IP", help="The address the server reaches this agent on (for logs).")
@click.option("--port", default=10250, show_default=True, help="Port of the agent's log endpoint (0: any free port).")
@click.option("--listen-address", default=None, metavar="IP", callback=_ip_address,
              help="Where the log endpoint listens (default: --address; 0.0.0.0 for every interface).")
@click.option("--run-as-user", default=None, metavar="USER",
              help="Process runtime: the user pods run as (default: nobody when the agent runs as root; an "
                   "unprivileged agent runs them as itself).")
@click.option("--cgroups/--no-cgroups", "use_cgroups", default=True, show_default=True,
              help="Process runtime: run each container in a control group of its own with its cpu and memory "
                   "limits and --max-processes per pod, where the agent may write control groups (root, cgroup "
                   "v2 with cpu, memory and pids, or v1); the agent says at start when it cannot.")
@click.option("--max-processes", default=1024, show_default=True, type=click.IntRange(min=1),
              help="Process limit: per pod (process runtime with control groups; also per pod user, RLIMIT_NPROC) "
                   "or per container (docker).")
@click.option("--max-open-files", default=4096, show_default=True, type=click.IntRange(min=16),
              help="Open files per process (process runtime).")
@click.option("--docker-host", default=None, metavar="URL", help="Docker engine (default: $DOCKER_HOST or the local socket).")
@click.option("--heartbeat", default=10.0, show_default=True, help="Seconds between Lease renewals.")
@click.option("--restart-backoff", default=10.0, show_default=True, help="First crash-loop back-off in seconds (doubles to 5 min).")
@click.option("--config-sync-period", "config_sync", default=10.0, show_default=True, metavar="SECONDS",
              type=click.FloatRange(min=0.2),
              help="How often pods' ConfigMap and Secret volumes are brought up to date with their objects.")
@click.option("--metrics-interval", default=10.0, show_default=True, type=click.FloatRange(min=0.2),
              help="Seconds between measurements of the node's and the pods' cpu and memory (kubectl top).")
@click.option("--log-level", default="warning", show_default=True, type=click.Choice(["debug", "info", "warning", "error"]))
@run
async def agent(server, token, ca_cert_hash, kubeconfig, name, runtime, labels, taints, capacity, reserved, data_dir, address, port, listen_address,
                run_as_user, use_cgroups, max_processes, max_open_files, docker_host, heartbeat, restart_backoff, metrics_interval, config_sync, log_level) -> None:
    """Run this machine as a node: register it, keep it alive, run the pods bound to it."""
    import logging
    import os

    from corral.agent.agent import Agent, AgentConfig
    from corral.agent.machine import BackoffPolicy
    from corral.agent.node_info import FlagError, default_node_name, host_capacity, parse_pairs, parse_taints
    from corral.aio import wait_for_termination
    from corral.server.app import default_data_dir

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    name = name or default_node_name()
    data_dir = data_dir or os.path.join(default_data_dir(), f"agent-{name}")
    try:
        cap = {**host_capacity(data_dir), **parse_pairs(capacity, "--capacity")}
        config = AgentConfig(name=name, data_dir=data_dir, capacity=cap, reserved=parse_pairs(reserved, "--reserved"),
                             labels=parse_pairs(labels, "--labels"), taints=parse_taints(taints), address=address,
                             port=port, listen_address=listen_address, heartbeat_seconds=heartbeat,
                             restart_backoff=BackoffPolicy(initial=restart_backoff),
                             metrics_interval_seconds=metrics_interval, config_sync_seconds=config_sync)
    except FlagError as exc:
        raise CliError(str(exc)) from None
    if runtime == "docker":
        import docker.errors

        from corral.agent.runtimes.docker import DockerRuntime

        engine = docker_host or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        try:
            rt = DockerRuntime(data_dir, base_url=docker_host, pids_limit=max_processes)
        except docker.errors.DockerException as exc:
            detail = str(exc)
            reason = ("no socket there" if "FileNotFoundError" in detail else
                      "permission denied (run as root or in the docker group)" if "ermission" in detail else
                      detail.split(": ", 1)[-1][:160])
            raise CliError(f"cannot reach the Docker engine at {engine} ({reason}): start it (systemctl start "
                           "docker), install it (apt-get install docker.io), point --docker-host at it, or run "
                           "with --runtime process") from None
    else:
        from corral.agent.runtimes.process import ProcessRuntime

        try:
            rt = ProcessRuntime(data_dir, run_as_user=run_as_user, max_processes=max_processes,
                                max_open_files=max_open_files, cgroups=use_cgroups)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    from corral.agent.credentials import JoinError, node_credentials
    from corral.client.config import client_credentials, server_url
    from corral.client.rest import Client

    try:
        if kubeconfig:
            creds = client_credentials(server, kubeconfig)
        else:
            creds = await node_credentials(data_dir, name, server=server_url(server) if server else None,
                                           token=token, ca_cert_hash=ca_cert_hash)
    except JoinError as exc:
        raise CliError(str(exc)) from None
    async with Client(credentials=creds, user_agent="corral-agent") as client:
        await client.request("GET", "/version")
        node = Agent(client, rt, config)
        try:
            await node.start()
        except OSError as exc:  # the log endpoint's address or port
            await node.stop()
            raise CliError(f"cannot serve the log endpoint on port {port}: {exc.strerror or exc} "
                           "(--port 0 picks a free port; --listen-address chooses the address)") from None
        click.echo(f"corral agent {name} ({runtime} runtime) registered with {client.base_url}; logs on port {node.port}")
        renewal = None if kubeconfig else asyncio.create_task(_keep_certificate_fresh(client, data_dir, name))
        try:
            await wait_for_termination()
        finally:
            if renewal is not None:
                renewal.cancel()
            await node.stop()


async def _keep_certificate_fresh(client, data_dir: str, name: str) -> None:
    """Renew the node's certificate while the agent runs (checked twice a day)."""
    import logging

    from corral.agent.credentials import JoinError, renew
    from corral.pki.ca import needs_renewal

    while True:
        await asyncio.sleep(12 * 3600)
        creds = client.credentials
        if creds is None or not needs_renewal(creds.cert_pem):
            continue
        try:
            client.credentials = await renew(creds, data_dir, name)
            client.use_certificate(client.credentials.cert_pem, client.credentials.key_pem)
        except JoinError:
            logging.getLogger(__name__).exception("renewing the node certificate failed; retrying in 12 h")


def _duration(text: str, flag: str) -> int:
    """``30s``, ``5m``, ``2h``, ``1h30m`` → whole seconds (at least 1); anything else is one line naming it."""
    import re

    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text.strip())
    if not text.strip() or parts is None:
        raise CliError(f"{flag} {text!r} is not a duration like 30s, 5m, 2h or 1h30m")
    h, m, s = (int(g or 0) for g in parts.groups())
    seconds = h * 3600 + m * 60 + s
    if seconds < 1:
        raise CliError(f"{flag} must be at least 1s, got {text!r}")
    return seconds


@click.command()
@click.argument("pod")
@click.option("--container", "-c", default=None, help="Container name (needed when the pod has several).")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new output.")
@click.option("--tail", type=int, default=None, help="Only the last N lines.")
@click.option("--previous", "-p", is_flag=True, help="The output of the container's run before this one "
                                                      "(why it crashed).")
@click.option("--since", default=None, metavar="DURATION",
              help="Only what was written in the last DURATION: 30s, 5m, 2h (the docker runtime; the process "
                   "runtime keeps no times and says so).")
@namespace_option
@server_option
@run
async def logs(pod, container, follow, tail, previous, since, namespace, server) -> None:
    """Print a container's output since it last started (through the server, from the agent of the
    pod's node); --previous for the run before."""
    import aiohttp

    from corral.client.rest import ConnectionFailed, _error

    ns = namespace or "default"
    since_seconds = _duration(since, "--since") if since is not None else None
    params = {k: v for k, v in (("container", container), ("follow", "true" if follow else None),
                                ("tailLines", str(tail) if tail is not None else None),
                                ("previous", "true" if previous else None),
                                ("sinceSeconds", str(since_seconds) if since_seconds is not None else None)) if v}
    async with make_client(server) as client:
        url = f"{client.base_url}/api/v1/namespaces/{ns}/pods/{pod}/log"
        try:
            async with client.session.get(url, params=params, timeout=aiohttp.ClientTimeout(total=None)) as resp:
                if resp.status >= 400:
                    raise _error(resp.status, await resp.read())
                async for chunk in resp.content.iter_any():
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.buffer.flush()
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
            raise ConnectionFailed(f"cannot reach the corral server at {client.base_url}: {exc}") from None


@click.command()
@click.argument("node")
@server_option
@run
async def drain(node, server) -> None:
    """Cordon a node and move its pods off: each goes back to Pending and is placed elsewhere."""
    async with make_client(server) as client:
        live = await client.get("nodes", node, raw=True)
        if not (live.get("spec") or {}).get("unschedulable"):
            await client.patch("nodes", node, {"spec": {"unschedulable": True}}, raw=True)
            click.echo(f"node/{node} cordoned")
        pods = (await client.list("pods", None, field_selector=f"spec.nodeName={node}", raw=True)).items
        for pod in pods:
            meta = pod["metadata"]
            # ?move=true: corral's eviction that keeps the pod and places it again (kubectl's deletes it).
            await client.request("POST", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/eviction",
                                 params={"move": "true"},
                                 body={"apiVersion": "policy/v1", "kind": "Eviction",
                                       "metadata": {"name": meta["name"], "namespace": meta["namespace"]}})
            click.echo(f"evicting pod {meta['namespace']}/{meta['name']}")
        click.echo(f"node/{node} drained")
