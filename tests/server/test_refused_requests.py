"""Requests the HTTP parser refuses: a 400, and a warning a minute at most that never quotes their
bytes (a bearer token among them)."""

from __future__ import annotations

import logging
import socket
import sys
from urllib.parse import urlsplit

import urllib.request

from aiohttp.http_exceptions import BadHttpMessage, BadHttpMethod, LineTooLong

from corral.server.http.refused import RefusedRequests


def send_raw(server_process, data: bytes) -> bytes:
    """``data`` written as is on a TLS connection to the server; all it answers before it closes."""
    url = urlsplit(server_process.url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as sock, \
            server_process.ssl_context().wrap_socket(sock, server_hostname=url.hostname) as tls:
        tls.sendall(data)
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    return answer


def test_a_request_with_a_broken_header_is_a_400_and_one_warning_without_its_bytes(server_process):
    token = server_process.credentials().token
    broken = (b"GET /api/v1/pods HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer %s\nX-Injected: yes\r\n\r\n"
              % token.encode())
    for _ in range(3):
        answer = send_raw(server_process, broken)
        assert answer.split(b"\r\n", 1)[0] in (b"HTTP/1.0 400 Bad Request", b"HTTP/1.1 400 Bad Request"), answer
    # The server still serves (a public path, no credential needed).
    with urllib.request.urlopen(server_process.url + "/healthz", context=server_process.ssl_context()) as r:
        assert r.read() == b"ok"
    log = server_process.log()
    assert token not in log and "X-Injected" not in log and "Traceback" not in log and " ERROR " not in log
    warnings = [line for line in log.splitlines() if "malformed HTTP request" in line]
    assert len(warnings) == 1, log  # the next two within the minute are counted, not logged
    assert " WARNING corral.server.http: refused a malformed HTTP request from 127.0.0.1 (" in warnings[0]
    assert warnings[0].endswith("answered 400); its bytes are not logged")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def refusal(exc: BaseException, level: int = logging.ERROR) -> logging.LogRecord:
    """The record aiohttp's request handler logs for a request its parser refused."""
    try:
        raise exc
    except BaseException:
        info = sys.exc_info()
    return logging.LogRecord("corral.server.http", level, "web_protocol.py", 1, "Error handling request from %s",
                             ("10.0.0.7",), info)


def test_refusals_are_one_warning_a_minute_that_counts_those_held_back():
    clock = Clock()
    refused = RefusedRequests(every=60.0, clock=clock)
    secret = "Authorization: Bearer abcdef.0123456789abcdef"
    parser = BadHttpMessage(f"Missing expected CR after header value:\n\n    b'{secret}\\nX: y'\n    ^")
    first = refusal(parser)
    assert refused.filter(first)
    assert (first.levelname, first.exc_info, first.getMessage()) == (
        "WARNING", None, "refused a malformed HTTP request from 10.0.0.7 (Missing expected CR after header value, "
        "answered 400); its bytes are not logged")
    clock.now += 30
    assert not refused.filter(refusal(parser)) and not refused.filter(refusal(LineTooLong("Request line", "8190", 9000)))
    clock.now += 31
    later = refusal(BadHttpMessage(f"Invalid header value char: {secret!r}"))
    assert refused.filter(later)
    assert later.getMessage() == ("refused 3 malformed HTTP requests since the last such warning (the last from "
                                  "10.0.0.7: BadHttpMessage, answered 400); their bytes are not logged")
    assert refused.refused == 4
    assert all("0123456789" not in r.getMessage() for r in (first, later))


def test_other_records_pass_as_they_are_and_a_debug_refusal_stays_debug_without_its_bytes():
    refused = RefusedRequests(clock=Clock())
    crash = refusal(RuntimeError("a handler crashed"))
    assert refused.filter(crash) and crash.exc_info is not None and crash.levelno == logging.ERROR
    tls_on_plain = refusal(BadHttpMethod("\x16\x03\x01secret"), level=logging.DEBUG)
    assert refused.filter(tls_on_plain)
    assert tls_on_plain.levelno == logging.DEBUG and tls_on_plain.exc_info is None
    assert "secret" not in tls_on_plain.getMessage() and refused.refused == 0
