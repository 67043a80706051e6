"""``corral token create|list|revoke``: bearer tokens for users and join tokens for nodes.

The secret is made here and shown once; the server stores only its hash (a Token object named by
the token's id), so every server sharing the store accepts it and nobody can read it back.
"""

from __future__ import annotations

import datetime as dt
import re

import click

from corral.cli.common import CliError, make_client, run, server_option

__all__ = ["token"]

_DURATION = re.compile(r"^(\d+)(s|m|h|d)$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_ttl(text: str) -> dt.timedelta | None:
    """``30m``, ``24h``, ``7d``; ``0`` for a token that never expires."""
    if text.strip() == "0":
        return None
    m = _DURATION.match(text.strip())
    if not m or int(m[1]) == 0:
        raise CliError(f"--ttl must be a duration like 30m, 24h or 7d (or 0: never expires), got {text!r}")
    return dt.timedelta(seconds=int(m[1]) * _UNITS[m[2]])


@click.group()
def token() -> None:
    """Create, list and revoke bearer tokens (users) and join tokens (nodes)."""


@token.command()
@click.option("--user", default=None, metavar="NAME", help="Who the token authenticates as (not with --join).")
@click.option("--group", "groups", multiple=True, metavar="GROUP", help="A group of the user (repeatable).")
@click.option("--ttl", default=None, metavar="DURATION",
              help="Lifetime, e.g. 24h or 7d; 0: never expires. Default: 0 for users, 24h for join tokens.")
@click.option("--join", "join", is_flag=True, help="A join token: prints the command that joins a node.")
@click.option("--description", default="", help="A note kept with the token (shown by `corral token list`).")
@server_option
@run
async def create(user: str | None, groups: tuple[str, ...], ttl: str | None, join: bool, description: str,
                 server: str | None) -> None:
    """Create a token and print a kubeconfig for it (or, with --join, the command that joins a node).

    The secret is shown only this once."""
    from corral.pki.ca import ca_pin
    from corral.pki.kubeconfig import build_kubeconfig
    from corral.pki.tokens import AUTHENTICATION, JOIN, new_token, token_object

    if join and (user or groups):
        raise CliError("--join makes a token for joining nodes: it takes no --user or --group")
    if not join and not user:
        raise CliError("give --user NAME (or --join for a node join token)")
    lifetime = parse_ttl(ttl if ttl is not None else ("24h" if join else "0"))
    parts = new_token()
    obj = token_object(parts, user=user or "system:bootstrap", groups=groups, purpose=JOIN if join else AUTHENTICATION,
                       ttl=lifetime, description=description)
    async with make_client(server) as client:
        await client.create(obj, raw=True)
        ca_pem = await client.cluster_ca()
        url = client.base_url
    if join:
        click.echo(f"corral agent --server {url} --token {parts} --ca-cert-hash {ca_pin(ca_pem)}")
    else:
        click.echo(build_kubeconfig(url, ca_pem, user=user or "", token=str(parts)), nl=False)


@token.command(name="list")
@server_option
@run
async def list_(server: str | None) -> None:
    """The tokens the cluster accepts (ids and owners; never the secrets)."""
    async with make_client(server) as client:
        items = (await client.list("tokens", raw=True)).items
    rows = [("ID", "USER", "GROUPS", "PURPOSE", "EXPIRES", "DESCRIPTION")]
    for t in sorted(items, key=lambda t: t["metadata"].get("creationTimestamp", "")):
        spec = t.get("spec") or {}
        rows.append((t["metadata"]["name"], spec.get("user", ""), ",".join(spec.get("groups") or ()) or "<none>",
                     spec.get("purpose", ""), spec.get("expirationTimestamp") or "never", spec.get("description", "")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        click.echo("   ".join(c.ljust(w) for c, w in zip(r, widths)) + "   " + r[-1])


@token.command()
@click.argument("tokens", nargs=-1, required=True, metavar="ID|TOKEN...")
@server_option
@run
async def revoke(tokens: tuple[str, ...], server: str | None) -> None:
    """Revoke tokens by id (or whole token): every server refuses them from now on."""
    from corral.client.rest import NotFound

    async with make_client(server) as client:
        for text in tokens:
            token_id = text.split(".", 1)[0]
            try:
                await client.delete("tokens", token_id, raw=True)
            except NotFound:
                raise CliError(f'token "{token_id}" not found') from None
            click.echo(f"token/{token_id} revoked")
