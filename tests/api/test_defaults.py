"""Defaults the server fills in on create."""

from __future__ import annotations

import uuid

from corral.api.defaults import new_uid


def test_uids_are_random_version_4_uuids_in_their_canonical_form():
    uids = [new_uid() for _ in range(2000)]
    assert len(set(uids)) == len(uids)
    for uid in uids:
        parsed = uuid.UUID(uid)
        assert str(parsed) == uid and parsed.version == 4 and parsed.variant == uuid.RFC_4122
