"""The store's own channel: etcd over TLS, with a client certificate (etcd's ``--client-cert-auth``).

Real etcd members serve TLS with certificates signed by a CA of the test's own; each member of the
three-member cluster listens on its own loopback address (127.0.0.1, .2, .3) and its certificate
names that address alone, as members on three machines would have.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import pytest

from corral.pki.ca import CertificateAuthority
from corral.store import EventType, open_store
from corral.store import etcd as etcd_store
from corral.store.etcd import EtcdTLS
from corral.testing import ServerProcess
from corral.testing.etcd import EtcdCluster, EtcdProcess, MemberTLS
from corral.testing.process import child_env

HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]


class Certificates:
    """An etcd CA, a serving certificate per member address, and a client certificate, as files."""

    def __init__(self, directory) -> None:
        self.dir = directory
        self.ca = CertificateAuthority.generate("etcd-ca")
        self.ca_file = self._write("ca.crt", self.ca.cert_pem)
        client = self.ca.issue_client("corral-apiserver")
        self.client_cert, self.client_key = self._write("client.crt", client.cert_pem), self._write("client.key", client.key_pem)

    def _write(self, name: str, data: bytes) -> str:
        path = os.path.join(self.dir, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def member(self, name: str, host: str) -> MemberTLS:
        issued = self.ca.issue_serving(name, [host])
        return MemberTLS(self.ca_file, self._write(f"{name}.crt", issued.cert_pem),
                         self._write(f"{name}.key", issued.key_pem))

    def client(self) -> EtcdTLS:
        return EtcdTLS(self.ca_file, self.client_cert, self.client_key)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certificates(tmp_path_factory.mktemp("etcd-pki"))


@pytest.fixture(scope="module")
def tls_etcd(tmp_path_factory, certs):
    member = EtcdProcess(str(tmp_path_factory.mktemp("etcd-tls")), tls=certs.member("m0", "127.0.0.1")).start()
    yield member
    member.stop()


def obj(name: str) -> dict:
    return {"metadata": {"name": name, "uid": uuid.uuid4().hex}}


async def test_a_store_over_tls_with_a_client_certificate_writes_reads_and_watches(tls_etcd, certs):
    store = await open_store(tls_etcd.url, root=f"/t-{uuid.uuid4().hex[:12]}", etcd_tls=certs.client())
    try:
        watch = store.watch("/k/", store.revision)
        created = await store.create("/k/a", obj("a"))
        assert (await store.get("/k/a")).revision == created.revision
        batch = await asyncio.wait_for(anext(watch), 10)
        assert [(e.type, e.record.key) for e in batch] == [(EventType.ADDED, "/k/a")]
        await watch.aclose()
    finally:
        await store.close()


async def test_a_tls_etcd_is_not_reached_without_a_client_certificate_over_plaintext_or_trusting_another_ca(
        tls_etcd, certs, monkeypatch, tmp_path):
    monkeypatch.setattr(etcd_store, "RETRY_SECONDS", 0.5)
    stranger = CertificateAuthority.generate("someone-else")
    other_ca = tmp_path / "other-ca.crt"
    other_ca.write_bytes(stranger.cert_pem)
    for tls in (EtcdTLS(certs.ca_file),  # no client certificate: etcd's --client-cert-auth refuses
                None,  # plaintext to a TLS port
                EtcdTLS(str(other_ca), certs.client_cert, certs.client_key)):  # the member is not trusted
        with pytest.raises(ConnectionError, match="no etcd member answered"):
            await open_store(tls_etcd.url, etcd_tls=tls)


def test_the_tls_settings_are_checked_before_anything_is_dialled(tmp_path, certs):
    with pytest.raises(ValueError) as refused:
        EtcdTLS(certs.ca_file, certs.client_cert)
    assert str(refused.value) == "--etcd-certfile and --etcd-keyfile go together: give both or neither"
    with pytest.raises(ValueError, match=f"cannot read the etcd CA certificate {tmp_path}/missing.crt"):
        EtcdTLS(str(tmp_path / "missing.crt")).credentials()
    missing = str(tmp_path / "gone.pem")
    with pytest.raises(ValueError) as refused:
        EtcdTLS(certs.ca_file, missing, certs.client_key).credentials()
    assert str(refused.value) == f"cannot read the etcd client certificate {missing}: No such file or directory"
    with pytest.raises(ValueError) as refused:
        EtcdTLS(certs.ca_file, certs.client_cert, missing).credentials()
    assert str(refused.value) == f"cannot read the etcd client key {missing}: No such file or directory"
    not_pem = tmp_path / "ca.txt"
    not_pem.write_text("hello")
    with pytest.raises(ValueError, match="holds no PEM certificate"):
        EtcdTLS(str(not_pem)).credentials()
    with pytest.raises(ValueError, match="need an etcd store"):
        asyncio.run(open_store(f"sqlite://{tmp_path}/x.db", etcd_tls=certs.client()))


async def test_over_tls_the_store_moves_on_to_the_next_member_when_the_one_in_use_dies(tmp_path, certs):
    cluster = EtcdCluster(str(tmp_path / "etcd"), hosts=HOSTS,
                          tls=[certs.member(f"m{i}", host) for i, host in enumerate(HOSTS)]).start()
    store = await open_store(cluster.url, etcd_tls=certs.client())
    try:
        await store.create("/k/before", obj("before"))
        in_use = store._at
        cluster.members[in_use].kill()
        after = await store.create("/k/after", obj("after"))  # retried on a member whose name differs
        assert store._at != in_use
        assert (await store.get("/k/before")) is not None and (await store.get("/k/after")).revision == after.revision
    finally:
        await store.close()
        cluster.stop()


def test_corral_server_on_a_tls_etcd_serves_the_api(tmp_path, tls_etcd, certs):
    server = ServerProcess(str(tmp_path / "server"), "--store", tls_etcd.url, "--no-scheduler",
                           "--etcd-cafile", certs.ca_file, "--etcd-certfile", certs.client_cert,
                           "--etcd-keyfile", certs.client_key)
    with server:
        async def roundtrip():
            async with server.client() as client:
                await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "over-tls"}})
                return (await client.get("namespaces", "over-tls", raw=True))["metadata"]["name"]

        assert asyncio.run(roundtrip()) == "over-tls"


@pytest.mark.parametrize("args, message", [
    (["--etcd-certfile", "c.crt", "--etcd-keyfile", "c.key"], "need --etcd-cafile"),
    (["--etcd-cafile", "CA", "--etcd-certfile", "c.crt"], "give both or neither"),
    (["--etcd-cafile", "CA"], "need an etcd store"),
])
def test_the_server_refuses_etcd_tls_flags_that_cannot_work_in_one_line(tmp_path, certs, args, message):
    args = [certs.ca_file if a == "CA" else a for a in args]
    done = subprocess.run([sys.executable, "-m", "corral", "server", "--data-dir", str(tmp_path),
                           "--address", "127.0.0.1:0", "--no-write-kubeconfig", *args],
                          capture_output=True, text=True, timeout=30, env=child_env())
    assert done.returncode != 0
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


async def test_the_tls_client_opens_its_channel_with_the_plain_clients_options_and_call_deadline(monkeypatch):
    """A unit test (no etcd): aetcd opens plaintext channels only, so corral's TLS client opens its
    own; it must carry what the plaintext one does — the keepalive that finds a hung member, the
    message sizes, each call's deadline."""
    from unittest import mock

    import grpc

    opened: list[tuple] = []

    def secure_channel(target: str, credentials, options: list) -> mock.MagicMock:
        opened.append((target, credentials, options))
        return mock.MagicMock()  # the stubs are made on it; no call is sent

    monkeypatch.setattr(grpc.aio, "secure_channel", secure_channel)
    options = {"grpc.keepalive_time_ms": 10_000, "grpc.http2.ping_timeout_ms": 5_000}
    credentials = grpc.ssl_channel_credentials()
    plain = etcd_store._client("10.0.0.1", 2379, credentials=None, options=options)
    tls = etcd_store._client("10.0.0.1", 2379, credentials=credentials, options=options)
    await tls.connect()
    assert opened == [("10.0.0.1:2379", credentials, list(options.items()))]
    assert tls._timeout == plain._timeout == etcd_store.CALL_SECONDS and tls._options == plain._options == options
