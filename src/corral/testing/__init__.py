"""Helpers for corral's own tests and for users testing against corral: a real server process."""

from corral.testing.server import ServerProcess, running_server

__all__ = ["ServerProcess", "running_server"]
