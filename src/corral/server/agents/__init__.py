"""The server's way to the agents: the connection (mutually authenticated TLS, the agent's
certificate checked to name the node), and what goes over it — container logs, exec, attach and
port-forward streams, and the resource metrics of ``kubectl top``."""

from corral.server.agents import streams
from corral.server.agents.connector import AgentConnector, agent_endpoint
from corral.server.agents.logs import proxy_logs
from corral.server.agents.metrics import MetricsAPI

__all__ = ["AgentConnector", "agent_endpoint", "proxy_logs", "MetricsAPI", "streams"]
