"""Streams between a client, the API server and an agent: ``kubectl exec``, ``attach``,
``port-forward`` and ``cp``.

Two wire formats, both Kubernetes': the remote command channel protocol over WebSocket
(:mod:`.channels`: one byte of channel before each message) for exec and attach, and SPDY/3.1
(:mod:`.spdy`) tunnelled through a WebSocket, which kubectl speaks for port-forward. Only codecs
here, no I/O: the server terminates both (``corral.server.streams``) and speaks the channel
protocol, or plain byte tunnels, to the agent (``corral.agent.streams``).
"""
