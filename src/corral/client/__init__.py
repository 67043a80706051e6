"""How components talk to the API: an async REST client, informers and a work queue.

The scheduler, agents, controllers and the CLI are built on these; none of them opens a socket
of its own.
"""

from corral.client.informer import Informer, object_key
from corral.client.rest import (
    AlreadyExists,
    ApiError,
    Client,
    Conflict,
    ConnectionFailed,
    Gone,
    Invalid,
    NotFound,
    ObjectList,
    TooManyRequests,
    WatchEvent,
)
from corral.client.workqueue import ShutDown, WorkQueue

__all__ = [
    "AlreadyExists", "ApiError", "Client", "Conflict", "ConnectionFailed", "Gone", "Informer",
    "Invalid", "NotFound", "ObjectList", "ShutDown", "TooManyRequests", "WatchEvent", "WorkQueue", "object_key",
]
