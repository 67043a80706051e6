"""What a request costs the client: corral's ``Client``, bare aiohttp, and bare asyncio streams.

    .venv/bin/python bench/client_bench.py [--requests 3000] [--concurrency 64] [--rounds 2]

Starts `corral server --no-scheduler` on a fresh data directory and, from this process, creates
``--requests`` ConfigMaps ``--concurrency`` at once over TLS with the admin credential, three ways
in turn each round: corral's ``Client.create`` (encoding, its HTTP/1.1, decoding the answer), a
bare aiohttp session posting prebuilt bytes, and bare asyncio streams writing each request as bytes
on a kept-alive connection (the floor of any Python client). It prints creates/s, this process's
CPU per request (``time.process_time``) and the server's (from ``/proc``); the server shares the
machine's cores, so the client's CPU also moves the creates/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time

import aiohttp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from corral.client.config import client_credentials  # noqa: E402
from corral.client.rest import Client  # noqa: E402
from corral.testing import ServerProcess  # noqa: E402

PATH = "/api/v1/namespaces/default/configmaps"


def configmap(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v" * 100}}


def server_cpu(pid: int) -> float:
    """CPU seconds the server process has used so far (user and system, from ``/proc``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(label: str, one, args) -> None:
    requests, concurrency = args.requests, args.concurrency
    slots = asyncio.Semaphore(concurrency)

    async def bounded(i: int) -> None:
        async with slots:
            await one(i)

    await asyncio.gather(*(bounded(-1 - i) for i in range(min(50, requests))))  # connections open, caches warm
    wall, cpu, served = time.perf_counter(), time.process_time(), server_cpu(args.server_pid)
    await asyncio.gather(*(bounded(i) for i in range(requests)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    served = server_cpu(args.server_pid) - served
    print(f"{label:14s} {requests / wall:7.0f} creates/s   client CPU {1e6 * cpu / requests:5.0f} µs a request   "
          f"server CPU {1e6 * served / requests:5.0f}", flush=True)


async def corral_client(creds, prefix: str, args) -> None:
    async with Client(credentials=creds, connections=args.concurrency) as client:
        await measure("corral Client", lambda i: client.create(configmap(f"{prefix}{i}"), "default"), args)


async def bare_aiohttp(creds, prefix: str, args) -> None:
    connector = aiohttp.TCPConnector(ssl=creds.ssl_context(), limit=args.concurrency)
    async with aiohttp.ClientSession(creds.server, connector=connector, headers=creds.headers()) as session:
        async def one(i: int) -> None:
            async with session.post(PATH, data=json.dumps(configmap(f"{prefix}{i}")).encode(),
                                    headers={"Content-Type": "application/json"}) as resp:
                await resp.read()
                resp.raise_for_status()
        await measure("bare aiohttp", one, args)


async def bare_streams(creds, prefix: str, args) -> None:
    host, port = creds.server.split("//", 1)[1].rsplit(":", 1)
    fixed = "".join(f"{k}: {v}\r\n" for k, v in creds.headers().items())
    idle = asyncio.Queue()
    for _ in range(args.concurrency):
        idle.put_nowait(await asyncio.open_connection(host, int(port), ssl=creds.ssl_context(),
                                                      server_hostname=creds.server_name or host))

    async def one(i: int) -> None:
        body = json.dumps(configmap(f"{prefix}{i}")).encode()
        reader, writer = await idle.get()
        writer.write(f"POST {PATH} HTTP/1.1\r\nHost: {host}\r\n{fixed}Content-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 201"):
            raise RuntimeError(f"create refused: {head.splitlines()[0]!r}")
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        await reader.readexactly(length)
        idle.put_nowait((reader, writer))

    await measure("bare streams", one, args)
    while not idle.empty():
        idle.get_nowait()[1].close()


async def run(creds, args) -> None:
    for n in range(args.rounds):
        print(f"round {n + 1}", flush=True)
        await corral_client(creds, f"c{n}-", args)
        await bare_aiohttp(creds, f"a{n}-", args)
        await bare_streams(creds, f"s{n}-", args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="creates measured per client and round")
    parser.add_argument("--concurrency", type=int, default=64, help="creates in flight at once")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    import uvloop

    with tempfile.TemporaryDirectory(prefix="corral-client-bench-") as data:
        server = ServerProcess(data, "--no-scheduler")
        url = server.start()
        args.server_pid = server.proc.pid
        try:
            uvloop.run(run(client_credentials(url, server.kubeconfig), args))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
