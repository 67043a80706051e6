"""How the server reads a boolean query parameter, in one place: the authorisers (is this GET a
watch?), flow control (is it long-running?) and the handlers (``watch``, ``follow``,
``allowWatchBookmarks``) must never disagree, or a request could be judged as one thing and
served as another."""

from __future__ import annotations

__all__ = ["TRUE_WORDS", "FALSE_WORDS", "is_true"]

TRUE_WORDS = frozenset({"true", "t", "1", "yes"})  # Go's ParseBool, and yes/no
FALSE_WORDS = frozenset({"", "false", "f", "0", "no"})


def is_true(value: str | None) -> bool:
    """True for a word of TRUE_WORDS (any case); the handlers refuse what is neither true nor false."""
    return bool(value) and value.lower() in TRUE_WORDS  # type: ignore[union-attr]
