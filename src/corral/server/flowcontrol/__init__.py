"""Flow control: how many requests and watches the server takes at once, per lane and per user,
the fair queue in front of the users' seats, and the 429 with Retry-After past that (see ``inflight``)."""

from corral.server.flowcontrol.inflight import (DEFAULT_READS, DEFAULT_WATCHES_PER_USER, DEFAULT_WRITES,
                                                RETRY_AFTER_SECONDS, InflightLimits, Queued, TooManyRequests)

__all__ = ["InflightLimits", "Queued", "TooManyRequests", "DEFAULT_READS", "DEFAULT_WRITES",
           "DEFAULT_WATCHES_PER_USER", "RETRY_AFTER_SECONDS"]
