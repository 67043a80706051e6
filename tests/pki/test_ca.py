"""The cluster CA and what it signs, checked with the X.509 library and a real TLS handshake."""

from __future__ import annotations

import base64
import datetime as dt
import socket
import ssl
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from corral.pki.ca import (
    CertificateAuthority, CertificateError, ca_pin, certificate_hosts, make_csr, needs_renewal, new_key, read_csr,
)


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority.generate()


def test_the_ca_is_a_ca_and_its_pin_is_the_sha256_of_its_public_key_info(ca):
    cert = x509.load_pem_x509_certificate(ca.cert_pem)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.pin.startswith("sha256:") and len(ca.pin) == 7 + 64
    assert ca.pin == ca_pin(ca.cert_pem) != CertificateAuthority.generate().pin
    assert cert.not_valid_after_utc - cert.not_valid_before_utc > dt.timedelta(days=3649)


def test_a_ca_key_that_is_not_the_certificates_is_refused(ca):
    other = CertificateAuthority.generate()
    with pytest.raises(CertificateError, match="does not belong"):
        CertificateAuthority(ca.cert_pem, other.key_pem)


def test_a_serving_certificate_names_every_host_and_only_serves(ca):
    issued = ca.issue_serving("corral-server", ["127.0.0.1", "::1", "localhost", "cp-1.example", "localhost"])
    assert certificate_hosts(issued.cert_pem) == {"127.0.0.1", "::1", "localhost", "cp-1.example"}
    cert = x509.load_pem_x509_certificate(issued.cert_pem)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_a_client_certificate_carries_the_user_as_cn_and_groups_as_o(ca):
    issued = ca.issue_client("system:node:n1", ["system:nodes", "extra"])
    cert = x509.load_pem_x509_certificate(issued.cert_pem)
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["system:node:n1"]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["system:nodes", "extra"]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert issued.key_pem.startswith(b"-----BEGIN PRIVATE KEY-----")


def test_a_signing_request_keeps_its_key_with_its_holder(ca):
    key = new_key()
    request = read_csr(make_csr(key, "system:node:n2", ["system:nodes"]))
    assert (request.common_name, request.organizations) == ("system:node:n2", ("system:nodes",))
    issued = ca.issue_client(request.common_name, request.organizations, public_key=request.public_key)
    assert issued.key_pem == b""
    assert x509.load_pem_x509_certificate(issued.cert_pem).public_key().public_numbers() == key.public_key().public_numbers()


@pytest.mark.parametrize("pem, message", [
    pytest.param(b"not a request", "not a PEM certificate signing request", id="garbage"),
    pytest.param(make_csr(new_key(), "a").replace(b"REQUEST", b"THING"), "not a PEM", id="another PEM type"),
])
def test_a_bad_signing_request_is_refused_with_a_reason(pem, message):
    with pytest.raises(CertificateError, match=message):
        read_csr(pem)


def test_a_request_whose_signature_does_not_match_its_key_is_refused():
    der = bytearray(x509.load_pem_x509_csr(make_csr(new_key(), "system:node:x")).public_bytes(Encoding.DER))
    der[-5] ^= 0xFF  # inside the signature
    pem = b"-----BEGIN CERTIFICATE REQUEST-----\n" + base64.encodebytes(bytes(der)) + b"-----END CERTIFICATE REQUEST-----\n"
    with pytest.raises(CertificateError):
        read_csr(pem)


def test_renewal_is_due_once_a_third_of_the_lifetime_is_left(ca):
    now = dt.datetime.now(dt.timezone.utc)
    pem = ca.issue_client("u", now=now, days=300).cert_pem
    assert not needs_renewal(pem, now=now + dt.timedelta(days=195))
    assert needs_renewal(pem, now=now + dt.timedelta(days=205))


def test_a_leaf_never_outlives_its_ca():
    now = dt.datetime.now(dt.timezone.utc)
    old_ca = CertificateAuthority.generate(now=now - dt.timedelta(days=3600))
    issued = old_ca.issue_client("u", now=now)
    assert issued.not_after <= x509.load_pem_x509_certificate(old_ca.cert_pem).not_valid_after_utc


def test_a_tls_client_trusting_the_ca_accepts_the_serving_certificate_and_another_ca_does_not(ca, tmp_path):
    issued = ca.issue_serving("corral-server", ["127.0.0.1"])
    (tmp_path / "s.pem").write_bytes(issued.cert_pem + issued.key_pem)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(tmp_path / "s.pem"))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve(n: int) -> None:
        for _ in range(n):
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.sendall(b"hi")
            except (ssl.SSLError, OSError):
                pass

    t = threading.Thread(target=serve, args=(2,), daemon=True)
    t.start()
    good = ssl.create_default_context(cadata=ca.cert_pem.decode())
    with socket.create_connection(("127.0.0.1", port)) as raw, good.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        assert tls.recv(2) == b"hi"
    wrong = ssl.create_default_context(cadata=CertificateAuthority.generate().cert_pem.decode())
    with socket.create_connection(("127.0.0.1", port)) as raw, pytest.raises(ssl.SSLCertVerificationError):
        wrong.wrap_socket(raw, server_hostname="127.0.0.1")
    t.join(5)
    listener.close()
