"""The node agent: a pod state machine without I/O (``machine``) inside an asyncio shell (``agent``)
that registers the node, renews its lease, reports throughput, watches the pods bound to it and runs
them through a runtime (``runtimes/``: real processes, or Docker)."""
