"""``corral sim``: many hollow nodes in one process."""

from __future__ import annotations

import click

from corral.cli.common import CliError, kubeconfig_option, make_client, run
from corral.sim.taint import HOLLOW_TAINT

__all__ = ["sim"]


@click.command()
@click.option("--nodes", "count", type=int, default=100, show_default=True, help="How many hollow nodes.")
@click.option("--server", "-s", default=None,
              help="A running server to join, or several separated by commas (default: start one in this "
                   "process, on --address).")
@kubeconfig_option
@click.option("--address", default=None, metavar="HOST:PORT",
              help="Where the in-process server listens when no --server is given [default: 127.0.0.1:7443, or "
                   "a free port if that one is taken].")
@click.option("--prefix", default="hollow", show_default=True, help="Node names are PREFIX-0, PREFIX-1, ...")
@click.option("--capacity", default="cpu=4,memory=32Gi,pods=110", show_default=True, metavar="R=Q,...",
              help="Each node's capacity (and allocatable).")
@click.option("--zones", default="", metavar="A,B,... | N",
              help="Spread nodes over these zones (topology.kubernetes.io/zone), or over N zones zone-1..N.")
@click.option("--labels", default=None, metavar="K=V,...", help="Extra labels on every node.")
@click.option("--taints", default=None, metavar="K[=V]:EFFECT,...", help="Taints on every node.")
@click.option("--taint/--no-taint", "hollow_taint", default=True, show_default=True,
              help=f"Taint every node {HOLLOW_TAINT['key']}:{HOLLOW_TAINT['effect']}, so that only pods that "
                   "tolerate it (corral bench's do) are placed on nodes that run nothing: joined to a real "
                   "cluster, untainted hollow nodes would take real pods.")
@click.option("--run-delay", default=1.0, show_default=True, help="Seconds from binding to Running.")
@click.option("--join-token", default="", metavar="TOKEN",
              help="The join token the nodes join with (default: one made with this command's credential, "
                   "valid for an hour and revoked once every node has joined).")
@click.option("--node-identities/--shared-identity", default=True, show_default=True,
              help="Each node joins and writes its Node, Lease and pod statuses as system:node:NAME, as an "
                   "agent does; --shared-identity writes everything with this command's credential instead "
                   "(one connection for all nodes, for control-plane runs at many thousands of nodes).")
@click.option("--log-level", default="warning", show_default=True, type=click.Choice(["debug", "info", "warning", "error"]))
@run
async def sim(count, server, address, prefix, capacity, zones, labels, taints, hollow_taint, run_delay, join_token,
              node_identities, log_level) -> None:
    """Run COUNT hollow nodes: they register, renew their leases and run the pods bound to them (without
    running anything), through the agent's own state machine.

    Each node joins with a join token and acts under its own node credential, as an agent does; the
    pods are followed with one watch made with this command's credential (the kubeconfig's, or the
    in-process server's admin), which must be allowed to watch all pods."""
    import logging
    import tempfile

    from corral.agent.credentials import JoinError, join_token_problem
    from corral.agent.node_info import FlagError, parse_pairs, parse_taints
    from corral.aio import wait_for_termination
    from corral.sim.hollow import HollowConfig, HollowNodes

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if count < 1:
        raise CliError("--nodes must be at least 1")
    if join_token and (problem := join_token_problem(join_token, "--join-token")):
        raise CliError(problem)
    zone_list = [f"zone-{i + 1}" for i in range(int(zones))] if zones.isdigit() else [z for z in zones.split(",") if z]
    try:
        taint_list = parse_taints(taints) + ([dict(HOLLOW_TAINT)] if hollow_taint else [])
        config = HollowConfig(count=count, prefix=prefix, capacity=parse_pairs(capacity, "--capacity"),
                              zones=zone_list, labels=parse_pairs(labels, "--labels"), taints=taint_list,
                              run_delay=run_delay, node_identities=node_identities, join_token=join_token)
    except FlagError as exc:
        raise CliError(str(exc)) from None
    embedded = None
    if server is None:
        from corral.server.app import Server, ServerConfig, tune_gc_for_server

        data = tempfile.TemporaryDirectory(prefix="corral-sim-")
        # The default port taken (a corral server already runs here): any free one, said below.
        for listen in ((address,) if address else ("127.0.0.1:7443", "127.0.0.1:0")):
            embedded = Server(ServerConfig(data_dir=data.name, address=listen, user_kubeconfig=False))
            try:
                await embedded.start()
                break
            except OSError as exc:
                await embedded.stop()
                if address or listen.endswith(":0"):
                    data.cleanup()
                    raise CliError(f"cannot serve on {listen}: {exc.strerror or exc}; choose another --address "
                                   "(HOST:0 for any free port)") from None
        collector = tune_gc_for_server(embedded.metrics.registry)  # noqa: F841 (runs until sim stops)
        click.echo(f"corral server (in-process) listening on {embedded.url}; admin kubeconfig: "
                   f"{embedded.pki.admin_kubeconfig} (removed when sim stops)")
    try:
        async with (embedded.client(user_agent="corral-sim") if embedded else make_client(server)) as client:
            nodes = HollowNodes(client, config)
            try:
                await nodes.start()
                who = "each as system:node:NAME" if node_identities else "with one shared credential"
                click.echo(f"{count} hollow nodes ({prefix}-0 … {prefix}-{count - 1}) registered with "
                           f"{client.base_url}, {who}")
                if hollow_taint:
                    click.echo(f"they are tainted {HOLLOW_TAINT['key']}:{HOLLOW_TAINT['effect']}: pods need "
                               f"tolerations: [{{key: {HOLLOW_TAINT['key']}, operator: Exists}}] to land on them "
                               "(or run sim with --no-taint)")
                await wait_for_termination()
            except JoinError as exc:
                raise CliError(f"the hollow nodes could not join: {exc}") from None
            finally:
                await nodes.stop()
    finally:
        if embedded is not None:
            await embedded.stop()
            data.cleanup()
