"""Bearer tokens: ``<id>.<secret>``, like kubeadm's bootstrap tokens (6 + 32 characters of [a-z0-9]).

The id names the Token object in the store; only a hash of the secret is stored, so reading the store
does not yield a usable token. Whoever creates a token (the server at first start, ``corral token
create``) makes the secret, stores the hash and hands the whole token to its holder once.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["TokenParts", "new_token", "parse_token", "hash_secret", "secret_matches", "token_object",
           "AUTHENTICATION", "JOIN"]

AUTHENTICATION = "authentication"
JOIN = "join"
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_FORMAT = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16,64})$")


@dataclass(frozen=True, slots=True)
class TokenParts:
    id: str
    secret: str

    def __str__(self) -> str:
        return f"{self.id}.{self.secret}"


def _random(n: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(n))


def new_token() -> TokenParts:
    return TokenParts(_random(6), _random(32))


def parse_token(text: str) -> TokenParts | None:
    """The parts of a well-formed token, else ``None`` (never an exception: the text is a client's)."""
    m = _FORMAT.match(text.strip())
    return TokenParts(m[1], m[2]) if m else None


def hash_secret(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()


def secret_matches(secret: str, stored_hash: str) -> bool:
    """Constant-time comparison of a presented secret with the stored hash."""
    return hmac.compare_digest(hash_secret(secret).encode(), (stored_hash or "").encode())


def token_object(token: TokenParts, *, user: str, groups: Iterable[str] = (), purpose: str = AUTHENTICATION,
                 ttl: dt.timedelta | None = None, description: str = "",
                 now: dt.datetime | None = None) -> dict[str, Any]:
    """The Token object to store for ``token`` (its secret only as a hash)."""
    spec: dict[str, Any] = {"user": user, "groups": list(groups), "purpose": purpose,
                            "secretHash": hash_secret(token.secret)}
    if ttl is not None:
        expires = (now or dt.datetime.now(dt.timezone.utc)) + ttl
        spec["expirationTimestamp"] = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
    if description:
        spec["description"] = description
    return {"apiVersion": "auth.corral.dev/v1", "kind": "Token", "metadata": {"name": token.id}, "spec": spec}
