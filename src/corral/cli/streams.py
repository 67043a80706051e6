"""``corral exec``, ``corral attach`` and ``corral port-forward``: kubectl's, through the same
server endpoints (the channel protocol over WebSocket, :mod:`corral.streaming.channels`).

When the server refuses the upgrade, the command asks again without one to read the server's
reason (a Kubernetes Status: forbidden, no such pod or container, pod not running) and prints it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from urllib.parse import quote

import click

from corral.cli.common import CliError, make_client, namespace_option, run, server_option

__all__ = ["exec_", "attach", "port_forward"]


def _pod_path(namespace: str, pod: str, sub: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(pod, safe='')}/{sub}"


async def _open(client, path: str, params: list[tuple[str, str]], protocol: str):
    """The WebSocket, or the server's reason for refusing it as an ApiError."""
    import aiohttp

    from corral.client.rest import ConnectionFailed

    try:
        return await client.session.ws_connect(client.base_url + path, params=params, protocols=(protocol,),
                                               heartbeat=30, max_msg_size=1 << 20, **client._tls_name)
    except aiohttp.WSServerHandshakeError:
        await client.request("GET", path, params=dict(params))  # raises the server's Status
        raise CliError(f"the server did not open a stream for {path}") from None
    except aiohttp.ClientError as exc:
        raise ConnectionFailed(f"cannot reach the corral server at {client.base_url}: {exc}") from None


async def _session(path: str, params: list[tuple[str, str]], *, server: str | None, stdin: bool, tty: bool) -> int:
    """Run one exec or attach session on this terminal; its exit code."""
    import aiohttp

    from corral.streaming import channels

    loop = asyncio.get_running_loop()
    raw_mode = None
    async with make_client(server) as client:
        ws = await _open(client, path, params, channels.V5)
        try:
            if tty and sys.stdin.isatty():
                import termios
                import tty as tty_mode

                raw_mode = termios.tcgetattr(sys.stdin.fileno())
                tty_mode.setraw(sys.stdin.fileno())

                def resized() -> None:
                    size = os.get_terminal_size(sys.stdin.fileno())
                    asyncio.ensure_future(ws.send_bytes(bytes([channels.RESIZE]) + json.dumps(
                        {"Width": size.columns, "Height": size.lines}).encode()))

                resized()
                loop.add_signal_handler(signal.SIGWINCH, resized)
            feeder = asyncio.ensure_future(_feed_stdin(ws)) if stdin else None
            code = 0
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.BINARY or not msg.data:
                    continue
                channel, data = msg.data[0], msg.data[1:]
                if channel in (channels.STDOUT, channels.STDERR):
                    out = sys.stdout.buffer if channel == channels.STDOUT else sys.stderr.buffer
                    out.write(data)
                    out.flush()
                elif channel == channels.ERROR:
                    code = _exit_code(data)
            if feeder is not None:
                feeder.cancel()
            return code
        finally:
            if raw_mode is not None:
                import termios

                loop.remove_signal_handler(signal.SIGWINCH)
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, raw_mode)
            await ws.close()


def _exit_code(data: bytes) -> int:
    status = json.loads(data)
    if status.get("status") == "Success":
        return 0
    if status.get("reason") == "NonZeroExitCode":
        for cause in (status.get("details") or {}).get("causes") or ():
            if cause.get("reason") == "ExitCode":
                return int(cause.get("message", 1))
    raise CliError(status.get("message") or "the command failed")


async def _feed_stdin(ws) -> None:
    """This process's stdin to the stream's, then the close signal (v5) at its end."""
    from corral.streaming import channels

    loop = asyncio.get_running_loop()
    while chunk := await loop.run_in_executor(None, os.read, sys.stdin.fileno(), 32 * 1024):
        await ws.send_bytes(bytes([channels.STDIN]) + chunk)
    await ws.send_bytes(bytes([channels.CLOSE, channels.STDIN]))


@click.command(name="exec", context_settings={"ignore_unknown_options": True})
@click.argument("pod")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--container", "-c", default=None, help="Container name (default: the pod's first).")
@click.option("--stdin", "-i", is_flag=True, help="Pass this terminal's stdin to the command.")
@click.option("--tty", "-t", is_flag=True, help="Give the command a terminal (with -i: an interactive shell).")
@namespace_option
@server_option
@run
async def exec_(pod, command, container, stdin, tty, namespace, server) -> None:
    """Run COMMAND in a container of POD (through the server and the pod's agent) and exit with its
    exit code: corral exec web -- sh -c 'echo $HOSTNAME'."""
    params = [("command", c) for c in command] + [("stdout", "true"), ("stderr", "true")]
    params += [(k, "true") for k, on in (("stdin", stdin), ("tty", tty)) if on]
    if container:
        params.append(("container", container))
    code = await _session(_pod_path(namespace or "default", pod, "exec"), params, server=server, stdin=stdin, tty=tty)
    raise click.exceptions.Exit(code)


@click.command()
@click.argument("pod")
@click.option("--container", "-c", default=None, help="Container name (default: the pod's first).")
@click.option("--stdin", "-i", is_flag=True, help="Pass this terminal's stdin to the container (its spec must "
                                                   "say stdin: true).")
@namespace_option
@server_option
@run
async def attach(pod, container, stdin, namespace, server) -> None:
    """Show a running container's output from now on (and feed its stdin with -i); Ctrl-C detaches and
    leaves it running."""
    params = [("stdout", "true"), ("stderr", "true")] + ([("stdin", "true")] if stdin else [])
    if container:
        params.append(("container", container))
    await _session(_pod_path(namespace or "default", pod, "attach"), params, server=server, stdin=stdin, tty=False)


def _port_pair(text: str) -> tuple[int, int]:
    local, _, remote = text.partition(":")
    try:
        ports = int(local or remote), int(remote or local)
    except ValueError:
        raise CliError(f"port {text!r}: expected PORT or LOCAL:REMOTE, e.g. 8080:80") from None
    if not all(0 <= p < 65536 for p in ports) or ports[1] == 0:
        raise CliError(f"port {text!r}: ports are integers in 1..65535 (LOCAL may be 0: any free port)")
    return ports


@click.command(name="port-forward")
@click.argument("pod")
@click.argument("ports", nargs=-1, required=True)
@click.option("--address", default="127.0.0.1", show_default=True, help="Local address to listen on.")
@namespace_option
@server_option
@run
async def port_forward(pod, ports, address, namespace, server) -> None:
    """Forward local ports to POD's: corral port-forward web 8080:80 (LOCAL:REMOTE, or PORT for the
    same number). Each local connection is a connection to the pod's port, until Ctrl-C."""
    pairs = [_port_pair(p) for p in ports]
    path = _pod_path(namespace or "default", pod, "portforward")
    async with make_client(server) as client:
        await client.get("pods", pod, namespace or "default", raw=True)  # no such pod: say so before listening

        def handler(remote: int):
            async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                click.echo(f"Handling connection for {remote}")
                await _forward_one(client, path, remote, reader, writer)
            return forward

        servers = []
        for local, remote in pairs:
            try:
                listener = await asyncio.start_server(handler(remote), address, local)
            except OSError as exc:
                raise CliError(f"cannot listen on {address}:{local}: {exc.strerror or exc}") from None
            servers.append(listener)
            bound = listener.sockets[0].getsockname()[1]
            click.echo(f"Forwarding from {address}:{bound} -> {remote}")
        await asyncio.gather(*(s.serve_forever() for s in servers))


async def _forward_one(client, path: str, remote: int, reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> None:
    """One local connection, over the channel protocol: the port's bytes on channel 0, its errors on 1
    (each channel's first message is the port number)."""
    import aiohttp

    from corral.client.rest import ApiError
    from corral.streaming import channels

    try:
        ws = await _open(client, path, [("ports", str(remote))], channels.V4)
    except (ApiError, CliError) as exc:
        click.echo(f"error: {getattr(exc, 'message', exc)}", err=True)
        writer.close()
        return
    seen: set[int] = set()

    async def up() -> None:
        while chunk := await reader.read(32 * 1024):
            await ws.send_bytes(b"\0" + chunk)

    sending = asyncio.ensure_future(up())
    try:
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.BINARY or not msg.data:
                continue
            channel, data = msg.data[0], msg.data[1:]
            if channel not in seen:  # the port number, first on each channel
                seen.add(channel)
                continue
            if channel == 0:
                writer.write(data)
                await writer.drain()
            elif channel == 1 and data:
                click.echo(f"error: forwarding to port {remote}: {data.decode(errors='replace')}", err=True)
    except ConnectionResetError:
        pass
    finally:
        sending.cancel()
        writer.close()
        await ws.close()
