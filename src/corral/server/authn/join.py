"""``POST /corral/v1/join``: a node's signing request in, its client certificate out.

Two callers, as kubelet's TLS bootstrap and certificate rotation: an agent joining with a join
token (user ``system:bootstrap:<id>``) for any node name, and a node renewing its own certificate
with the certificate it holds (user ``system:node:NAME``, only for NAME). The request is
``{"csr": "<PEM>"}``; the subject must be ``CN=system:node:NAME, O=system:nodes`` with NAME a valid
node name. The answer is ``{"certificate": "<PEM>", "ca": "<PEM>"}``. The key never leaves the agent.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from aiohttp import web

from corral.pki import JOIN_PATH, MASTERS_GROUP, NODE_PREFIX, NODES_GROUP
from corral.pki.ca import CertificateAuthority, CertificateError, read_csr
from corral.server import errors
from corral.server.authn.authenticator import BOOTSTRAPPERS
from corral.server.authz.node import node_name

__all__ = ["JOIN_PATH", "join_handler"]

MAX_CSR_BYTES = 16 * 1024
_NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


async def join_handler(request: web.Request, ca: CertificateAuthority, user: Any) -> web.Response:
    may_join = user.in_group(BOOTSTRAPPERS) or user.in_group(MASTERS_GROUP)
    if not may_join and node_name(user.name, user.groups) is None:
        raise errors.ApiError(403, "Forbidden", f'User "{user.name}" cannot join nodes: it needs a join token')
    raw = await request.content.read(MAX_CSR_BYTES + 1)
    if len(raw) > MAX_CSR_BYTES:
        raise errors.too_large(MAX_CSR_BYTES)
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise errors.bad_request(f"the request body is not valid JSON: {exc}") from None
    csr = body.get("csr") if isinstance(body, dict) else None
    if not isinstance(csr, str):
        raise errors.bad_request('the body must be {"csr": "<PEM certificate signing request>"}')
    try:
        request_ = read_csr(csr.encode())
    except CertificateError as exc:
        raise errors.bad_request(str(exc)) from None
    node = request_.common_name[len(NODE_PREFIX):] if request_.common_name.startswith(NODE_PREFIX) else ""
    if not node or len(node) > 253 or not _NODE_NAME.match(node):
        raise errors.bad_request(f'the subject must be CN=system:node:NAME with NAME a valid node name, got '
                                 f'"{request_.common_name}"')
    if request_.organizations != (NODES_GROUP,):
        raise errors.bad_request(f"the subject's organizations must be exactly [{NODES_GROUP}], "
                                 f"got {list(request_.organizations)}")
    if not may_join and user.name != request_.common_name:
        raise errors.ApiError(403, "Forbidden", f'User "{user.name}" can renew only its own certificate, not '
                      f'"{request_.common_name}"')
    issued = ca.issue_client(request_.common_name, request_.organizations, public_key=request_.public_key,
                             serving_name=node)  # the agent's endpoint is served with it too
    return web.json_response({"certificate": issued.cert_pem.decode(), "ca": ca.cert_pem.decode()})
