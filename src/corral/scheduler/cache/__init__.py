"""See corral.scheduler."""
