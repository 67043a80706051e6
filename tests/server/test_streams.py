"""The server's end of kubectl port-forward, against a fake WebSocket: SPDY pings answered, a reply
to every stream, and a client that opens streams without end refused past the bound."""

from __future__ import annotations

import asyncio
import struct

from aiohttp import WSMsgType

from corral.server.agents.streams import MAX_TUNNELS, _Forwarder
from corral.streaming import spdy
from tests.streaming.test_spdy import ClientWriter


class FakeSocket:
    def __init__(self, incoming: list[bytes]) -> None:
        self.incoming = incoming
        self.sent = bytearray()
        self.closed = False

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not self.incoming:
            await asyncio.sleep(0.05)  # let the tunnels' tasks run before the client "leaves"
            raise StopAsyncIteration
        return type("Msg", (), {"type": WSMsgType.BINARY, "data": self.incoming.pop(0)})()

    async def send_bytes(self, data: bytes) -> None:
        self.sent += data

    async def close(self) -> None:
        self.closed = True


def frames_sent(sock: FakeSocket) -> list[tuple[int, bytes]]:
    """(control frame type or -1 for data, payload) of what the server wrote."""
    out, data = [], bytes(sock.sent)
    while data:
        length = int.from_bytes(data[5:8], "big")
        kind = int.from_bytes(data[2:4], "big") if data[0] & 0x80 else -1
        out.append((kind, data[8:8 + length]))
        data = data[8 + length:]
    return out


async def test_pings_are_answered_and_a_flood_of_streams_stops_at_the_bound():
    client = ClientWriter()
    stream = spdy.Writer().ping(42)
    for i in range(MAX_TUNNELS + 20):
        stream += client.syn_stream(2 * i + 1, {"streamtype": "data", "port": "80", "requestid": str(i)})
    hanging = asyncio.Event()

    async def connect(port: int):  # an agent that never answers: every tunnel stays open
        await hanging.wait()

    sock = FakeSocket([stream])
    await asyncio.wait_for(_Forwarder(sock, connect).run(), 5)
    sent = frames_sent(sock)
    assert sent[0] == (6, struct.pack(">I", 42))  # the ping, echoed
    replies = [f for f in sent if f[0] == 2]
    refused = [f for f in sent if f[0] == 3]
    assert len(replies) == MAX_TUNNELS and len(refused) == 20
    assert all(struct.unpack(">II", payload)[1] == spdy.RST_REFUSED_STREAM for _, payload in refused)
    assert sock.closed
