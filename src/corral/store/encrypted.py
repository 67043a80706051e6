"""Encryption at rest: Secrets are sealed before they reach a backend and opened as they leave it,
as kube-apiserver's EncryptionConfiguration does with its ``aesgcm`` provider.

:class:`EncryptedStore` wraps any backend. A value under a sealed prefix is stored as an envelope
``{"apiVersion", "kind", "metadata": {"name", "namespace"}, "sealed": "aesgcm:v1:KEYNAME:BASE64"}``:
everything else of the object (data, labels, annotations — ``kubectl apply`` copies the whole object
into one) is AES-256-GCM ciphertext, bound to its store key so that it cannot be moved to another
object's. What is read back — a get, a list, a watch event, a write's answer — is the object as it
was written; values written before encryption was turned on are read as they are.

The key file holds one key per line, ``NAME:BASE64`` of 32 random bytes: the first line's key seals,
every line's key opens (add a new key first to rotate; drop the old one once every Secret has been
written again). :func:`load_keys` makes the file, mode 0600, when it does not exist.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
from typing import Any, AsyncIterator

import msgspec

from corral.store.base import Conflict, Event, KeyExists, ListResult, Record, Store, StoreError

__all__ = ["EncryptedStore", "Sealer", "SealError", "load_keys", "open_encrypted", "SEALED_PREFIXES", "KEY_FILE"]

SEALED_PREFIXES = ("/core/secrets/",)
KEY_FILE = "encryption.key"  # in the data directory, unless --encryption-key-file names another
# Which key the cluster's Secrets are sealed with (its name and a digest, never the key): servers
# sharing a store must hold it, and one that does not refuses to start instead of failing later.
SEALING_KEY = "/corral/encryption/sealing-key"
_SCHEME = "aesgcm:v1:"
_NONCE = 12
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class SealError(ValueError):
    """A sealed value this server cannot open (a key it does not hold, or damaged ciphertext)."""


def load_keys(path: str) -> list[tuple[str, bytes]]:
    """The keys in ``path`` (made, with one new key, when it does not exist); raises ``ValueError``
    naming the line that is not ``NAME:BASE64`` of 32 bytes."""
    if not os.path.exists(path):  # written whole, then linked in: a server starting beside never reads half
        made = f"{path}.{os.getpid()}.new"
        with open(os.open(made, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(f"key1:{base64.b64encode(secrets.token_bytes(32)).decode()}\n")
        try:
            os.link(made, path)
        except FileExistsError:
            pass  # another server made it first: that one is the cluster's
        finally:
            os.unlink(made)
    keys: list[tuple[str, bytes]] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, encoded = line.partition(":")
            try:
                key = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                key = b""
            if not name or len(key) != 32:
                raise ValueError(f"{path}, line {number}: expected NAME:BASE64 of a 32-byte key")
            keys.append((name, key))
    if not keys:
        raise ValueError(f"{path}: no key in the file")
    return keys


class Sealer:
    """AES-256-GCM under named keys: the first seals, all open."""

    def __init__(self, keys: list[tuple[str, bytes]]) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._ciphers = {name: AESGCM(key) for name, key in keys}
        self._name = keys[0][0]
        self.digests = {name: hashlib.sha256(b"corral sealing key\0" + key).hexdigest() for name, key in keys}

    @property
    def sealing(self) -> dict[str, str]:
        """What the store records of the key that seals: its name and digest."""
        return {"name": self._name, "sha256": self.digests[self._name]}

    def seal(self, store_key: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        nonce = secrets.token_bytes(_NONCE)
        sealed = self._ciphers[self._name].encrypt(nonce, _encode(obj), store_key.encode())
        return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                "metadata": {k: meta[k] for k in ("name", "namespace") if k in meta},
                "sealed": f"{_SCHEME}{self._name}:{base64.b64encode(nonce + sealed).decode()}"}

    def open(self, record: Record) -> Record:
        """``record`` as written: its envelope opened, resourceVersion the record's own."""
        obj = record.obj
        sealed = obj.get("sealed")
        if not isinstance(sealed, str):
            return record  # written before encryption was turned on
        name, _, payload = sealed[len(_SCHEME):].partition(":")
        cipher = self._ciphers.get(name) if sealed.startswith(_SCHEME) else None
        if cipher is None:
            raise SealError(f"{record.key} is sealed with key {name!r}, which is not in the encryption key file")
        try:
            raw = base64.b64decode(payload)
            plain = _decode(cipher.decrypt(raw[:_NONCE], raw[_NONCE:], record.key.encode()))
        except Exception:
            raise SealError(f"{record.key}: the sealed value cannot be opened (damaged, or another key "
                            f"named {name!r})") from None
        plain.setdefault("metadata", {})["resourceVersion"] = str(record.revision)
        return Record(record.key, record.revision, _encode(plain), plain)


class EncryptedStore:
    """A backend whose values under :data:`SEALED_PREFIXES` are sealed at rest. Everything else is
    the backend's own (attributes and methods not named here pass through)."""

    def __init__(self, inner: Store, sealer: Sealer, prefixes: tuple[str, ...] = SEALED_PREFIXES) -> None:
        self._inner = inner
        self._sealer = sealer
        self._prefixes = prefixes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:  # settings (quota_bytes, ...) are the backend's
        if name.startswith("_") or hasattr(type(self), name):
            object.__setattr__(self, name, value)
        else:
            setattr(self._inner, name, value)

    def _sealed(self, key: str) -> bool:
        return key.startswith(self._prefixes)

    def _open(self, record: Record) -> Record:
        # (an empty value: a DELETED event without its last state, watched with last_states=False)
        return self._sealer.open(record) if record.value and self._sealed(record.key) else record

    def _seal(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        return self._sealer.seal(key, obj) if self._sealed(key) else obj

    async def create(self, key: str, obj: dict[str, Any]) -> Record:
        return self._open(await self._inner.create(key, self._seal(key, obj)))

    async def update(self, key: str, obj: dict[str, Any], expected_revision: int, *,
                     fence: tuple[str, int] | None = None) -> Record:
        return self._open(await self._inner.update(key, self._seal(key, obj), expected_revision, fence=fence))

    async def update_many(self, writes: list[tuple[str, dict[str, Any], int]], *,
                          fence: tuple[str, int] | None = None) -> list[Record | StoreError]:
        outcomes = await self._inner.update_many([(key, self._seal(key, obj), expected) for key, obj, expected in writes],
                                                 fence=fence)
        return [outcome if isinstance(outcome, BaseException) else self._open(outcome) for outcome in outcomes]

    async def delete(self, key: str, expected_revision: int | None = None) -> Record:
        return self._open(await self._inner.delete(key, expected_revision))

    async def get(self, key: str) -> Record | None:
        record = await self._inner.get(key)
        return None if record is None else self._open(record)

    async def list(self, prefix: str, *, revision: int = 0, limit: int = 0, start_after: str = "") -> ListResult:
        result = await self._inner.list(prefix, revision=revision, limit=limit, start_after=start_after)
        if not any(self._sealed(r.key) for r in result.items):
            return result
        return ListResult([self._open(r) for r in result.items], result.revision, result.more)

    async def watch(self, prefix: str, from_revision: int, *, progress: bool = False,
                    last_states: bool = True) -> AsyncIterator[list[Event]]:
        events = self._inner.watch(prefix, from_revision, progress=progress, last_states=last_states)
        try:
            async for batch in events:
                if any(self._sealed(e.record.key) for e in batch):
                    batch = [Event(e.type, self._open(e.record)) for e in batch]  # _open leaves the rest
                yield batch
        finally:
            await events.aclose()  # every backend's watch is an async generator


async def open_encrypted(inner: Store, key_file: str) -> EncryptedStore:
    """``inner`` with Secrets sealed under the keys of ``key_file`` (made when missing). Raises
    ``ValueError`` when the file is wrong, or when the store's Secrets are sealed with a key it does
    not hold (another server's key file, not copied here)."""
    sealer = Sealer(load_keys(key_file))
    for _ in range(3):
        record = await inner.get(SEALING_KEY)
        recorded = record.obj if record is not None else None
        if recorded is not None and recorded.get("sha256") not in sealer.digests.values():
            raise ValueError(f"the cluster's Secrets are sealed with key {recorded.get('name')!r}, which "
                             f"{key_file} does not hold: give every server of the cluster the same key file "
                             f"(--encryption-key-file)")
        if recorded is not None and {k: recorded.get(k) for k in ("name", "sha256")} == sealer.sealing:
            break
        try:  # the first server, or a new first key (rotation): the store says which key seals now
            if record is None:
                await inner.create(SEALING_KEY, dict(sealer.sealing))
            else:
                await inner.update(SEALING_KEY, dict(sealer.sealing), record.revision)
            break
        except (KeyExists, Conflict):
            continue  # another server wrote it at the same moment: check again
    return EncryptedStore(inner, sealer)
