"""The cluster CA and the certificates it signs: serving certificates for servers and agents,
client certificates for users and nodes (CN = user, O = groups, as kube-apiserver reads them).

Keys are ECDSA P-256: small, fast to create and to verify, accepted by every TLS stack kubectl and
the Python clients use. The CA lives ten years, what it signs one year (renewed well before that,
see :func:`needs_renewal`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
from dataclasses import dataclass
from typing import Any, Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CertificateAuthority", "IssuedCertificate", "CertificateError", "ca_pin", "certificate_expiry",
    "certificate_hosts", "needs_renewal", "new_key", "make_csr", "read_csr", "SigningRequest", "peer_subject",
]

CA_DAYS = 3650
LEAF_DAYS = 365
_BACKDATE = dt.timedelta(minutes=5)  # a little clock skew between machines must not reject a new certificate


class CertificateError(ValueError):
    """A certificate, key or signing request that cannot be used; the message says why."""


@dataclass(frozen=True, slots=True)
class IssuedCertificate:
    cert_pem: bytes
    key_pem: bytes  # empty when the holder keeps its own key (a signed request)
    not_after: dt.datetime


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common_name: str, organizations: Iterable[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name(attrs + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _load_cert(pem: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise CertificateError(f"not a PEM certificate: {exc}") from None


def peer_subject(peercert: dict[str, Any] | None) -> tuple[str, tuple[str, ...]]:
    """(CN, the O's) of a peer certificate as :meth:`ssl.SSLSocket.getpeercert` gives it (the
    handshake has verified it): a client's user and groups, as kube-apiserver reads them."""
    common_name, organizations = "", []
    for rdn in (peercert or {}).get("subject") or ():
        for attr, value in rdn:
            if attr == "commonName":
                common_name = value
            elif attr == "organizationName":
                organizations.append(value)
    return common_name, tuple(organizations)


def ca_pin(cert_pem: bytes) -> str:
    """``sha256:<hex>`` of the certificate's SubjectPublicKeyInfo: what ``kubeadm join
    --discovery-token-ca-cert-hash`` and ``corral agent --ca-cert-hash`` compare."""
    spki = _load_cert(cert_pem).public_key().public_bytes(serialization.Encoding.DER,
                                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def certificate_expiry(cert_pem: bytes) -> dt.datetime:
    return _load_cert(cert_pem).not_valid_after_utc


def certificate_hosts(cert_pem: bytes) -> set[str]:
    """The DNS names and IP addresses a serving certificate is valid for."""
    try:
        san = _load_cert(cert_pem).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return set(san.get_values_for_type(x509.DNSName)) | {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}


def can_serve(cert_pem: bytes, name: str) -> bool:
    """Whether a TLS server may use the certificate under DNS name ``name`` (node certificates from
    before the agent endpoint served TLS may not: they are renewed)."""
    cert = _load_cert(cert_pem)
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return ExtendedKeyUsageOID.SERVER_AUTH in usages and name in names.get_values_for_type(x509.DNSName)


def needs_renewal(cert_pem: bytes, *, now: dt.datetime | None = None) -> bool:
    """True once less than a third of the certificate's lifetime is left (for a one-year
    certificate: four months before it expires), as kubelet's certificate manager does, roughly."""
    cert = _load_cert(cert_pem)
    now = now or _utcnow()
    lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
    return cert.not_valid_after_utc - now < lifetime / 3


def make_csr(key: ec.EllipticCurvePrivateKey, common_name: str, organizations: Iterable[str] = ()) -> bytes:
    """A PEM certificate signing request for ``key``: what a joining agent sends."""
    csr = x509.CertificateSigningRequestBuilder().subject_name(_name(common_name, organizations)).sign(
        key, hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True, slots=True)
class SigningRequest:
    common_name: str
    organizations: tuple[str, ...]
    public_key: ec.EllipticCurvePublicKey


def read_csr(pem: bytes) -> SigningRequest:
    """The subject and key of a PEM signing request whose signature holds; :class:`CertificateError` else."""
    try:
        csr = x509.load_pem_x509_csr(pem)
    except ValueError as exc:
        raise CertificateError(f"not a PEM certificate signing request: {exc}") from None
    if not csr.is_signature_valid:
        raise CertificateError("the signing request's signature does not match its key")
    key = csr.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise CertificateError("the signing request must carry an ECDSA key")
    cns = csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    if len(cns) != 1:
        raise CertificateError("the signing request must name exactly one common name")
    return SigningRequest(str(cns[0].value), tuple(str(o.value) for o in orgs), key)


class CertificateAuthority:
    """A CA certificate and its key, able to sign. Build with :meth:`generate` or from PEM."""

    def __init__(self, cert_pem: bytes, key_pem: bytes) -> None:
        self.cert_pem = cert_pem
        self.key_pem = key_pem
        self._cert = _load_cert(cert_pem)
        try:
            key = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError) as exc:
            raise CertificateError(f"the CA key cannot be read: {exc}") from None
        if key.public_key().public_numbers() != self._cert.public_key().public_numbers():
            raise CertificateError("the CA key does not belong to the CA certificate")
        self._key = key

    @classmethod
    def generate(cls, common_name: str = "corral-ca", *, now: dt.datetime | None = None) -> "CertificateAuthority":
        key = new_key()
        now = now or _utcnow()
        name = _name(common_name)
        cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE).not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))

    @property
    def pin(self) -> str:
        return ca_pin(self.cert_pem)

    def _leaf(self, subject: x509.Name, public_key, usages: list[x509.ObjectIdentifier], *, days: int,
              now: dt.datetime | None, sans: list[x509.GeneralName] | None = None) -> x509.Certificate:
        now = now or _utcnow()
        not_after = min(now + dt.timedelta(days=days), self._cert.not_valid_after_utc)
        builder = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(self._cert.subject).public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE).not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                         content_commitment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(self._key, hashes.SHA256())

    def issue_serving(self, common_name: str, hosts: Iterable[str], *, days: int = LEAF_DAYS,
                      now: dt.datetime | None = None) -> IssuedCertificate:
        """A TLS server certificate valid for ``hosts`` (IP addresses and DNS names)."""
        sans: list[x509.GeneralName] = []
        for host in dict.fromkeys(h for h in hosts if h):
            try:
                sans.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                sans.append(x509.DNSName(host))
        key = new_key()
        cert = self._leaf(_name(common_name), key.public_key(), [ExtendedKeyUsageOID.SERVER_AUTH], days=days,
                          now=now, sans=sans)
        return IssuedCertificate(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key), cert.not_valid_after_utc)

    def issue_client(self, user: str, groups: Iterable[str] = (), *, days: int = LEAF_DAYS,
                     now: dt.datetime | None = None, public_key: ec.EllipticCurvePublicKey | None = None,
                     serving_name: str = "") -> IssuedCertificate:
        """A TLS client certificate for ``user`` in ``groups``. With ``public_key`` (from a signing
        request) the holder keeps its key and ``key_pem`` is empty; without, a new key comes with it.
        ``serving_name``: the holder may also serve TLS with it under that DNS name (a node's agent
        endpoint, under the node's name, which is what the API server checks when it connects)."""
        key = None if public_key is not None else new_key()
        pub = public_key if public_key is not None else key.public_key()  # type: ignore[union-attr]
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] + ([ExtendedKeyUsageOID.SERVER_AUTH] if serving_name else [])
        sans: list[x509.GeneralName] = [x509.DNSName(serving_name)] if serving_name else []
        cert = self._leaf(_name(user, groups), pub, usages, days=days, now=now, sans=sans)
        return IssuedCertificate(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key) if key else b"",
                                 cert.not_valid_after_utc)

