"""Kinds beyond the core pod, node and RBAC ones, a module per family: ``apps`` (ReplicaSet,
Deployment), ``config`` (ConfigMap, Secret), ``coordination`` (node Leases' heartbeat periods).
Models, defaults and validation; no I/O here."""
