"""What a server needs before it listens: the cluster CA, its serving certificate, the admin
credential and the join token; created on first start, reused after, renewed before expiry.

Where things are kept:

- the CA (certificate and key) in the cluster store under :data:`CA_KEY`, created once by whichever
  server starts first; every server sharing that store (one etcd) signs with it, so one kubeconfig
  and one ``--ca-cert-hash`` hold for all of them. A CA placed in ``<data-dir>/pki/ca.crt`` and
  ``ca.key`` before the first start is used instead of a new one (bring your own CA).
- in the data directory (0700): ``pki/ca.crt``, this server's ``pki/server.crt`` / ``server.key``,
  ``admin.kubeconfig`` and ``join-token`` (0600). Tokens themselves live in the store, hashed.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
import socket
import ssl
from dataclasses import dataclass
from typing import Awaitable, Callable, Iterable

from corral.api.defaults import apply_create_defaults
from corral.api.resources import by_kind
from corral.pki import MASTERS_GROUP
from corral.pki.ca import CertificateAuthority, CertificateError, certificate_hosts, needs_renewal
from corral.pki.files import private_dir, write_private
from corral.pki.kubeconfig import KubeconfigError, build_kubeconfig, default_kubeconfig_path, load_credentials
from corral.pki.tokens import AUTHENTICATION, JOIN, new_token, parse_token, secret_matches, token_object
from corral.store import KeyExists, Store

__all__ = ["ServerPKI", "prepare_tls", "write_first_credentials", "create_token", "CA_KEY", "ADMIN_USER",
           "serving_hosts", "is_wildcard", "machine_addresses", "primary_address"]

log = logging.getLogger(__name__)

CA_KEY = "/corral/pki/cluster-ca"
ADMIN_USER = "admin"
ADMIN_GROUPS = (MASTERS_GROUP,)
USER_KUBECONFIG_MARK = "# written by corral server for the data directory "


@dataclass(slots=True)
class ServerPKI:
    ca: CertificateAuthority
    pki_dir: str
    ssl_context: ssl.SSLContext
    hosts: list[str]  # what the serving certificate covers
    admin_token: str = ""
    join_token: str = ""
    admin_kubeconfig: str = ""  # its path

    @property
    def ca_file(self) -> str:
        return os.path.join(self.pki_dir, "ca.crt")

    def renew_serving(self) -> bool:
        """Reissue the serving certificate if it is due; new connections get the new one at once.
        True if it was renewed."""
        cert_file, key_file = (os.path.join(self.pki_dir, f) for f in ("server.crt", "server.key"))
        if _serving_ok(cert_file, self.ca, self.hosts):
            return False
        _issue_serving(self.ca, cert_file, key_file, self.hosts)
        self.ssl_context.load_cert_chain(cert_file, key_file)
        return True


def is_wildcard(host: str) -> bool:
    return host in ("", "0.0.0.0", "::")


def machine_addresses(*, ipv6: bool = True) -> list[str]:
    """This machine's addresses: each interface's IPv4 address and (with ``ipv6``) its global IPv6
    addresses (Linux; elsewhere none). A server listening on every interface must be reachable, and
    its certificate valid, at each of them."""
    out: list[str] = []
    try:
        import fcntl
        import struct

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for _, name in socket.if_nameindex():
                try:
                    packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
                except OSError:  # no IPv4 address on this interface
                    continue
                out.append(socket.inet_ntoa(packed[20:24]))
    except (ImportError, OSError):
        pass
    if not ipv6:
        return out
    try:
        with open("/proc/net/if_inet6") as f:  # address, index, prefix, scope, flags, name
            for line in f:
                fields = line.split()
                if len(fields) >= 4 and fields[3] == "00":  # global scope
                    out.append(str(ipaddress.IPv6Address(bytes.fromhex(fields[0]))))
    except (OSError, ValueError):
        pass
    return out


def primary_address() -> str | None:
    """The address other machines most likely reach this one at: the source of its default route
    (found by routing a UDP socket; nothing is sent). None without a route."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("203.0.113.1", 9))  # TEST-NET-3: routed like any address beyond the LAN
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def serving_hosts(listen_host: str, extra: Iterable[str] = ()) -> list[str]:
    """The names and addresses a client may reach this server by: the listen address (every local
    address when it is a wildcard), the host name, localhost and the loopback addresses, and ``extra``
    (``--tls-san``, the advertise URL's host)."""
    hosts = ["localhost", "127.0.0.1", "::1", socket.gethostname()]
    if not is_wildcard(listen_host):
        hosts.append(listen_host)
    else:
        hosts.extend(machine_addresses(ipv6=listen_host != "0.0.0.0"))
        try:
            for info in socket.getaddrinfo(socket.gethostname(), None):
                hosts.append(str(info[4][0]))
        except OSError:
            pass
    hosts.extend(extra)
    out = []
    for h in hosts:
        h = h.strip("[]")
        try:
            h = str(ipaddress.ip_address(h.split("%")[0]))
        except ValueError:
            pass
        if h and h not in out:
            out.append(h)
    return out


async def _cluster_ca(store: Store, pki_dir: str) -> CertificateAuthority:
    """The CA from the store; on the very first start, the operator's own or a new one, stored."""
    record = await store.get(CA_KEY)
    if record is None:
        own_cert, own_key = os.path.join(pki_dir, "ca.crt"), os.path.join(pki_dir, "ca.key")
        if os.path.exists(own_cert) and os.path.exists(own_key):
            with open(own_cert, "rb") as c, open(own_key, "rb") as k:
                ca = CertificateAuthority(c.read(), k.read())
            log.info("using the CA in %s for this new cluster", pki_dir)
        else:
            ca = CertificateAuthority.generate()
        try:
            record = await store.create(CA_KEY, {"certificate": ca.cert_pem.decode(), "key": ca.key_pem.decode()})
        except KeyExists:  # another server created it first: use that one
            record = await store.get(CA_KEY)
    assert record is not None
    try:
        return CertificateAuthority(record.obj["certificate"].encode(), record.obj["key"].encode())
    except (KeyError, AttributeError, CertificateError) as exc:
        raise RuntimeError(f"the cluster CA in the store ({CA_KEY}) cannot be used: {exc}") from None


def _serving_ok(cert_file: str, ca: CertificateAuthority, hosts: Iterable[str]) -> bool:
    """The certificate exists, this CA signed it, it covers ``hosts`` and is not yet due for renewal."""
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature

    try:
        with open(cert_file, "rb") as f:
            pem = f.read()
        x509.load_pem_x509_certificate(pem).verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
    except (OSError, ValueError, TypeError, InvalidSignature):  # missing, unreadable, or signed by another CA
        return False
    return not needs_renewal(pem) and set(hosts) <= certificate_hosts(pem)


def _issue_serving(ca: CertificateAuthority, cert_file: str, key_file: str, hosts: Iterable[str]) -> None:
    issued = ca.issue_serving("corral-server", hosts)
    write_private(key_file, issued.key_pem)
    write_private(cert_file, issued.cert_pem)


async def _token_valid(store: Store, text: str, purpose: str) -> bool:
    parts = parse_token(text)
    if parts is None:
        return False
    record = await store.get(by_kind("Token").key(None, parts.id))
    spec = (record.obj.get("spec") or {}) if record is not None else {}
    return bool(spec) and spec.get("purpose") == purpose and secret_matches(parts.secret, spec.get("secretHash", ""))


async def create_token(store: Store, *, user: str, groups: Iterable[str] = (), purpose: str = AUTHENTICATION,
                       ttl: dt.timedelta | None = None, description: str = "") -> str:
    """A new token stored (hashed) directly in the store; returns ``<id>.<secret>``."""
    resource = by_kind("Token")
    while True:
        token = new_token()
        obj = token_object(token, user=user, groups=groups, purpose=purpose, ttl=ttl, description=description)
        apply_create_defaults(resource, obj, None)
        try:
            await store.create(resource.key(None, token.id), obj)
            return str(token)
        except KeyExists:  # 36^6 ids: a clash is rare, and then another id
            continue


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


async def prepare_tls(store: Store, data_dir: str, *, listen_host: str, extra_hosts: Iterable[str] = ()) -> ServerPKI:
    """The CA, this server's serving certificate and its TLS context, created where missing."""
    private_dir(data_dir)
    pki_dir = private_dir(os.path.join(data_dir, "pki"))
    ca = await _cluster_ca(store, pki_dir)
    with open(os.path.join(pki_dir, "ca.crt"), "wb") as f:
        f.write(ca.cert_pem)
    hosts = serving_hosts(listen_host, extra_hosts)
    cert_file, key_file = os.path.join(pki_dir, "server.crt"), os.path.join(pki_dir, "server.key")
    if not _serving_ok(cert_file, ca, hosts):
        _issue_serving(ca, cert_file, key_file, hosts)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    ctx.load_verify_locations(cadata=ca.cert_pem.decode())
    ctx.verify_mode = ssl.CERT_OPTIONAL  # a client certificate is one way to authenticate, a token another
    # No TLS 1.3 session tickets: kubectl, client-go, aiohttp and corral's own clients never resume a
    # session, and issuing the two tickets OpenSSL sends by default is ~13 % of a handshake's CPU.
    ctx.num_tickets = 0
    return ServerPKI(ca, pki_dir, ctx, hosts)


async def write_first_credentials(pki: ServerPKI, store: Store, data_dir: str, server_url: str, *,
                                  user_kubeconfig: bool = True,
                                  settled: Callable[[], Awaitable[None]] | None = None) -> None:
    """The admin kubeconfig (and the user's, see :func:`_write_user_kubeconfig`) and the join token;
    the tokens they hold are kept across restarts while the store still has them. ``settled`` is
    awaited between storing new tokens and writing the files: the server's own view (its watch
    cache) must hold a token before anyone can read it from a file and present it."""
    admin_path = os.path.join(data_dir, "admin.kubeconfig")
    try:
        existing = load_credentials(admin_path) if os.path.exists(admin_path) else None
    except KubeconfigError:
        existing = None
    admin_token = ""
    if existing is not None and await _token_valid(store, existing.token, AUTHENTICATION):
        admin_token = existing.token
    if not admin_token:
        admin_token = await create_token(store, user=ADMIN_USER, groups=ADMIN_GROUPS,
                                         description=f"admin credential of {admin_path}")
    join_path = os.path.join(data_dir, "join-token")
    join_token = _read_text(join_path)
    new_join = not await _token_valid(store, join_token, JOIN)
    if new_join:
        join_token = await create_token(store, user="system:bootstrap", purpose=JOIN,
                                        description=f"join token of {join_path}")
    if settled is not None:
        await settled()
    kubeconfig = build_kubeconfig(server_url, pki.ca.cert_pem, user=ADMIN_USER, token=admin_token)
    write_private(admin_path, kubeconfig)
    if user_kubeconfig:
        _write_user_kubeconfig(data_dir, kubeconfig)
    if new_join:
        write_private(join_path, join_token + "\n")
    pki.admin_token, pki.join_token, pki.admin_kubeconfig = admin_token, join_token, admin_path


def _write_user_kubeconfig(data_dir: str, kubeconfig: str) -> None:
    """``~/.config/corral/kubeconfig`` when there is none, or when it is the one this data directory
    wrote before (so it follows a new cluster made in the same place); never over a user's own."""
    path = default_kubeconfig_path()
    mark = USER_KUBECONFIG_MARK + os.path.abspath(data_dir) + "\n"
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            if f.readline() != mark:
                return
    private_dir(os.path.dirname(path))
    write_private(path, mark + kubeconfig)
