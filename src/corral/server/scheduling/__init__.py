"""The scheduler's answers through the API: ``corral explain``
(``/corral/v1/namespaces/{ns}/pods/{name}/explain``) and ``corral plan`` (``/corral/v1/plan``,
``/corral/v1/plan/version``).

They need the running scheduler, which only the leader of a set of servers has: a follower forwards
them to the leader, at the URL the leader wrote on its Lease, asking as the server itself (a client
certificate of the shared CA) since it has already authenticated and authorised the user.
"""

from corral.server.scheduling.routes import SchedulingRoutes

__all__ = ["SchedulingRoutes"]
