"""A token bucket on its caller's clock: what limits the controllers' events about one object
(:mod:`corral.controllers.events`) and the evictions of lost nodes per zone
(:mod:`corral.controllers.nodes.limits`)."""

from __future__ import annotations

__all__ = ["TokenBucket"]


class TokenBucket:
    """``size`` tokens, full when made, one more every ``interval`` seconds up to ``size``; times are
    the caller's (a fake clock in tests; a pass takes its tokens at one instant)."""

    __slots__ = ("interval", "size", "tokens", "at")

    def __init__(self, interval: float, size: float, now: float) -> None:
        self.interval, self.size, self.tokens, self.at = interval, size, size, now

    def take(self, now: float) -> bool:
        """Take one token if there is one."""
        self.tokens = min(self.size, self.tokens + max(0.0, now - self.at) / self.interval)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False
