"""HTTP/1.1 for the client's requests that are answered whole: every call but a watch or a stream.

aiohttp's client spent ~190 µs of CPU on each small request here (a ConfigMap create, 64 at once,
over TLS on loopback); a request written as bytes on a kept-alive asyncio stream and its answer read
back costs ~70. Every corral component that talks to the API pays this for each call: the benchmark's
creators, `corral sim`'s thousands of hollow nodes renewing their leases, the agents. Watches and
streams (exec, attach, logs) stay with aiohttp, whose work is per event rather than per call.

What it speaks: requests with a ``Content-Length`` body (never ``Expect: 100-continue``), answers
with a ``Content-Length``, chunked, or read until the server closes; ``Connection: close`` honoured;
no compression asked for (``Accept-Encoding`` is not sent, so the server sends none).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from urllib.parse import quote, urlencode, urlsplit

__all__ = ["Connections", "Answer", "NotReached", "Broken"]

PATH_SAFE = "/:@!$&'()*+,;=~"  # RFC 3986's pchar and "/": everything else is percent-encoded
QUERY_SAFE = PATH_SAFE + "?%"  # a query given in the path keeps its own escapes
LARGE_BODY = 256 * 1024  # bytes: a body this large waits for the socket's buffer to drain
NO_BODY = (204, 304)


class NotReached(Exception):
    """No connection to the server could be made: nothing was sent, so any request may go elsewhere."""

    def __init__(self, host: str, cause: BaseException) -> None:
        super().__init__(f"{cause}" or type(cause).__name__)
        self.host = host
        # what _unreachable looks at to say how to make a certificate name the address
        self.certificate_error = cause if isinstance(cause, ssl.SSLCertVerificationError) else None


class Broken(Exception):
    """The connection failed once the request was (perhaps) sent: the server may have acted on it."""


@dataclass(slots=True)
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]  # names in lower case, in the order sent
    body: bytes

    def header(self, name: str) -> str | None:
        key = name.lower().encode()
        return next((v.decode("latin-1") for k, v in self.headers if k == key), None)

    def header_values(self, name: str) -> list[str]:
        key = name.lower().encode()
        return [v.decode("latin-1") for k, v in self.headers if k == key]


@dataclass(slots=True, frozen=True)
class _Origin:
    scheme: str
    host: str
    port: int
    prefix: str  # a path the URL had, e.g. a proxy's ("" mostly)
    host_header: bytes


Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Connections:
    """Kept-alive connections to one or more servers, at most ``limit`` open (and in use) at once.

    ``ssl_context`` is used for ``https`` URLs (None: the system's trust), ``server_hostname`` names
    the server for TLS when the URL's host is not on its certificate; ``headers`` go with every request."""

    def __init__(self, *, ssl_context: ssl.SSLContext | None, server_hostname: str, limit: int,
                 headers: dict[str, str]) -> None:
        self._ssl = ssl_context
        self._server_hostname = server_hostname or None
        self._slots = asyncio.Semaphore(limit)
        # A line break in a header would end the request's headers early: the rest would be read as a
        # request of its own, and the connection's answers would no longer match its requests.
        for name, value in headers.items():
            if not (name + value).isprintable() or not (name + value).isascii():
                raise ValueError(f"the {name} header for the server has a line break or a character HTTP headers "
                                 "cannot carry (the value is not shown: it may be a credential)")
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode("latin-1")
        self._origins: dict[str, _Origin] = {}
        self._idle: dict[_Origin, list[Stream]] = {}
        self._closed = False

    async def request(self, method: str, base_url: str, path: str, query: dict[str, str] | None,
                      body: bytes | None, content_type: str, timeout: float) -> Answer:
        origin = self._origin(base_url)
        path, mark, given = path.partition("?")  # a query written into the path, as in any URL
        target = origin.prefix + quote(path, safe=PATH_SAFE)
        if mark:
            target += "?" + quote(given, safe=QUERY_SAFE)
        if query:
            target += ("&" if mark else "?") + urlencode(query, quote_via=quote)
        head = b"%s %s HTTP/1.1\r\nHost: %s\r\n%s" % (method.encode(), target.encode(), origin.host_header, self._fixed)
        if body is not None:
            head += b"Content-Type: %s\r\nContent-Length: %d\r\n\r\n" % (content_type.encode("latin-1"), len(body))
        else:
            head += b"Content-Length: 0\r\n\r\n" if method in ("POST", "PUT", "PATCH") else b"\r\n"
        async with self._slots, asyncio.timeout(timeout):
            reader, writer = self._reuse(origin) or await self._connect(origin)
            try:
                writer.write(head + body if body is not None else head)
                if body is not None and len(body) >= LARGE_BODY:
                    await writer.drain()
                answer, keep = await _read_answer(reader, method)
            except (OSError, EOFError, asyncio.LimitOverrunError, ValueError) as exc:
                writer.close()
                raise Broken(f"{exc}" or type(exc).__name__) from None
            except BaseException:  # cancelled or timed out half-way: the connection's state is unknown
                writer.close()
                raise
            if keep and not self._closed:
                self._idle.setdefault(origin, []).append((reader, writer))
            else:
                writer.close()
            return answer

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        writers = [w for streams in idle.values() for _, w in streams]
        for w in writers:
            w.close()
        for w in writers:
            try:
                await w.wait_closed()
            except (OSError, ssl.SSLError):
                pass

    def _origin(self, base_url: str) -> _Origin:
        origin = self._origins.get(base_url)
        if origin is None:
            parts = urlsplit(base_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"not an http(s) URL: {base_url!r}")
            port = parts.port or (443 if parts.scheme == "https" else 80)
            origin = self._origins[base_url] = _Origin(parts.scheme, parts.hostname, port, parts.path.rstrip("/"),
                                                       parts.netloc.rpartition("@")[2].encode("idna"))
        return origin

    def _reuse(self, origin: _Origin) -> Stream | None:
        """A kept-alive connection the server has not closed meanwhile (it closes idle ones)."""
        streams = self._idle.get(origin)
        while streams:
            reader, writer = streams.pop()
            if not (writer.is_closing() or reader.at_eof() or reader.exception() is not None):
                return reader, writer
            writer.close()
        return None

    async def _connect(self, origin: _Origin) -> Stream:
        tls: dict = {}
        if origin.scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()  # the system's trust
            tls = {"ssl": self._ssl, "server_hostname": self._server_hostname or origin.host}
        try:
            return await asyncio.open_connection(origin.host, origin.port, limit=256 * 1024, **tls)
        except (OSError, ssl.SSLError) as exc:  # refused, unresolvable, unreachable, a certificate refused
            raise NotReached(f"{origin.host}", exc) from None


async def _read_answer(reader: asyncio.StreamReader, method: str) -> tuple[Answer, bool]:
    """The answer's status, headers and whole body, and whether the connection may be used again."""
    while True:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head[:-4].split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        if not version.startswith(b"HTTP/1."):
            raise ValueError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
        status = int(rest[:3])
        if status >= 200:
            break  # an interim 1xx answer is followed by the real one
    headers: list[tuple[bytes, bytes]] = []
    length: int | None = None
    chunked = False
    keep = version == b"HTTP/1.1"
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise ValueError(f"a header line without a colon: {line[:80]!r}")
        name, value = name.strip().lower(), value.strip()
        headers.append((name, value))
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = value.lower().endswith(b"chunked")
        elif name == b"connection":
            tokens = value.lower()
            keep = b"close" not in tokens and (keep or b"keep-alive" in tokens)
    if method == "HEAD" or status in NO_BODY:
        body = b""
    elif chunked:
        body = await _read_chunks(reader)
    elif length is not None:
        body = await reader.readexactly(length)
    else:  # neither: the body runs to the end of the connection
        body = await reader.read()
        keep = False
    return Answer(status, headers, body), keep


async def _read_chunks(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers, unused
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise ValueError("a chunk not followed by CRLF")
