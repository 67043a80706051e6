"""What each API verb does, free of HTTP: :mod:`.verbs` (get, list, create, update, patch, delete,
through the watch cache and the store's compare-and-swap) and the subresources with rules of their
own — :mod:`.binding` (a pod given its node), :mod:`.scale` (ReplicaSets' and Deployments' replica
count) and :mod:`.disruption` (the budgets an eviction honours).

Called by :mod:`corral.server.http` with decoded inputs, and by the scheduler and controllers that run
inside the server; answers with a :class:`Reply` or raises :class:`~corral.server.errors.ApiError`.
"""

from corral.server.rest.verbs import ListOptions, Reply, ResourceAPI, WriteOptions

__all__ = ["ResourceAPI", "Reply", "ListOptions", "WriteOptions"]
