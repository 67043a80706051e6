"""Admission: what a client's write must pass once decoded, defaulted and merged, before it is
stored (node restriction, pods placed by hand, no escalation through RBAC: see ``objects``)."""

from corral.server.admission.objects import Admission

__all__ = ["Admission"]
