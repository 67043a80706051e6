"""The API server: Kubernetes-style REST and watch over a store, with a watch cache.

Layers inside: ``http`` (paths, query parameters, streaming) → ``rest`` (what each verb does) →
``cache`` (reads and watches) and ``corral.store`` (writes). ``app`` assembles them into a process.
"""

from corral.server.app import Server, ServerConfig

__all__ = ["Server", "ServerConfig"]
