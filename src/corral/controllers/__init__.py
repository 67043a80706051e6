"""Controllers that run inside ``corral server``: they watch API objects and correct the cluster."""
