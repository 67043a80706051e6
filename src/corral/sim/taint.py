"""The taint hollow nodes carry by default, and the toleration of the pods meant for them.

Kept apart from :mod:`corral.sim.hollow` so the CLI can name it without importing the simulator.
"""

from __future__ import annotations

__all__ = ["HOLLOW_TAINT", "HOLLOW_TOLERATION"]

HOLLOW_TAINT = {"key": "corral.dev/hollow", "effect": "NoSchedule"}
HOLLOW_TOLERATION = {"key": "corral.dev/hollow", "operator": "Exists", "effect": "NoSchedule"}
