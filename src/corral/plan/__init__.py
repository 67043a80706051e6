"""Dry runs of manifests against a snapshot of the live cluster (``corral plan``).

Layers: :mod:`.request` checks what a client asks; :mod:`.expand` turns manifests into the pods
their controllers would make (through an admission callback the server gives it: validation,
defaults, priority, written nowhere); :mod:`.dry_run` copies the scheduler's cache and decides those
pods on the copy; :mod:`.place` is the scheduler's half of a plan, also asked of a scheduler in its
own process. The server's handler (:mod:`corral.server.scheduling.plan`) ties them to the running
scheduler; nothing here does I/O. This module itself stays light: the CLI imports its paths.
"""

__all__ = ["PLAN_PATH", "PLAN_VERSION_PATH"]

PLAN_PATH = "/corral/v1/plan"  # POST a PlanRequest: the plan
PLAN_VERSION_PATH = "/corral/v1/plan/version"  # GET: the plan version now
