"""The client's own HTTP/1.1: what it sends, how it reads every shape of answer, and what it does when
a connection fails, against a scripted server on loopback (the real server's answers are covered by
every test that uses a Client)."""

from __future__ import annotations

import asyncio
import json

import pytest

from corral.client import Client
from corral.client.rest import ConnectionFailed, NotFound

OK = b'{"kind":"Status","status":"Success"}'


class Scripted:
    """A server that hands each request to ``answer(request_head, body, nth_on_connection)``: the bytes
    it returns are written back; None closes the connection without answering; (bytes, "close")
    answers, then closes (as a server does with a connection idle for too long)."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self._handlers: set[asyncio.Task] = set()

    async def __aenter__(self) -> "Scripted":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = "http://127.0.0.1:%d" % self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        self.server.close()
        for task in self._handlers:
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            await self._answer_all(reader, writer)
        except asyncio.CancelledError:
            pass  # the test is over
        finally:
            self._handlers.discard(task)

    async def _answer_all(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            nth = 0
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                out = await self.answer(head, body, nth)
                nth += 1
                if out is None:
                    return
                writer.write(out[0] if isinstance(out, tuple) else out)
                await writer.drain()
                if isinstance(out, tuple):
                    return
        finally:
            self.open -= 1
            writer.close()


def reply(body: bytes = OK, status: str = "200 OK", extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        status.encode(), len(body), extra, body)


def cm(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


async def test_a_request_is_written_with_its_path_and_query_encoded_and_its_headers():
    async def answer(head, body, nth):
        return reply(json.dumps({"kind": "ConfigMap", "metadata": {"name": "a b"}}).encode())

    async with Scripted(answer) as s, Client(s.url, user_agent="probe/1") as c:
        await c.get("configmaps", "a b%2F", "default", raw=True)
        await c.request("DELETE", "/api/v1/namespaces/default/configmaps/a?propagationPolicy=Orphan&x=%2F b",
                        params={"dryRun": "All"})
        await c.list("configmaps", "default", label_selector="app in (a,b),tier!=db", raw=True)
        created = await c.create(cm("x"), "default")
    get, delete, listing, create = s.requests
    assert get.startswith(b"GET /api/v1/namespaces/default/configmaps/a%20b%252F HTTP/1.1\r\n")
    # a query written into the path is kept (its escapes too), and the parameters follow it
    assert delete.startswith(b"DELETE /api/v1/namespaces/default/configmaps/a?propagationPolicy=Orphan&x=%2F%20b"
                             b"&dryRun=All HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:" in get and b"\r\nUser-Agent: probe/1\r\n" in get
    assert b"labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Ddb" in listing.split(b"\r\n")[0]
    head, body = create.split(b"\r\n\r\n", 1)
    assert head.startswith(b"POST /api/v1/namespaces/default/configmaps HTTP/1.1")
    assert b"\r\nContent-Type: application/json\r\nContent-Length: %d" % len(body) in head
    assert json.loads(body)["metadata"]["name"] == "x"
    assert created["metadata"]["name"] == "a b"
    assert s.connections == 1  # one connection, kept alive across the four


async def test_answers_chunked_or_closing_or_without_a_length_are_read_whole():
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5;ext=1\r\n{\"kin\r\n17\r\nd\":\"Status\",\"code\":200}\r\n0\r\nTrailer: x\r\n\r\n")
    shapes = [chunked,
              (reply(extra=b"Connection: close\r\n"), "close"),
              b"HTTP/1.1 100 Continue\r\n\r\n" + reply(),
              (b"HTTP/1.0 200 OK\r\n\r\n" + OK, "close")]  # no length: the body runs to the end

    async def answer(head, body, nth):
        n = len(s.requests) - 1
        return shapes[n] if n < len(shapes) else reply()

    async with Scripted(answer) as s, Client(s.url) as c:
        bodies = [await c.request("GET", "/x") for _ in shapes]
        assert await c.request("GET", "/x") == b'{"kind":"Status","status":"Success"}'  # after the one cut short
    assert bodies[0] == b'{"kind":"Status","code":200}'
    assert bodies[1:] == [OK, OK, OK]
    # the chunked answer's connection carried on; "Connection: close", HTTP/1.0 without a length did not
    assert s.connections == 3


async def test_a_connection_the_server_closed_while_idle_is_not_used_again():
    async def answer(head, body, nth):
        return reply(), "close"  # kept alive by the answer's headers, then closed: an idle timeout

    async with Scripted(answer) as s, Client(s.url) as c:
        await c.request("POST", "/x", body=b"{}")
        await asyncio.sleep(0.05)
        # the write goes out on a new connection rather than failing on the dead one
        assert await c.request("POST", "/x", body=b"{}") == OK
    assert s.connections == 2


async def test_a_write_cut_off_after_it_was_sent_fails_and_a_read_goes_to_the_next_server():
    async def cut(head, body, nth):
        return None  # read the request, then close without an answer

    async def fine(head, body, nth):
        return reply()

    async with Scripted(cut) as bad, Scripted(fine) as good:
        async with Client(bad.url) as c:
            with pytest.raises(ConnectionFailed, match="lost the connection to the corral server at http://127.0.0.1"):
                await c.request("POST", "/x", body=b"{}")
        async with Client(f"{bad.url},{good.url}") as c:
            with pytest.raises(ConnectionFailed):  # a write that may have been applied is not sent again
                await c.request("POST", "/x", body=b"{}")
            assert c.base_url == good.url  # but the next call goes to the next server
            assert await c.request("GET", "/x") == OK
        async with Client(f"{bad.url},{good.url}") as c:
            assert await c.request("GET", "/x") == OK  # a read cut off is sent to the next server
    assert len(bad.requests) == 3 and len(good.requests) == 2


async def test_at_most_the_clients_connections_are_open_at_once():
    gate = asyncio.Event()

    async def slow(head, body, nth):
        await gate.wait()
        return reply()

    async with Scripted(slow) as s, Client(s.url, connections=3) as c:
        calls = [asyncio.create_task(c.request("GET", f"/x/{i}")) for i in range(12)]
        await asyncio.sleep(0.2)
        assert s.open == 3 and len(s.requests) == 3
        gate.set()
        assert await asyncio.gather(*calls) == [OK] * 12
    assert s.most_open == 3 and s.connections == 3


async def test_no_answer_in_time_fails_and_the_connection_is_not_used_again():
    async def answer(head, body, nth):
        if b"/slow" in head:
            await asyncio.sleep(5)
        return reply()

    async with Scripted(answer) as s, Client(s.url, timeout=0.3) as c:
        with pytest.raises(ConnectionFailed, match="did not answer"):
            await c.request("POST", "/slow", body=b"{}")
        call = asyncio.create_task(c.request("GET", "/slow"))
        await asyncio.sleep(0.1)
        call.cancel()  # a caller that gives up half-way
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await c.request("GET", "/fast") == OK
    assert s.connections == 3  # neither half-used connection was handed to the next request


async def test_errors_are_the_servers_status_and_warnings_are_kept():
    status = json.dumps({"kind": "Status", "code": 404, "reason": "NotFound", "message": 'configmaps "a" not found'})

    async def answer(head, body, nth):
        if head.startswith(b"GET"):
            return reply(status.encode(), "404 Not Found")
        return reply(extra=b'Warning: 299 - "first"\r\nWarning: 299 - "second"\r\n')

    async with Scripted(answer) as s, Client(s.url) as c:
        with pytest.raises(NotFound, match='configmaps "a" not found'):
            await c.get("configmaps", "a", "default")
        await c.request("PUT", "/x", body="{}")
        assert c.warnings == ["first", "second"]


async def test_a_server_that_does_not_speak_http_is_a_lost_connection():
    async def answer(head, body, nth):
        return b"SSH-2.0-OpenSSH_9.2\r\n\r\n"

    async with Scripted(answer) as s, Client(s.url) as c:
        with pytest.raises(ConnectionFailed, match="not an HTTP/1.x answer"):
            await c.request("GET", "/x")


async def test_a_credential_with_a_line_break_is_refused_before_anything_is_sent():
    from corral.pki.kubeconfig import Credentials

    async def answer(head, body, nth):
        return reply()

    smuggled = "abcdef.0123456789abcdef\r\nX-Injected: yes"  # as a token pasted with a line break would be
    async with Scripted(answer) as s:
        async with Client(s.url, credentials=Credentials(s.url, b"", token=smuggled)) as c:
            with pytest.raises(ValueError) as err:
                await c.create(cm("x"), "default")
        assert "Authorization header" in str(err.value) and "0123456789" not in str(err.value)
        assert s.connections == 0 and s.requests == []
