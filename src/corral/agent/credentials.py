"""An agent's own credential: joined once with a join token, kept, renewed before it expires.

``corral agent --server URL --token T --ca-cert-hash sha256:H``, the first time: the agent fetches
the cluster CA, trusts it only if its public key hashes to H (as ``kubeadm join`` does), then sends
a signing request for ``system:node:NAME`` over TLS verified with that CA, authenticated with the
join token, and keeps the certificate it gets, with its own key, as ``<data-dir>/kubeconfig``
(0600). Started again on that directory it needs no token. The certificate is renewed with itself
when a third of its lifetime is left.
"""

from __future__ import annotations

import hmac
import logging
import os
import ssl

import aiohttp
import msgspec

from corral.pki import CA_PATH, JOIN_PATH, NODE_PREFIX, NODES_GROUP
from corral.pki.ca import ca_pin, can_serve, make_csr, needs_renewal, new_key
from corral.pki.files import private_dir, write_private
from corral.pki.kubeconfig import Credentials, build_kubeconfig, load_credentials, token_flaw

__all__ = ["JoinError", "join_token_problem", "node_credentials", "renew", "kubeconfig_path",
           "request_node_certificate", "fetch_ca"]

log = logging.getLogger(__name__)

_TIMEOUT = aiohttp.ClientTimeout(total=30)


class JoinError(Exception):
    """Joining (or renewing) failed; the message says what to check."""


def kubeconfig_path(data_dir: str) -> str:
    return os.path.join(data_dir, "kubeconfig")


async def fetch_ca(server: str, pin: str) -> bytes:
    """The server's CA, accepted only if it matches ``pin``; nothing else is read unverified."""
    no_verify = ssl.create_default_context()
    no_verify.check_hostname = False
    no_verify.verify_mode = ssl.CERT_NONE
    try:
        async with aiohttp.ClientSession(timeout=_TIMEOUT) as session:
            async with session.get(server + CA_PATH, ssl=no_verify) as resp:
                body = await resp.content.read(64 * 1024)
                if resp.status != 200:
                    raise JoinError(f"{server}{CA_PATH} answered {resp.status}; is this a corral server?")
    except aiohttp.ClientError as exc:
        raise JoinError(f"cannot reach {server}: {exc}") from None
    try:
        actual = ca_pin(body)
    except ValueError:
        raise JoinError(f"{server}{CA_PATH} did not answer with a certificate") from None
    if not hmac.compare_digest(actual, pin.strip().lower()):
        raise JoinError(f"the server's CA has hash {actual}, not the {pin} given with --ca-cert-hash: "
                        "not the expected cluster (or someone in between); not joining")
    return body


async def request_node_certificate(client, node_name: str) -> tuple[bytes, bytes, bytes]:
    """A new key and the certificate the server signs for ``system:node:NAME``: (cert, key, ca).
    ``client`` authenticates with a join token, or as that node (renewal)."""
    from cryptography.hazmat.primitives import serialization

    from corral.client.rest import ApiError, ConnectionFailed

    key = new_key()
    csr = make_csr(key, NODE_PREFIX + node_name, [NODES_GROUP])
    try:
        answer = msgspec.json.decode(await client.request("POST", JOIN_PATH, body={"csr": csr.decode()}))
    except ApiError as exc:
        hint = " (is the join token right, and not revoked or expired?)" if exc.code == 401 else ""
        raise JoinError(f"the server refused to sign: {exc.message}{hint}") from None
    except ConnectionFailed as exc:
        raise JoinError(str(exc)) from None
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return answer["certificate"].encode(), key_pem, answer["ca"].encode()


def join_token_problem(token: str, flag: str) -> str:
    """Why ``token``, given as ``flag``, cannot go in a request's header ("" if it can), never quoting it."""
    flaw = token_flaw(token)
    return f"{flag}: the token has {flaw}; a join token is one line, <id>.<secret>" if flaw else ""


async def _sign(creds: Credentials, node_name: str) -> tuple[bytes, bytes, bytes]:
    from corral.client.rest import Client

    async with Client(credentials=creds, user_agent="corral-agent") as client:
        return await request_node_certificate(client, node_name)


def _save(data_dir: str, server: str, node_name: str, cert: bytes, key: bytes, ca: bytes) -> Credentials:
    private_dir(data_dir)
    path = kubeconfig_path(data_dir)
    write_private(path, build_kubeconfig(server, ca, user=NODE_PREFIX + node_name, cert_pem=cert, key_pem=key))
    return Credentials(server, ca, cert_pem=cert, key_pem=key, source=path)


async def node_credentials(data_dir: str, node_name: str, *, server: str | None, token: str | None,
                           ca_cert_hash: str | None) -> Credentials:
    """The agent's credential: the one kept in ``data_dir`` (renewed if due), else a new one by joining."""
    path = kubeconfig_path(data_dir)
    if os.path.exists(path):
        creds = load_credentials(path)
        assert creds is not None
        if server:
            creds = creds.with_server(server)
        if needs_renewal(creds.cert_pem) or not can_serve(creds.cert_pem, node_name):
            creds = await renew(creds, data_dir, node_name)
        return creds
    if not server:
        raise JoinError("--server is needed to join a cluster (no credential kept in "
                        f"{path} yet)")
    if not token or not ca_cert_hash:
        raise JoinError(f"to join, give --token and --ca-cert-hash (`corral server` prints both; no credential "
                        f"kept in {path} yet)")
    if problem := join_token_problem(token, "--token"):
        raise JoinError(problem)
    ca = await fetch_ca(server, ca_cert_hash)
    cert, key, ca = await _sign(Credentials(server, ca, token=token, source="--token"), node_name)
    log.info("joined %s as system:node:%s", server, node_name)
    return _save(data_dir, server, node_name, cert, key, ca)


async def renew(creds: Credentials, data_dir: str, node_name: str) -> Credentials:
    """A new certificate, asked for with the current one; kept in ``data_dir``."""
    cert, key, ca = await _sign(creds, node_name)
    log.info("renewed the node certificate of %s", node_name)
    return _save(data_dir, creds.server.split(",")[0], node_name, cert, key, ca)
