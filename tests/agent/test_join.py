"""An agent joins with a join token and the CA's pin, keeps its credential and renews it."""

from __future__ import annotations

import datetime as dt
import os
import stat

import pytest

from corral.agent.credentials import JoinError, kubeconfig_path, node_credentials
from corral.client import Client
from corral.pki.ca import CertificateAuthority, can_serve, certificate_expiry
from corral.pki.kubeconfig import build_kubeconfig, load_credentials


async def test_joining_verifies_the_ca_pin_and_keeps_a_node_credential(server, tmp_path):
    data = str(tmp_path / "agent")
    creds = await node_credentials(data, "worker-1", server=server.url, token=server.pki.join_token,
                                   ca_cert_hash=server.pki.ca.pin)
    path = kubeconfig_path(data)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_credentials(path) == creds.__class__(**{**_fields(creds), "source": path})
    async with Client(credentials=creds) as node:
        await node.list("pods", field_selector="spec.nodeName=worker-1")
    # Started again on the same directory: no token needed, the same credential.
    again = await node_credentials(data, "worker-1", server=None, token=None, ca_cert_hash=None)
    assert again.cert_pem == creds.cert_pem


def _fields(creds) -> dict:
    return {name: getattr(creds, name) for name in creds.__slots__}


async def test_a_wrong_pin_stops_the_join_before_the_token_is_sent(server, tmp_path):
    data = str(tmp_path / "agent")
    other = CertificateAuthority.generate().pin
    with pytest.raises(JoinError) as err:
        await node_credentials(data, "w", server=server.url, token=server.pki.join_token, ca_cert_hash=other)
    assert server.pki.ca.pin in str(err.value) and other in str(err.value) and "not joining" in str(err.value)
    assert not os.path.exists(kubeconfig_path(data))


async def test_a_wrong_token_is_a_clear_error(server, tmp_path):
    with pytest.raises(JoinError, match="is the join token right"):
        await node_credentials(str(tmp_path / "a"), "w", server=server.url, token="abcdef.0123456789abcdef",
                               ca_cert_hash=server.pki.ca.pin)


async def test_a_token_pasted_with_a_line_break_is_named_and_not_sent(server, tmp_path):
    pasted = server.pki.join_token + "\n--ca-cert-hash"
    with pytest.raises(JoinError) as err:
        await node_credentials(str(tmp_path / "a"), "w", server=server.url, token=pasted,
                               ca_cert_hash=server.pki.ca.pin)
    assert str(err.value) == "--token: the token has a line break; a join token is one line, <id>.<secret>"
    assert server.pki.join_token not in str(err.value)


@pytest.mark.parametrize("token, pin", [(None, "sha256:00"), ("abcdef.0123456789abcdef", None)])
async def test_joining_needs_both_the_token_and_the_pin(server, tmp_path, token, pin):
    with pytest.raises(JoinError, match="give --token and --ca-cert-hash"):
        await node_credentials(str(tmp_path / "a"), "w", server=server.url, token=token, ca_cert_hash=pin)


async def test_a_kept_certificate_due_for_renewal_is_renewed_at_start(server, tmp_path):
    data = str(tmp_path / "agent")
    os.makedirs(data)
    old = server.pki.ca.issue_client("system:node:w", ["system:nodes"],
                                     now=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=300))
    with open(kubeconfig_path(data), "w") as f:
        f.write(build_kubeconfig(server.url, server.pki.ca.cert_pem, user="system:node:w",
                                 cert_pem=old.cert_pem, key_pem=old.key_pem))
    creds = await node_credentials(data, "w", server=None, token=None, ca_cert_hash=None)
    assert certificate_expiry(creds.cert_pem) > old.not_after + dt.timedelta(days=200)
    assert load_credentials(kubeconfig_path(data)).cert_pem == creds.cert_pem


async def test_a_kept_certificate_that_cannot_serve_the_agent_endpoint_is_renewed_at_start(server, tmp_path):
    """Node certificates from before the agent endpoint served TLS name no host and may not serve."""
    data = str(tmp_path / "agent")
    os.makedirs(data)
    old = server.pki.ca.issue_client("system:node:w", ["system:nodes"])  # fresh, but client-only
    assert not can_serve(old.cert_pem, "w")
    with open(kubeconfig_path(data), "w") as f:
        f.write(build_kubeconfig(server.url, server.pki.ca.cert_pem, user="system:node:w",
                                 cert_pem=old.cert_pem, key_pem=old.key_pem))
    creds = await node_credentials(data, "w", server=None, token=None, ca_cert_hash=None)
    assert creds.cert_pem != old.cert_pem and can_serve(creds.cert_pem, "w") and not can_serve(creds.cert_pem, "x")
