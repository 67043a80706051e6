"""Secrets encrypted at rest: the store file never holds a Secret's values (nor the copy kubectl
apply leaves in an annotation), every read gives them back as written, and a server without the key
refuses to start rather than serve what it cannot read."""

from __future__ import annotations

import asyncio
import base64
import os
import sqlite3

import pytest

from corral.store.base import Event, EventType, Record
from corral.store.encrypted import SEALING_KEY, EncryptedStore, SealError, Sealer, load_keys, open_encrypted
from corral.store.sqlite import SQLiteStore
from corral.testing.server import running_server

VALUE = "hunter2-correct-horse"
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {
    "name": "db", "namespace": "default", "labels": {"app": "shop"},
    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": f'{{"stringData":{{"password":"{VALUE}"}}}}'}},
    "stringData": {"password": VALUE}}


def _store_bytes(data_dir: str) -> bytes:
    """Everything the SQLite store file and its write-ahead log hold, as a thief would read them."""
    out = b""
    for name in os.listdir(data_dir):
        if name.startswith("corral.db"):
            with open(os.path.join(data_dir, name), "rb") as f:
                out += f.read()
    return out


async def test_a_secret_is_not_in_the_store_file_but_every_read_gives_it_back(tmp_path):
    data_dir = str(tmp_path / "server")
    async with running_server(data_dir, scheduler=False, controllers=False) as server:
        async with server.client() as client:
            watch = client.watch("secrets", "default", resource_version="0", raw=True)
            created = await client.create(SECRET, raw=True)
            assert base64.b64decode(created["data"]["password"]).decode() == VALUE
            got = await client.get("secrets", "db", "default", raw=True)
            assert got["data"] == created["data"] and got["metadata"]["labels"] == {"app": "shop"}
            assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
            listed = await client.list("secrets", "default", raw=True)
            assert [s["data"] for s in listed.items] == [created["data"]]
            event = await asyncio.wait_for(watch.__anext__(), 10)
            assert event.object["data"] == created["data"]
            await watch.aclose()
            cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}, "data": {"k": "visible-value"}}
            await client.create(cm, "default")
        stored = _store_bytes(data_dir)
        assert VALUE.encode() not in stored and base64.b64encode(VALUE.encode()) not in stored
        assert b"last-applied-configuration" not in stored  # the annotation, with the value in it, sealed too
        assert b"visible-value" in stored  # ConfigMaps are not secret: the check above can fail
        raw = sqlite3.connect(os.path.join(data_dir, "corral.db")).execute(
            "SELECT value FROM log WHERE key = '/core/secrets/default/db'").fetchall()
        assert raw and all(b'"sealed":"aesgcm:v1:key1:' in v for (v,) in raw)
    assert oct(os.stat(os.path.join(data_dir, "encryption.key")).st_mode & 0o777) == "0o600"


async def test_a_server_without_the_key_refuses_to_start_naming_the_key_file(tmp_path):
    data_dir = str(tmp_path / "server")
    async with running_server(data_dir, scheduler=False, controllers=False) as server:
        async with server.client() as client:
            await client.create(SECRET, raw=True)
    other = str(tmp_path / "other.key")
    with pytest.raises(ValueError, match=r"sealed with key 'key1', which .*other.key does not hold"):
        async with running_server(data_dir, scheduler=False, controllers=False, encryption_key_file=other):
            pass
    # A rotation: a new first key, the old one kept to read what it sealed
    old = open(os.path.join(data_dir, "encryption.key")).read()
    with open(other, "w") as f:
        f.write(f"key2:{base64.b64encode(os.urandom(32)).decode()}\n{old}")
    async with running_server(data_dir, scheduler=False, controllers=False, encryption_key_file=other) as server:
        async with server.client() as client:
            got = await client.get("secrets", "db", "default", raw=True)
            assert base64.b64decode(got["data"]["password"]).decode() == VALUE
            got["data"]["other"] = base64.b64encode(b"x").decode()
            await client.update(got, raw=True)
    raw = sqlite3.connect(os.path.join(data_dir, "corral.db")).execute(
        "SELECT value FROM log WHERE key = '/core/secrets/default/db' ORDER BY rev DESC LIMIT 1").fetchone()[0]
    assert b'"sealed":"aesgcm:v1:key2:' in raw


async def test_values_from_before_encryption_read_as_written_and_a_moved_ciphertext_does_not_open(tmp_path):
    inner = await SQLiteStore.open(str(tmp_path / "s.db"))
    try:
        before = await inner.create("/core/secrets/default/old", {"metadata": {"name": "old"}, "data": {"a": "Yg=="}})
        store = await open_encrypted(inner, str(tmp_path / "k"))
        assert (await store.get(before.key)).obj["data"] == {"a": "Yg=="}
        sealed = await store.create("/core/secrets/default/new", {"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": "new", "namespace": "default", "labels": {"a": "b"}}, "data": {"a": "Yw=="}})
        envelope = (await inner.get(sealed.key)).obj
        # all the store file shows of it: what it is and its name, for tools that read the store
        assert set(envelope) == {"apiVersion", "kind", "metadata", "sealed"}
        assert (envelope["apiVersion"], envelope["kind"]) == ("v1", "Secret")
        assert {k: v for k, v in envelope["metadata"].items() if k != "resourceVersion"} == {
            "name": "new", "namespace": "default"}  # not its labels: they may tell too much
        opened = await store.get(sealed.key)
        assert opened.obj["data"] == {"a": "Yw=="} and opened.obj["metadata"]["resourceVersion"] == str(opened.revision)
        moved = await inner.create("/core/secrets/default/moved", envelope)  # the ciphertext under another key
        with pytest.raises(SealError, match="cannot be opened"):
            await store.get(moved.key)
        foreign = {**envelope, "sealed": envelope["sealed"].replace(":key1:", ":gone:")}
        await inner.create("/core/secrets/default/foreign", foreign)
        with pytest.raises(SealError) as refused:
            await store.get("/core/secrets/default/foreign")
        assert str(refused.value) == ("/core/secrets/default/foreign is sealed with key 'gone', which is not in the "
                                      "encryption key file")
    finally:
        await inner.close()


async def test_secrets_written_together_are_sealed_each_and_read_back_opened(tmp_path):
    inner = await SQLiteStore.open(str(tmp_path / "s.db"))
    try:
        store = await open_encrypted(inner, str(tmp_path / "k"))
        secret = await store.create("/core/secrets/default/s", {"metadata": {"name": "s"}, "data": {"a": "Yg=="}})
        plain = await store.create("/core/configmaps/default/c", {"metadata": {"name": "c"}, "data": {"k": "v"}})
        outcomes = await store.update_many([
            (secret.key, {"metadata": {"name": "s"}, "data": {"a": VALUE}}, secret.revision),
            (plain.key, {"metadata": {"name": "c"}, "data": {"k": "w"}}, plain.revision),
            (secret.key, {"metadata": {"name": "s"}}, secret.revision),  # a stale revision: refused
        ])
        assert outcomes[0].obj["data"] == {"a": VALUE} and outcomes[1].obj["data"] == {"k": "w"}
        assert type(outcomes[2]).__name__ == "Conflict"
        assert "sealed" in (await inner.get(secret.key)).obj and VALUE.encode() not in (await inner.get(secret.key)).value
        assert (await inner.get(plain.key)).obj["data"] == {"k": "w"}
        assert (await store.get(secret.key)).obj["data"] == {"a": VALUE}
    finally:
        await inner.close()


@pytest.mark.parametrize("line", [
    pytest.param(f"key1:{base64.b64encode(os.urandom(16)).decode()}", id="16 bytes"),
    pytest.param(f":{base64.b64encode(os.urandom(32)).decode()}", id="no name"),
    pytest.param(f"key:1:{base64.b64encode(os.urandom(32)).decode()}", id="a colon in the name"),
    pytest.param(f"key1:{base64.b64encode(os.urandom(32)).decode()[:20]}*{base64.b64encode(os.urandom(32)).decode()[20:]}",
                 id="a character base64 does not have"),
])
def test_a_key_file_that_is_not_name_and_32_bytes_is_refused_naming_the_line(tmp_path, line):
    path = tmp_path / "keys"
    path.write_text(f"# comment\n{line}\n")
    with pytest.raises(ValueError, match=r"keys, line 2: expected NAME:BASE64 of a 32-byte key"):
        load_keys(str(path))
    keys = load_keys(str(tmp_path / "made"))
    assert len(keys) == 1 and len(keys[0][1]) == 32
    assert isinstance(EncryptedStore(None, Sealer(keys)), EncryptedStore)  # type: ignore[arg-type]


def test_a_key_file_of_comments_only_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "keys"
    path.write_text("# the cluster's keys\n\n")
    with pytest.raises(ValueError, match=r"keys: no key in the file$"):
        load_keys(str(path))


def test_the_recorded_digest_of_a_key_is_pinned():
    """The store records the sealing key's digest and a server checks its key file against it at
    start: a digest computed another way after an upgrade would refuse the cluster's own key file."""
    sealer = Sealer([("key1", bytes(range(32))), ("old", bytes(32))])
    assert sealer.sealing == {"name": "key1",
                              "sha256": "5541955b769050fa9d1f87e64ce6ccf0a3382cf1e8bae7f2ba5d73e46303e465"}


def test_a_key_file_is_read_as_utf_8_whatever_the_locale(tmp_path):
    """An operator's comment in UTF-8 (a name with an accent) reads the same under a locale whose
    encoding is ASCII (the C locale, as a process gets with Python's UTF-8 mode and coercion off)."""
    import locale

    path = tmp_path / "keys"
    key = os.urandom(32)
    path.write_text(f"# tournée le 1er mars par Zoë\nkey1:{base64.b64encode(key).decode()}\n", encoding="utf-8")
    before = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        assert locale.getencoding() == "ANSI_X3.4-1968"  # ASCII: what open() would decode with
        assert load_keys(str(path)) == [("key1", key)]
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


def key_line(name: str) -> str:
    return f"{name}:{base64.b64encode(os.urandom(32)).decode()}\n"


async def test_the_sealing_key_is_recorded_once_and_again_when_a_new_first_key_seals(tmp_path):
    inner = await SQLiteStore.open(str(tmp_path / "s.db"))
    try:
        keys = tmp_path / "keys"
        await open_encrypted(inner, str(keys))
        first = await inner.get(SEALING_KEY)
        assert first.obj["name"] == "key1"
        await open_encrypted(inner, str(keys))  # a restart with the same keys writes nothing
        assert (await inner.get(SEALING_KEY)).revision == first.revision
        rotated_file = tmp_path / "rotated"
        new = key_line("key2")
        rotated_file.write_text(new + keys.read_text())  # a new first key, the old one kept
        await open_encrypted(inner, str(rotated_file))
        rotated = await inner.get(SEALING_KEY)
        assert rotated.obj["name"] == "key2" and rotated.revision > first.revision
        # The old key's Secrets sealed again (as a rotation does), the old key may go: the store's
        # record names the new one, so a server holding it alone starts.
        only_new = tmp_path / "only-new"
        only_new.write_text(new)
        await open_encrypted(inner, str(only_new))
    finally:
        await inner.close()


@pytest.mark.parametrize("recorded_before", [False, True], ids=["a first server", "a rotation"])
async def test_a_sealing_key_another_server_records_meanwhile_is_checked_not_overwritten(
        tmp_path, monkeypatch, recorded_before):
    """Between reading the store's sealing record and writing its own, another server records a key
    this one does not hold: the write must lose (compare-and-swap), and this server refuse to start."""
    inner = await SQLiteStore.open(str(tmp_path / "s.db"))
    try:
        keys = tmp_path / "keys"
        keys.write_text(key_line("mine"))
        if recorded_before:
            old = tmp_path / "old"
            old.write_text(key_line("old"))
            keys.write_text(keys.read_text() + old.read_text())
            await open_encrypted(inner, str(old))
        theirs = {"name": "theirs", "sha256": "0" * 64}
        real_get, raced = inner.get, []

        async def get_while_another_writes(key: str):
            record = await real_get(key)
            if not raced:
                raced.append(key)
                if record is None:
                    await inner.create(SEALING_KEY, theirs)
                else:
                    await inner.update(SEALING_KEY, theirs, record.revision)
            return record

        monkeypatch.setattr(inner, "get", get_while_another_writes)
        with pytest.raises(ValueError, match="sealed with key 'theirs', which .*keys does not hold"):
            await open_encrypted(inner, str(keys))
        assert raced == [SEALING_KEY] and (await real_get(SEALING_KEY)).obj == theirs
    finally:
        await inner.close()


async def test_pages_and_watch_events_of_sealed_values_keep_everything_but_the_ciphertext(tmp_path):
    """A list keeps its paging (its revision, whether more follows); a watch keeps each event's type,
    passes progress on when asked, and stops its backend's watch when it is closed."""
    inner = await SQLiteStore.open(str(tmp_path / "s.db"))
    store = await open_encrypted(inner, str(tmp_path / "k"))
    try:
        start = inner.revision
        events = store.watch("/core/secrets/", start)
        first = asyncio.ensure_future(events.__anext__())
        for name in ("a", "b"):
            await store.create(f"/core/secrets/default/{name}", {"metadata": {"name": name}, "data": {"k": "dg=="}})
        await store.delete("/core/secrets/default/a")
        seen = [(e.type.name, e.record.key, e.record.obj.get("data")) for e in await asyncio.wait_for(first, 5)]
        while len(seen) < 3:
            seen += [(e.type.name, e.record.key, e.record.obj.get("data"))
                     for e in await asyncio.wait_for(events.__anext__(), 5)]
        assert seen == [("ADDED", "/core/secrets/default/a", {"k": "dg=="}),
                        ("ADDED", "/core/secrets/default/b", {"k": "dg=="}),
                        ("DELETED", "/core/secrets/default/a", {"k": "dg=="})]
        assert len(inner._watchers) == 1
        await events.aclose()
        assert len(inner._watchers) == 0  # the backend's watch ended with it

        page = await store.list("/core/secrets/", limit=1)
        assert ([r.obj["data"] for r in page.items], page.more, page.revision) == ([{"k": "dg=="}], False, inner.revision)
        await store.create("/core/secrets/default/c", {"metadata": {"name": "c"}, "data": {"k": "dw=="}})
        page = await store.list("/core/secrets/", limit=1)
        assert ([r.key for r in page.items], page.more) == (["/core/secrets/default/b"], True)

    finally:
        await inner.close()

    class Asked:  # a backend that only says how it was asked to watch
        async def watch(self, prefix, from_revision, *, progress=False, last_states=True):
            yield [Event(EventType.ADDED, Record(f"{prefix}{from_revision}:{progress}:{last_states}", 1, {}))]
            # a Secret's delete whose last state the backend left to the watcher: passed on as it is
            yield [Event(EventType.DELETED, Record("/core/secrets/default/gone", 2, b""))]

    wrapped = EncryptedStore(Asked(), Sealer(load_keys(str(tmp_path / "k"))))
    assert [e.record.key for b in [b async for b in wrapped.watch("/p/", 7, progress=True)] for e in b][0] == \
        "/p/7:True:True"
    assert [e.record.key for b in [b async for b in wrapped.watch("/p/", 7)] for e in b][0] == "/p/7:False:True"
    unread = [e.record for b in [b async for b in wrapped.watch("/p/", 7, last_states=False)] for e in b]
    assert [r.key for r in unread] == ["/p/7:False:False", "/core/secrets/default/gone"] and unread[1].value == b""
