"""corral: a lightweight container orchestrator for self-hosted clusters.

The layers, from the bottom up (each may use only those below it):

- ``corral.api``        resource models, quantities, selectors, validation, defaulting — no I/O
- ``corral.store``      the revisioned key/value store contract and its backends
- ``corral.server``     the Kubernetes-compatible HTTP API over a store, with a watch cache
- ``corral.client``     async REST client, informer, work queue — how components talk to the API
- ``corral.cli``        the ``corral`` command
"""

__version__ = "0.1.0"
