"""The SPDY/3.1 codec kubectl's port-forward is spoken with: frames split anywhere, header blocks in
one compression context per direction, and input a hostile client could send."""

from __future__ import annotations

import hashlib
import struct
import zlib

import pytest

from corral.streaming import spdy


class ClientWriter:
    """What kubectl's SPDY library sends: SYN_STREAMs (its own compression context), data, pings."""

    def __init__(self) -> None:
        self.deflate = zlib.compressobj(zdict=spdy.DICTIONARY)

    def syn_stream(self, stream_id: int, headers: dict[str, str], *, fin: bool = False) -> bytes:
        raw = struct.pack(">I", len(headers)) + b"".join(
            struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode() for k, v in headers.items())
        block = self.deflate.compress(raw) + self.deflate.flush(zlib.Z_SYNC_FLUSH)
        payload = struct.pack(">IIH", stream_id, 0, 0) + block
        return struct.pack(">HHI", 0x8003, 1, ((1 if fin else 0) << 24) | len(payload)) + payload


def test_the_dictionary_is_the_one_spdy3_defines():
    # SHA-256 of the 1,423 bytes of draft-mbelshe-httpbis-spdy-00 §2.6.10.1, as SPDY/3 peers use them.
    assert len(spdy.DICTIONARY) == 1423
    assert hashlib.sha256(spdy.DICTIONARY).hexdigest() == \
        "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02"


def test_a_port_forward_connection_is_read_whatever_way_the_bytes_are_split():
    client = ClientWriter()
    stream = (client.syn_stream(1, {"streamtype": "error", "port": "8080", "requestid": "0"}, fin=True)
              + client.syn_stream(3, {"streamtype": "data", "port": "8080", "requestid": "0"})
              + spdy.Writer.data(3, b"GET / HTTP/1.0\r\n\r\n") + spdy.Writer.data(3, b"", fin=True)
              + spdy.Writer().ping(7))
    expected = [spdy.SynStream(1, {"streamtype": "error", "port": "8080", "requestid": "0"}, True),
                spdy.SynStream(3, {"streamtype": "data", "port": "8080", "requestid": "0"}, False),
                spdy.Data(3, b"GET / HTTP/1.0\r\n\r\n", False), spdy.Data(3, b"", True), spdy.Ping(7)]
    for size in (1, 3, 7, len(stream)):
        reader = spdy.Reader()
        frames = [f for at in range(0, len(stream), size) for f in reader.feed(stream[at:at + size])]
        assert frames == expected, size


def test_a_reply_decompresses_with_the_dictionary_in_one_context_for_the_connection():
    writer = spdy.Writer()
    inflate = zlib.decompressobj(zdict=spdy.DICTIONARY)
    for stream_id in (1, 3, 5):  # the second and third blocks only decode in the same context
        frame = writer.syn_reply(stream_id)
        assert frame[:4] == struct.pack(">HH", 0x8003, 2)
        assert int.from_bytes(frame[8:12], "big") == stream_id
        assert inflate.decompress(frame[12:]) == b"\0\0\0\0"  # no headers, as Kubernetes replies


@pytest.mark.parametrize("stream, message", [
    (struct.pack(">HHI", 0x8003, 1, 2 << 20), "a SPDY frame of 2097152 bytes"),
    (struct.pack(">HHI", 0x8002, 6, 4) + b"\0\0\0\1", "SPDY version 2"),
    (struct.pack(">HHI", 0x8003, 1, 14) + struct.pack(">IIH", 1, 0, 0) + b"junk", "does not decompress"),
    (struct.pack(">HHI", 0x8003, 3, 2) + b"\0\0", "truncated"),
], ids=["a frame larger than any kubectl sends", "another SPDY version", "a header block that is not zlib",
        "a control frame cut short"])
def test_broken_framing_is_a_protocol_error_not_a_crash(stream, message):
    with pytest.raises(spdy.ProtocolError, match=message):
        spdy.Reader().feed(stream)


def test_a_header_block_that_inflates_past_its_bound_is_refused():
    deflate = zlib.compressobj(zdict=spdy.DICTIONARY)
    bomb = struct.pack(">I", 1) + struct.pack(">I", 4) + b"name" + struct.pack(">I", 1 << 20) + b"a" * (1 << 20)
    block = deflate.compress(bomb) + deflate.flush(zlib.Z_SYNC_FLUSH)
    assert len(block) < 4096  # a megabyte in a few kilobytes
    payload = struct.pack(">IIH", 1, 0, 0) + block
    with pytest.raises(spdy.ProtocolError, match="over 65536 bytes"):
        spdy.Reader().feed(struct.pack(">HHI", 0x8003, 1, len(payload)) + payload)
