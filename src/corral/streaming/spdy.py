"""SPDY/3.1 framing, as much of it as ``kubectl port-forward`` uses (no I/O).

kubectl ≥ 1.31 port-forwards by tunnelling SPDY/3.1 through a WebSocket (subprotocol
``SPDY/3.1+portforward.k8s.io``): per forwarded connection it opens two streams with SYN_STREAM,
headers ``streamtype`` (``error`` | ``data``), ``port`` and ``requestid``, and waits for a SYN_REPLY
to each; bytes then flow in DATA frames, each side ending its half with the FIN flag; it pings every
10 s. Its SPDY library does no flow control (WINDOW_UPDATE and SETTINGS are read and ignored, by it
and here).

Frames (draft-mbelshe-httpbis-spdy-00): a control frame is ``1 | version(15) | type(16) | flags(8) |
length(24)`` then its payload; a data frame ``0 | stream id(31) | flags(8) | length(24)`` then data.
Header blocks are zlib-compressed with the protocol's dictionary, one compression context per
direction for the whole connection: :class:`Reader` and :class:`Writer` each hold one, so a
connection needs exactly one of each.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Union

__all__ = ["DICTIONARY", "Reader", "Writer", "SynStream", "Data", "RstStream", "Ping", "GoAway", "Ignored",
           "ProtocolError", "FLAG_FIN", "MAX_FRAME_BYTES", "MAX_HEADER_BYTES"]

VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
RST_PROTOCOL_ERROR, RST_INVALID_STREAM, RST_REFUSED_STREAM, RST_CANCEL = 1, 2, 3, 5
MAX_FRAME_BYTES = 1 << 20  # a frame's payload; kubectl's are at most 32 KiB
MAX_HEADER_BYTES = 64 << 10  # a header block, decompressed

# The header compression dictionary of SPDY/3 (section 2.6.10.1): these words, each preceded by its
# length as four big-endian bytes, then the text that follows, as one run.
_WORDS = (
    "options head post put delete trace accept accept-charset accept-encoding accept-language accept-ranges "
    "age allow authorization cache-control connection content-base content-encoding content-language "
    "content-length content-location content-md5 content-range content-type date etag expect expires from "
    "host if-match if-modified-since if-none-match if-range if-unmodified-since last-modified location "
    "max-forwards pragma proxy-authenticate proxy-authorization range referer retry-after server te trailer "
    "transfer-encoding upgrade user-agent vary via warning www-authenticate method get status|200 OK|version "
    "HTTP/1.1 url public set-cookie keep-alive origin"
)
_TAIL = (
    "100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
    "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request401 Unauthorized"
    "403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented503 Service Unavailable"
    "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT"
    "chunked,text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,text/plain,"
    "text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0."
)


def _dictionary() -> bytes:
    words = [w for part in _WORDS.split("|") for w in ([part] if " " in part and part[0].isdigit() else part.split())]
    return b"".join(struct.pack(">I", len(w)) + w.encode() for w in words) + _TAIL.encode()


DICTIONARY = _dictionary()


class ProtocolError(Exception):
    """The peer broke the framing: the connection cannot go on."""


@dataclass(frozen=True, slots=True)
class SynStream:
    stream_id: int
    headers: dict[str, str]
    fin: bool


@dataclass(frozen=True, slots=True)
class Data:
    stream_id: int
    data: bytes
    fin: bool


@dataclass(frozen=True, slots=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True, slots=True)
class Ping:
    id: int


@dataclass(frozen=True, slots=True)
class GoAway:
    last_stream_id: int
    status: int


@dataclass(frozen=True, slots=True)
class Ignored:
    """SETTINGS, WINDOW_UPDATE, HEADERS, SYN_REPLY from a client: nothing to act on here."""

    type: int


Frame = Union[SynStream, Data, RstStream, Ping, GoAway, Ignored]


class Reader:
    """Frames out of a byte stream fed in pieces (a WebSocket's messages need not align with frames)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if length > MAX_FRAME_BYTES:
                raise ProtocolError(f"a SPDY frame of {length} bytes (at most {MAX_FRAME_BYTES})")
            if len(self._buffer) < 8 + length:
                break
            head, payload = bytes(self._buffer[:8]), bytes(self._buffer[8:8 + length])
            del self._buffer[:8 + length]
            frames.append(self._frame(head, payload))
        return frames

    def _frame(self, head: bytes, payload: bytes) -> Frame:
        flags = head[4]
        if not head[0] & 0x80:
            return Data(int.from_bytes(head[:4], "big") & 0x7FFFFFFF, payload, bool(flags & FLAG_FIN))
        version = int.from_bytes(head[:2], "big") & 0x7FFF
        if version != VERSION:
            raise ProtocolError(f"SPDY version {version} (only 3 is spoken)")
        kind = int.from_bytes(head[2:4], "big")
        try:
            if kind == SYN_STREAM:
                stream_id = int.from_bytes(payload[:4], "big") & 0x7FFFFFFF
                return SynStream(stream_id, self._headers(payload[10:]), bool(flags & FLAG_FIN))
            if kind == RST_STREAM:
                stream_id, status = struct.unpack(">II", payload[:8])
                return RstStream(stream_id & 0x7FFFFFFF, status)
            if kind == PING:
                return Ping(struct.unpack(">I", payload[:4])[0])
            if kind == GOAWAY:
                last, status = struct.unpack(">II", payload[:8])
                return GoAway(last & 0x7FFFFFFF, status)
            if kind == HEADERS and payload[4:]:
                self._headers(payload[4:])  # keeps the compression context in step; nothing to act on
        except struct.error:
            raise ProtocolError(f"a truncated SPDY control frame of type {kind}") from None
        return Ignored(kind)

    def _headers(self, block: bytes) -> dict[str, str]:
        try:
            raw = self._inflate.decompress(block, MAX_HEADER_BYTES)
        except zlib.error as exc:
            raise ProtocolError(f"a SPDY header block that does not decompress: {exc}") from None
        if self._inflate.unconsumed_tail:
            raise ProtocolError(f"a SPDY header block over {MAX_HEADER_BYTES} bytes")
        try:
            (count,), at = struct.unpack_from(">I", raw), 4
            headers = {}
            for _ in range(count):
                (n,) = struct.unpack_from(">I", raw, at)
                name = raw[at + 4:at + 4 + n].decode("latin-1")
                at += 4 + n
                (n,) = struct.unpack_from(">I", raw, at)
                headers[name.lower()] = raw[at + 4:at + 4 + n].decode("latin-1").split("\0")[0]
                at += 4 + n
        except struct.error:
            raise ProtocolError("a truncated SPDY header block") from None
        return headers


class Writer:
    """Frames as bytes, with the connection's one outgoing compression context."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(zdict=DICTIONARY)

    @staticmethod
    def _control(kind: int, flags: int, payload: bytes) -> bytes:
        return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload

    def syn_reply(self, stream_id: int, headers: dict[str, str] | None = None) -> bytes:
        pairs = sorted((headers or {}).items())
        raw = struct.pack(">I", len(pairs)) + b"".join(
            struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode() for k, v in pairs)
        block = self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)
        return self._control(SYN_REPLY, 0, struct.pack(">I", stream_id) + block)

    @staticmethod
    def data(stream_id: int, data: bytes, *, fin: bool = False) -> bytes:
        return struct.pack(">II", stream_id & 0x7FFFFFFF, ((FLAG_FIN if fin else 0) << 24) | len(data)) + data

    def rst_stream(self, stream_id: int, status: int = RST_CANCEL) -> bytes:
        return self._control(RST_STREAM, 0, struct.pack(">II", stream_id, status))

    def ping(self, ping_id: int) -> bytes:
        return self._control(PING, 0, struct.pack(">I", ping_id))

    def goaway(self, last_stream_id: int, status: int = 0) -> bytes:
        return self._control(GOAWAY, 0, struct.pack(">II", last_stream_id, status))
