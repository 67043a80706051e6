"""What every command shares: one-line errors, the async bridge, the client, resource names."""

from __future__ import annotations

import asyncio
import functools
import sys
from typing import Any, Awaitable, Callable

import click

import corral

__all__ = ["CliError", "run", "format_api_error", "make_client", "resolve_kind", "server_option",
           "namespace_option", "kubeconfig_option", "kubeconfig_flag", "server_flag", "global_server_option"]

SERVER_HELP = ("API server URL, or several separated by commas (the client fails over between them); default: "
               "$CORRAL_SERVER, then the kubeconfig's server")
KUBECONFIG_HELP = ("kubeconfig file with the server and credentials (default: $KUBECONFIG, then "
                   "~/.config/corral/kubeconfig, which `corral server` writes)")


class CliError(click.ClickException):
    """One line for the user, exit status 1."""

    def show(self, file=None) -> None:  # noqa: D401 - click's API
        click.echo(f"error: {self.message}", err=True)


def run(coro_fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """Run an async command body, turning client errors into one-line messages."""

    @functools.wraps(coro_fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from corral.cli.manifests import ManifestError
        from corral.client.rest import ApiError, ConnectionFailed

        try:
            return _run_fast(coro_fn(*args, **kwargs))
        except ManifestError as exc:
            raise CliError(str(exc)) from None
        except ConnectionFailed as exc:
            if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                raise CliError(f"the server's certificate is not signed by a CA this client trusts: "
                               f"{_credentials_hint()}") from None
            raise CliError(f"{exc} (is `corral server` running? set --server or CORRAL_SERVER)") from None
        except ApiError as exc:
            if exc.code == 401:
                raise CliError(f"{format_api_error(exc)}: {_credentials_hint()}") from None
            raise CliError(format_api_error(exc)) from None
        except ValueError as exc:  # KubeconfigError among them: the file and the field
            raise CliError(str(exc)) from None
        except KeyboardInterrupt:
            sys.exit(130)

    return wrapper


def _run_fast(coro: Awaitable[Any]) -> Any:
    """``asyncio.run`` on uvloop where it is installed (its event loop costs a fraction of asyncio's)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        return asyncio.run(coro)  # type: ignore[arg-type]
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)  # type: ignore[arg-type]


def format_api_error(exc: Any, where: str = "") -> str:
    causes = exc.causes
    prefix = f"{where}: " if where else ""
    if causes:
        listed = "; ".join(f"{c.get('field', '')}: {c.get('message', '')}" for c in causes)
        return f"{prefix}{listed}"
    return f"{prefix}{exc.message}"


def kubeconfig_flag() -> str | None:
    ctx = click.get_current_context(silent=True)
    return ctx.find_root().meta.get("corral.kubeconfig") if ctx is not None else None


def _credentials_hint() -> str:
    """What the user should check when the server and the client do not trust each other."""
    from corral.pki.kubeconfig import candidate_files, default_kubeconfig_path

    files = candidate_files(kubeconfig_flag())
    if not files:
        return (f"no kubeconfig found (looked for $KUBECONFIG, then {default_kubeconfig_path()}); "
                f"use --kubeconfig or $KUBECONFIG with the server's <data-dir>/admin.kubeconfig")
    return f"is {', '.join(files)} the kubeconfig of this server, with a valid credential?"


def server_flag() -> str | None:
    """``corral --server URL COMMAND``: the server given before the command."""
    ctx = click.get_current_context(silent=True)
    return ctx.find_root().meta.get("corral.server") if ctx is not None else None


def make_client(server: str | None, *, user_agent: str = ""):
    """A client for the command's server and credentials (see :mod:`corral.client.config`): the
    command's own ``--server``, else one given before the command, else $CORRAL_SERVER or the
    kubeconfig's."""
    from corral.client.config import client_credentials
    from corral.client.rest import Client

    creds = client_credentials(server or server_flag(), kubeconfig_flag())
    return Client(credentials=creds, user_agent=user_agent or f"corral-cli/{corral.__version__}")


def resolve_kind(kind: str):
    from corral.api.resources import UnknownResource, lookup

    try:
        return lookup(kind)
    except UnknownResource as exc:
        raise CliError(str(exc)) from None


def _remember_kubeconfig(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.find_root().meta["corral.kubeconfig"] = value


def _remember_server(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.find_root().meta["corral.server"] = value


_server = click.option("--server", "-s", envvar=None, default=None, help=SERVER_HELP)
# Before the command (corral --kubeconfig FILE get pods), as kubectl takes them.
global_server_option = click.option("--server", "-s", default=None, metavar="URL", expose_value=False,
                                    is_eager=True, callback=_remember_server, help=SERVER_HELP)
kubeconfig_option = click.option("--kubeconfig", default=None, metavar="FILE", expose_value=False, is_eager=True,
                           callback=_remember_kubeconfig, help=KUBECONFIG_HELP)


def server_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--server`` (passed to the command) and ``--kubeconfig`` (read by :func:`make_client`)."""
    return _server(kubeconfig_option(fn))
namespace_option = click.option("--namespace", "-n", default=None, help="Namespace (default: default).")
