"""Reaching a node's agent from the API server (logs, exec, port-forward), safely.

The URL is built only from what the node registered, each part validated on its own: the
``InternalIP`` of ``status.addresses`` must be an IP address or a DNS name, the port of
``status.daemonEndpoints.kubeletEndpoint`` an integer in 1..65535; the path's segments are names
the API already validated, quoted all the same. Nothing a client sends becomes part of the URL.

The connection is TLS both ways: the server presents a client certificate made out to
``system:apiserver-agent-client`` (the only client an agent answers), and accepts the agent only if
its certificate is from the cluster CA and names the very node it meant to reach (node certificates
carry the node's name as their DNS name; it is checked in the handshake, before a byte of the
request is sent) — so a node that registers another host's address reaches nothing.
"""

from __future__ import annotations

import ipaddress
import re
import ssl
from typing import Any
from urllib.parse import quote

from corral.pki import AGENT_CLIENT_USER
from corral.pki.ca import CertificateAuthority
from corral.pki.kubeconfig import load_cert_pair
from corral.server import errors

__all__ = ["AgentConnector", "agent_endpoint"]

_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def agent_endpoint(node: dict[str, Any] | None) -> tuple[str, int] | None:
    """(host, port) of the node's agent, or ``None`` when it registered none that is valid."""
    status = (node or {}).get("status") or {}
    address = next((a.get("address") for a in status.get("addresses") or ()
                    if isinstance(a, dict) and a.get("type") == "InternalIP"), None)
    port = ((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port")
    if not isinstance(address, str) or isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        return None
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        host = address.lower()
        if len(host) > 253 or not _DNS_NAME.match(host):
            return None
        return host, port
    return (f"[{ip}]" if ip.version == 6 else str(ip)), port


class AgentConnector:
    def __init__(self, ca: CertificateAuthority) -> None:
        self._ca = ca
        self._ssl: ssl.SSLContext | None = None

    def ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            issued = self._ca.issue_client(AGENT_CLIENT_USER)
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=self._ca.cert_pem.decode())
            load_cert_pair(ctx, issued.cert_pem, issued.key_pem)
            self._ssl = ctx
        return self._ssl

    @staticmethod
    def url(node_name: str, node: dict[str, Any] | None, *parts: str) -> str:
        """``https://{agent}/{parts…}``: the agent of ``node_name`` as it registered, each part quoted."""
        endpoint = agent_endpoint(node)
        if endpoint is None:
            raise errors.ApiError(503, "ServiceUnavailable",
                                  f"node {node_name} has registered no valid agent endpoint to reach")
        host, port = endpoint
        return f"https://{host}:{port}/" + "/".join(quote(part, safe="") for part in parts)
