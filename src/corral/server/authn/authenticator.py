"""Authentication: who sent a request, from its bearer token or its TLS client certificate.

The first step of the request path (authenticate → limit → decode → authorise → admit), run by
the server's middleware before any handler reads a body. As kube-apiserver does:

- ``Authorization: Bearer <id>.<secret>``: the Token object named ``<id>`` (read from the watch
  cache, so a token created or revoked through any server counts at once on every server) holds
  the user, groups, purpose, expiry and the secret's hash, compared in constant time. A join token
  authenticates as ``system:bootstrap:<id>`` in ``system:bootstrappers``, which may only join.
- a client certificate the cluster CA signed (verified by the TLS handshake): CN is the user, each
  O a group.

Every authenticated user is also in ``system:authenticated``. Anything else is anonymous: only the
health endpoints, ``/version`` and the CA certificate answer it; everything else answers 401.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Callable

from corral.api.resources import by_kind
from corral.pki import CA_PATH
from corral.pki.ca import peer_subject
from corral.pki.tokens import AUTHENTICATION, JOIN, parse_token, secret_matches

__all__ = ["UserInfo", "Authenticator", "ANONYMOUS_PATHS", "BOOTSTRAPPERS", "AUTHENTICATED"]

AUTHENTICATED = "system:authenticated"
BOOTSTRAPPERS = "system:bootstrappers"
# What anyone may ask without credentials (kube-apiserver's system:public-info-viewer, and the CA
# that a joining agent checks against its pin before it trusts the server).
ANONYMOUS_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/version/", CA_PATH})


@dataclass(frozen=True, slots=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()

    def in_group(self, group: str) -> bool:
        return group in self.groups


def _expiry(spec: dict[str, Any]) -> dt.datetime | None:
    """When a token stops counting: ``None`` for never; an unreadable time counts as long past
    (refuse rather than trust)."""
    text = spec.get("expirationTimestamp")
    if not text:
        return None
    try:
        expires = dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    return expires if expires.tzinfo is not None else expires.replace(tzinfo=dt.timezone.utc)


def _user_of(token_id: str, spec: dict[str, Any]) -> UserInfo | None:
    """Who a token whose secret matched speaks for (``None``: a purpose it cannot be used for)."""
    if spec.get("purpose") == JOIN:
        return UserInfo(f"system:bootstrap:{token_id}", (BOOTSTRAPPERS, AUTHENTICATED))
    if spec.get("purpose") != AUTHENTICATION or not spec.get("user"):
        return None
    groups = tuple(str(g) for g in spec.get("groups") or ()) + (AUTHENTICATED,)
    return UserInfo(str(spec["user"]), groups)


MAX_REMEMBERED = 4096  # verified tokens kept; past it the memory starts again


@dataclass(frozen=True, slots=True)
class _Verified:
    """A token whose secret matched its Token object: valid for as long as that object is the one
    the cache holds (any change or deletion replaces it) and the token has not expired."""

    key: str
    record: Any
    user: UserInfo | None
    expires: dt.datetime | None


class Authenticator:
    """``authenticate(header, peercert)`` → the user, or ``None`` (anonymous or refused)."""

    def __init__(self, get_object: Callable[[str], Any], *,
                 clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc)) -> None:
        self._get = get_object  # store key → Record (with .obj) or None: the watch cache's get
        self._clock = clock
        self._tokens = by_kind("Token")
        # Hashing the secret and reading the object again on every request of a client cost ~5% of
        # a create; a verified token is remembered by its header until its object changes.
        self._verified: dict[str, _Verified] = {}

    def authenticate(self, authorization: str | None,
                     peercert: Callable[[], dict[str, Any] | None]) -> UserInfo | None:
        """``peercert`` is asked only when no token is presented (reading the certificate on every
        token-authenticated request would be wasted work on the hot path)."""
        if authorization:
            # A request that presents a token is judged by the token alone, as kube-apiserver's
            # union authenticator would find no other credential worth trying once it fails.
            return self.from_token(authorization)
        cert = peercert()
        return self.from_certificate(cert) if cert else None

    def holds(self, known: _Verified) -> bool:
        """Whether a token verified before still stands: its object unchanged, not expired."""
        return self._get(known.key) is known.record and (known.expires is None or known.expires > self._clock())

    def verified(self, authorization: str) -> _Verified | None:
        """What :meth:`from_token` remembers of this header (to check again with :meth:`holds`)."""
        return self._verified.get(authorization)

    def from_token(self, authorization: str) -> UserInfo | None:
        known = self._verified.get(authorization)
        if known is not None and self._get(known.key) is known.record:
            if known.expires is not None and known.expires <= self._clock():
                return None
            return known.user
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return None
        parts = parse_token(value)
        if parts is None:
            return None
        key = self._tokens.key(None, parts.id)
        record = self._get(key)
        if record is None:
            return None
        spec = record.obj.get("spec") or {}
        if not secret_matches(parts.secret, spec.get("secretHash") or ""):
            return None
        expires = _expiry(spec)
        if len(self._verified) >= MAX_REMEMBERED:
            self._verified.clear()
        self._verified[authorization] = _Verified(key, record, _user_of(parts.id, spec), expires)
        if expires is not None and expires <= self._clock():
            return None
        return self._verified[authorization].user

    @staticmethod
    def from_certificate(peercert: dict[str, Any]) -> UserInfo | None:
        """``peercert`` as :meth:`ssl.SSLSocket.getpeercert` gives it, for a certificate the
        handshake already verified against the cluster CA."""
        user, groups = peer_subject(peercert)
        if not user:
            return None
        return UserInfo(user, groups + (AUTHENTICATED,))
