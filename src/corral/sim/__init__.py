"""Simulated (hollow) nodes for scale tests and benchmarks; they run the agent's real state machine."""
