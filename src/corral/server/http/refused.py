"""Requests the HTTP parser refuses, in the log.

aiohttp logs every request its parser refuses (a header line without its CR, a line too long, a
method that is not one) at ERROR, with a traceback that quotes the request's bytes: an
``Authorization`` header's bearer token among them, and as often as any client cares to send one.
The API server's aiohttp runner logs with :data:`request_log` instead, whose filter turns such a refusal into
one warning a minute at most: how many there were, where the last came from and what was wrong with
it, never the bytes. Anything else logged there (a handler that crashed) is left as aiohttp logs it.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from aiohttp.http_exceptions import HttpProcessingError

__all__ = ["RefusedRequests", "request_log"]


class RefusedRequests(logging.Filter):
    """Rewrites aiohttp's record of a refused request; lets one through every ``every`` seconds of
    ``clock`` (counting the ones it held back) and drops the rest."""

    def __init__(self, every: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every, self._clock = every, clock
        self.refused = 0  # since the server started
        self._held = 0  # refused since the last warning
        self._warned_at: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        remote = record.args[0] if isinstance(record.args, tuple) and record.args else "an unknown address"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        if record.levelno < logging.WARNING:  # aiohttp's own debug line (TLS spoken to a plain port)
            record.msg, record.args = "refused a request from %s that is not HTTP (%s)", (remote, _what(exc))
            return True
        self.refused += 1
        self._held += 1
        now = self._clock()
        if self._warned_at is not None and now - self._warned_at < self.every:
            return False
        if self._held == 1:
            record.msg, record.args = ("refused a malformed HTTP request from %s (%s); its bytes are not logged",
                                       (remote, _what(exc)))
        else:
            record.msg, record.args = ("refused %d malformed HTTP requests since the last such warning (the last "
                                       "from %s: %s); their bytes are not logged", (self._held, remote, _what(exc)))
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        self._held, self._warned_at = 0, now
        return True


def _what(exc: HttpProcessingError) -> str:
    """What was wrong, without the bytes: the first line of the parser's message where it quotes
    nothing (the bytes follow on the lines after it), else the kind of error."""
    first = str(exc.message).split("\n", 1)[0].strip().rstrip(":")
    if not first or len(first) > 100 or any(q in first for q in "'\"\\"):
        first = type(exc).__name__
    return f"{first}, answered {exc.code or 400}"


request_log = logging.getLogger("corral.server.http")
request_log.addFilter(RefusedRequests())
