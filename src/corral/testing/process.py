"""The environment for corral child processes that tests start (server, agents, CLI, sim)."""

from __future__ import annotations

import os

import corral

__all__ = ["child_env"]

# The directory this process imported ``corral`` from: src/ of a checkout, or a mutation tool's
# copy of it. Children import the same code, so a mutant under test runs in the child too.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(corral.__file__)))


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with ``SOURCE_ROOT`` first on ``PYTHONPATH``, plus ``extra``."""
    env = {**os.environ, **(extra or {})}
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = SOURCE_ROOT + (os.pathsep + rest if rest else "")
    return env
