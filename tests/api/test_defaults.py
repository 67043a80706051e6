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


def test_a_controller_revision_without_a_number_is_revision_0_as_in_kubernetes():
    from corral.api.defaults import apply_create_defaults, apply_update_defaults
    from corral.api.resources import by_kind

    revisions = by_kind("ControllerRevision")
    obj = {"metadata": {"name": "r"}, "data": {}}
    apply_create_defaults(revisions, obj, "default")
    assert obj["revision"] == 0
    obj = {"metadata": {"name": "r"}, "data": {}, "revision": None}  # a null written back on update
    apply_update_defaults(revisions, obj)
    assert obj["revision"] == 0
    obj = {"metadata": {"name": "r"}, "data": {}, "revision": 4}
    apply_update_defaults(revisions, obj)
    assert obj["revision"] == 4
