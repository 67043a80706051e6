"""What every command shares: one-line errors, the async bridge, the client, resource names."""

from __future__ import annotations

import asyncio
import functools
import sys
from typing import Any, Awaitable, Callable

import click

import corral

__all__ = ["CliError", "run", "format_api_error", "make_client", "resolve_kind", "server_option",
           "namespace_option"]

SERVER_HELP = ("API server URL, or several separated by commas (the client fails over between them); default: "
               "$CORRAL_SERVER, then the config file, then http://127.0.0.1:7443")


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
            raise CliError(f"{exc} (is `corral server` running? set --server or CORRAL_SERVER)") from None
        except ApiError as exc:
            raise CliError(format_api_error(exc)) from None
        except ValueError as exc:
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


def make_client(server: str | None):
    from corral.client.config import server_url
    from corral.client.rest import Client

    return Client(server_url(server), user_agent=f"corral-cli/{corral.__version__}")


def resolve_kind(kind: str):
    from corral.api.resources import UnknownResource, lookup

    try:
        return lookup(kind)
    except UnknownResource as exc:
        raise CliError(str(exc)) from None


server_option = click.option("--server", "-s", envvar=None, default=None, help=SERVER_HELP)
namespace_option = click.option("--namespace", "-n", default=None, help="Namespace (default: default).")
