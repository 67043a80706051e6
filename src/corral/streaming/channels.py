"""The remote command channel protocol (``v5.channel.k8s.io`` and ``v4.channel.k8s.io``).

Over one WebSocket, each binary message starts with a byte naming its channel: 0 stdin (client →
container), 1 stdout, 2 stderr, 3 error (the server's last word: a ``meta/v1`` Status, Success or
the exit code as Kubernetes encodes it), 4 resize (client: ``{"Width": W, "Height": H}``); v5 adds
255 close (client: the one following byte is the channel it has finished writing, i.e. stdin's
end). After the error message the server closes the WebSocket normally. corral's agent always
speaks v5; the server accepts v4 from clients too (the official Python client's), which only lack
the close signal.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["STDIN", "STDOUT", "STDERR", "ERROR", "RESIZE", "CLOSE", "V5", "V4", "PROTOCOLS",
           "success", "exit_status", "failure", "resize_of"]

STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
PROTOCOLS = (V5, V4)  # in order of preference


def _status(body: dict[str, Any]) -> bytes:
    return bytes([ERROR]) + json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, **body}).encode()


def success() -> bytes:
    """The error channel's message when the command exited 0."""
    return _status({"status": "Success"})


def exit_status(code: int) -> bytes:
    """The error channel's message for a non-zero exit code, as kubectl reads it ("command terminated
    with exit code N", and kubectl exits with N)."""
    if code == 0:
        return success()
    return _status({"status": "Failure", "reason": "NonZeroExitCode",
                    "message": f"command terminated with non-zero exit code: {code}",
                    "details": {"causes": [{"reason": "ExitCode", "message": str(code & 0xFF)}]}})


def failure(message: str, reason: str = "InternalError") -> bytes:
    """The error channel's message when the command could not run at all; kubectl prints ``message``."""
    return _status({"status": "Failure", "reason": reason, "message": message})


def resize_of(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a resize message's JSON, or None when it is not one."""
    try:
        size = json.loads(data)
        width, height = int(size["Width"]), int(size["Height"])
    except (ValueError, TypeError, KeyError):
        return None
    if not (0 <= width < 65536 and 0 <= height < 65536):
        return None
    return width, height
