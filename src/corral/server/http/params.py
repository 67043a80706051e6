"""How the server reads query parameters, in one place. Booleans above all: the authorisers (is this
GET a watch?), flow control (is it long-running?) and the handlers (``watch``, ``follow``,
``allowWatchBookmarks``) must never disagree, or a request could be judged as one thing and
served as another."""

from __future__ import annotations

from aiohttp import web

from corral.server import errors

__all__ = ["TRUE_WORDS", "FALSE_WORDS", "is_true", "flag", "int_param", "INT64_MAX"]

TRUE_WORDS = frozenset({"true", "t", "1", "yes"})  # Go's ParseBool, and yes/no
FALSE_WORDS = frozenset({"", "false", "f", "0", "no"})


def is_true(value: str | None) -> bool:
    """True for a word of TRUE_WORDS (any case); the handlers refuse what is neither true nor false."""
    return bool(value) and value.lower() in TRUE_WORDS  # type: ignore[union-attr]


def flag(request: web.Request, name: str) -> bool:
    """A boolean query parameter, as Go's ParseBool reads one (and yes/no); anything else is a 400."""
    value = request.query.get(name, "").lower()
    if value in TRUE_WORDS:
        return True
    if value not in FALSE_WORDS:
        raise errors.bad_request(f"{name} must be true or false, got {value[:40]!r}")
    return False


INT64_MAX = 2**63 - 1


def int_param(request: web.Request, name: str) -> int | None:
    """An integer query parameter (Kubernetes' are int64); absent or empty: ``None``. Given more
    than once, every value must be an integer; the first counts, as in Kubernetes."""
    values = request.query.getall(name, ())
    if not values or values == [""]:
        return None
    first = None
    for raw in values:
        try:
            value = int(raw)
        except ValueError:
            raise errors.bad_request(f"{name} must be an integer, got {raw[:40]!r}") from None
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise errors.bad_request(f"{name} must fit in 64 bits, got {raw[:40]}")
        first = value if first is None else first
    return first
