"""Bearer token format, hashing and the stored object."""

from __future__ import annotations

import datetime as dt

import pytest

from corral.pki.tokens import JOIN, hash_secret, new_token, parse_token, secret_matches, token_object


def test_new_tokens_are_well_formed_and_different():
    a, b = new_token(), new_token()
    assert len(a.id) == 6 and len(a.secret) == 32 and a != b
    assert parse_token(str(a)) == a


@pytest.mark.parametrize("text", ["", "abcdef", "abcdef.", "ABCDEF.0123456789abcdef", "abcde.0123456789abcdef",
                                  "abcdef.0123456789abcde", "abcdef.0123456789abcdef.x", "abc def.0123456789abcdef",
                                  "abcdef.012345678-abcdef"])
def test_malformed_tokens_parse_to_nothing(text):
    assert parse_token(text) is None


def test_only_the_hash_is_stored_and_only_the_secret_matches_it():
    token = new_token()
    obj = token_object(token, user="alice", groups=["dev"], ttl=dt.timedelta(hours=1),
                       now=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc))
    assert token.secret not in str(obj)
    assert obj["metadata"]["name"] == token.id
    assert obj["spec"] == {"user": "alice", "groups": ["dev"], "purpose": "authentication",
                           "secretHash": hash_secret(token.secret), "expirationTimestamp": "2026-01-01T01:00:00Z"}
    assert secret_matches(token.secret, obj["spec"]["secretHash"])
    other = token.secret[:-1] + ("x" if token.secret[-1] != "x" else "y")
    assert not secret_matches(other, obj["spec"]["secretHash"])
    assert not secret_matches(token.secret, "")


def test_a_join_token_never_expires_unless_asked():
    obj = token_object(new_token(), user="system:bootstrap", purpose=JOIN)
    assert "expirationTimestamp" not in obj["spec"] and obj["spec"]["purpose"] == "join"
