"""What child processes that tests start need: the environment to import corral, and a free port."""

from __future__ import annotations

import os
import socket

import corral

__all__ = ["child_env", "free_port"]

# The directory this process imported ``corral`` from: src/ of a checkout, or a mutation tool's
# copy of it. Children import the same code, so a mutant under test runs in the child too.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(corral.__file__)))


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with ``SOURCE_ROOT`` first on ``PYTHONPATH``, plus ``extra``."""
    env = {**os.environ, **(extra or {})}
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = SOURCE_ROOT + (os.pathsep + rest if rest else "")
    return env


_handed_out: set[int] = set()  # every port free_port gave in this process


def free_port() -> int:
    """A loopback TCP port nothing listens on now (so two test runs on one machine do not collide),
    and never one it gave before: the kernel may offer a port again once its socket is closed, and
    a test that starts several daemons (an etcd cluster's members) asks before any of them listens."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
