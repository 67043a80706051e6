"""The API server: Kubernetes-style REST and watch over a store, with a watch cache.

Layers inside: ``http`` (paths, query parameters, streaming, audit) → ``rest`` (what each verb does) →
``watch`` (the cache that serves reads and watches) and ``corral.store`` (writes). Beside them on the
request path: ``authn``, ``flowcontrol``, ``authz``, ``admission``; for what leaves the API:
``agents`` (logs, exec, metrics from the nodes), ``discovery`` (API groups, OpenAPI) and
``scheduling`` (explain, plan). ``control`` says which server and process run the scheduler and the
controllers; ``errors`` are the ``Status`` answers every layer raises; ``app`` assembles it all into a
process.
"""

from corral.server.app import Server, ServerConfig

__all__ = ["Server", "ServerConfig"]
