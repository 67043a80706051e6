"""Who may talk to the API: TLS always, then a token or a client certificate of the cluster CA.

As an attacker and as a user would meet it, over HTTPS against the real server."""

from __future__ import annotations

import datetime as dt
import json
import os
import stat

import aiohttp
import pytest

from corral.client import ApiError, Client, ConnectionFailed
from corral.pki.ca import CertificateAuthority, make_csr, new_key
from corral.pki.kubeconfig import Credentials, load_credentials
from corral.pki.tokens import JOIN, new_token, token_object
from corral.testing import running_server

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def anonymous(server) -> Client:
    return Client(credentials=Credentials(server.url, server.admin.ca_pem))


def with_token(server, token: str) -> Client:
    return Client(credentials=Credentials(server.url, server.admin.ca_pem, token=token))


async def test_anonymous_requests_get_401_as_a_status_and_change_nothing(server):
    async with anonymous(server) as anon:
        for call in (anon.list("pods"), anon.create(POD), anon.request("GET", "/metrics"),
                     anon.request("GET", "/api/v1"), anon.request("POST", "/corral/v1/join", body={})):
            with pytest.raises(ApiError) as err:
                await call
            assert err.value.code == 401
            assert err.value.status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                        "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
        # Only health, version and the CA certificate answer anyone.
        for path in ("/healthz", "/readyz", "/livez", "/version"):
            await anon.request("GET", path)
        assert await anon.request("GET", "/corral/v1/ca.crt") == server.pki.ca.cert_pem
    async with server.client() as admin:
        assert (await admin.list("pods")).items == []


async def test_an_anonymous_body_is_not_read_before_it_is_refused(server):
    """A body from nobody is never read: 401, not the 413 its size would earn an admin."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=server.admin.ssl_context())) as s:
        async with s.post(server.url + "/api/v1/namespaces/default/pods", data=b"{" * (4 << 20),
                          headers={"Content-Type": "application/json"}) as r:
            assert r.status == 401


async def test_plain_http_is_not_served(server):
    async with aiohttp.ClientSession() as s:
        with pytest.raises(aiohttp.ClientError):
            async with s.get(server.url.replace("https://", "http://") + "/version") as r:
                await r.read()


@pytest.mark.parametrize("header", [
    pytest.param(lambda t: f"Bearer {t[:7]}{'0' * (len(t) - 7)}", id="a wrong secret"),
    pytest.param(lambda t: f"Bearer zzzzzz{t[6:]}", id="an unknown id"),
    pytest.param(lambda t: f"Basic {t}", id="another scheme"),
    pytest.param(lambda t: "Bearer " + "a" * 5000, id="garbage"),
    pytest.param(lambda t: f"Bearer {t} extra", id="trailing text"),
])
async def test_a_bad_token_is_401_even_where_a_good_one_would_pass(server, header):
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=server.admin.ssl_context())) as s:
        async with s.get(server.url + "/api/v1/pods", headers={"Authorization": header(server.admin.token)}) as r:
            assert r.status == 401 and (await r.json())["reason"] == "Unauthorized"
        async with s.get(server.url + "/api/v1/pods", headers={"Authorization": f"Bearer {server.admin.token}"}) as r:
            assert r.status == 200


async def test_a_revoked_token_is_refused_at_once_and_an_expired_one_from_its_expiry(server):
    async with server.client() as admin:
        alice = new_token()
        await admin.create(token_object(alice, user="alice"), raw=True)
        past = new_token()
        await admin.create(token_object(past, user="bob", ttl=dt.timedelta(seconds=1),
                                        now=dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=1)), raw=True)
        async with with_token(server, str(alice)) as as_alice, with_token(server, str(past)) as as_bob:
            with pytest.raises(ApiError) as err:
                await as_alice.list("pods")
            assert err.value.code == 403  # known (authenticated), just not allowed: no role is bound to her
            with pytest.raises(ApiError) as err:
                await as_bob.list("pods")
            assert err.value.code == 401
            await admin.delete("tokens", alice.id, raw=True)
            with pytest.raises(ApiError) as err:
                await as_alice.list("pods")
            assert err.value.code == 401


async def test_tokens_are_stored_only_as_hashes(server):
    async with server.client() as admin:
        stored = await admin.list("tokens", raw=True)
    secrets_ = {server.admin.token.split(".")[1], server.pki.join_token.split(".")[1]}
    assert not any(s in json.dumps(stored.items) for s in secrets_)
    assert {t["spec"]["purpose"] for t in stored.items} == {"authentication", "join"}


async def test_a_client_certificate_of_the_cluster_ca_authenticates_and_one_of_another_ca_cannot_connect(server):
    async with Client(credentials=server.node_credentials("n1")) as node:
        assert (await node.list("pods", field_selector="spec.nodeName=n1")).items == []
    stranger = CertificateAuthority.generate().issue_client("admin", ["system:masters"])
    creds = Credentials(server.url, server.admin.ca_pem, cert_pem=stranger.cert_pem, key_pem=stranger.key_pem)
    async with Client(credentials=creds) as impostor:
        with pytest.raises((ConnectionFailed, ApiError)):
            await impostor.list("pods")


async def test_a_join_token_only_joins(server):
    async with with_token(server, server.pki.join_token) as joiner:
        with pytest.raises(ApiError) as err:
            await joiner.list("pods")
        assert err.value.code == 403 and "may only join a node" in err.value.message
        key = new_key()
        answer = json.loads(await joiner.request("POST", "/corral/v1/join", body={
            "csr": make_csr(key, "system:node:worker-1", ["system:nodes"]).decode()}))
    assert answer["ca"].encode() == server.pki.ca.cert_pem
    creds = Credentials(server.url, server.admin.ca_pem, cert_pem=answer["certificate"].encode(),
                        key_pem=_pem(key))
    async with Client(credentials=creds) as node:
        await node.list("nodes")


def _pem(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


@pytest.mark.parametrize("cn, orgs, message", [
    pytest.param("system:node:UPPER", ["system:nodes"], "valid node name", id="an invalid node name"),
    pytest.param("system:node:", ["system:nodes"], "valid node name", id="no node name"),
    pytest.param("admin", ["system:nodes"], "CN=system:node:NAME", id="not a node"),
    pytest.param("system:node:n", ["system:masters"], "exactly [system:nodes]", id="another group"),
    pytest.param("system:node:n", ["system:nodes", "system:masters"], "exactly [system:nodes]", id="an extra group"),
])
async def test_a_join_request_for_anything_but_a_node_is_refused(server, cn, orgs, message):
    async with with_token(server, server.pki.join_token) as joiner:
        with pytest.raises(ApiError) as err:
            await joiner.request("POST", "/corral/v1/join", body={"csr": make_csr(new_key(), cn, orgs).decode()})
    assert err.value.code == 400 and message in err.value.message


async def test_a_node_renews_its_own_certificate_but_no_other(server):
    async with Client(credentials=server.node_credentials("n1")) as node:
        own = json.loads(await node.request("POST", "/corral/v1/join", body={
            "csr": make_csr(new_key(), "system:node:n1", ["system:nodes"]).decode()}))
        assert "BEGIN CERTIFICATE" in own["certificate"]
        with pytest.raises(ApiError) as err:
            await node.request("POST", "/corral/v1/join", body={
                "csr": make_csr(new_key(), "system:node:n2", ["system:nodes"]).decode()})
        assert err.value.code == 403


async def test_an_expired_join_token_cannot_join(server):
    expired = new_token()
    async with server.client() as admin:
        await admin.create(token_object(expired, user="system:bootstrap", purpose=JOIN, ttl=dt.timedelta(seconds=1),
                                        now=dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)), raw=True)
    async with with_token(server, str(expired)) as joiner:
        with pytest.raises(ApiError) as err:
            await joiner.request("POST", "/corral/v1/join", body={
                "csr": make_csr(new_key(), "system:node:n", ["system:nodes"]).decode()})
    assert err.value.code == 401


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


async def test_secrets_on_disk_are_readable_by_their_owner_only(server):
    d = server.data_dir
    assert _mode(d) == 0o700 and _mode(os.path.join(d, "pki")) == 0o700
    for name in ("admin.kubeconfig", "join-token", "pki/server.key", "pki/server.crt", "corral.db"):
        assert _mode(os.path.join(d, name)) == 0o600, name


async def test_a_restart_keeps_the_ca_the_admin_token_and_the_join_token(tmp_path):
    data = str(tmp_path / "d")
    async with running_server(data, scheduler=False) as first:
        ca, admin, join = first.pki.ca.cert_pem, first.admin.token, first.pki.join_token
    async with running_server(data, scheduler=False) as again:
        assert (again.pki.ca.cert_pem, again.admin.token, again.pki.join_token) == (ca, admin, join)
        creds = load_credentials(os.path.join(data, "admin.kubeconfig"))
        assert creds.server == again.url  # the kubeconfig follows the new port
        async with Client(credentials=creds) as c:
            await c.list("pods")


async def test_the_serving_certificate_is_reissued_for_a_new_name_and_renewed_when_due(tmp_path):
    data = str(tmp_path / "d")
    async with running_server(data, scheduler=False) as first:
        cert_before = open(os.path.join(data, "pki", "server.crt"), "rb").read()
        assert first.pki.renew_serving() is False  # fresh: nothing to do
    async with running_server(data, scheduler=False, tls_sans=("api.example.com",)) as again:
        cert_after = open(os.path.join(data, "pki", "server.crt"), "rb").read()
        assert cert_after != cert_before and again.pki.ca.cert_pem == first.pki.ca.cert_pem
        from corral.pki.ca import certificate_hosts

        assert "api.example.com" in certificate_hosts(cert_after)
        # Due for renewal (issued long ago): renewed, and the running server serves the new one.
        old = again.pki.ca.issue_serving("corral-server", again.pki.hosts,
                                         now=dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=300))
        with open(os.path.join(data, "pki", "server.crt"), "wb") as f:
            f.write(old.cert_pem)
        with open(os.path.join(data, "pki", "server.key"), "wb") as f:
            f.write(old.key_pem)
        assert again.pki.renew_serving() is True
        async with again.client() as c:
            await c.list("pods")


async def test_a_server_on_every_interface_is_trusted_at_each_address_and_says_which_one_to_join(tmp_path):
    from urllib.parse import urlsplit

    from corral.server.authn.certificates import machine_addresses, primary_address

    async with running_server(str(tmp_path / "d"), scheduler=False, address="0.0.0.0:0") as server:
        port = urlsplit(server.url).port
        addresses = machine_addresses(ipv6=False)  # 0.0.0.0: IPv4 only
        assert "127.0.0.1" in addresses  # the loopback interface, found by asking the interfaces
        for address in addresses:
            async with Client(credentials=server.admin.with_server(f"https://{address}:{port}")) as c:
                await c.list("pods")  # the certificate names it: verified, no --tls-san needed
        primary = primary_address()
        assert server.join_url == (f"https://{primary}:{port}" if primary else server.url)
        # An address it does not name: the error says how to make it named.
        with pytest.raises(ConnectionFailed, match="does not name 127.0.0.2: start the server with --tls-san 127.0.0.2"):
            async with Client(credentials=server.admin.with_server(f"https://127.0.0.2:{port}")) as c:
                await c.list("pods")


async def test_the_user_kubeconfig_is_written_when_absent_and_never_over_a_users_own(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    user_file = tmp_path / "cfg" / "corral" / "kubeconfig"
    async with running_server(str(tmp_path / "d"), scheduler=False, user_kubeconfig=True) as s:
        assert load_credentials(str(user_file)).token == s.admin.token
        assert _mode(str(user_file)) == 0o600
    user_file.write_text("# my own\n")
    async with running_server(str(tmp_path / "d2"), scheduler=False, user_kubeconfig=True):
        assert user_file.read_text() == "# my own\n"


def test_a_remembered_token_still_expires_on_time_and_follows_every_change_of_its_object():
    from corral.server.authn.authenticator import Authenticator
    from corral.store.base import Record

    now = [dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)]
    objects: dict[str, Record] = {}
    auth = Authenticator(objects.get, clock=lambda: now[0])
    token = new_token()
    key = f"/auth.corral.dev/tokens/{token.id}"

    def store(**spec_changes) -> None:
        obj = token_object(token, user="ann", groups=["dev"], ttl=dt.timedelta(hours=1), now=now[0])
        obj["spec"].update(spec_changes)
        objects[key] = Record(key, len(objects) + 1, json.dumps(obj).encode())

    store()
    header = f"Bearer {token}"
    assert auth.from_token(header).groups == ("dev", "system:authenticated")
    assert auth.from_token(header).name == "ann"  # remembered, same answer
    assert auth.from_token(f"Bearer {token.id}.{'x' * len(token.secret)}") is None  # a wrong secret: no
    store(groups=["ops"])  # the object changed: its new groups count at once
    assert auth.from_token(header).groups == ("ops", "system:authenticated")
    now[0] += dt.timedelta(hours=1)
    assert auth.from_token(header) is None  # expired while remembered
    del objects[key]
    now[0] -= dt.timedelta(hours=1)
    assert auth.from_token(header) is None  # revoked


async def test_a_request_allowed_before_is_judged_again_once_its_binding_token_or_time_changes(server):
    """The server remembers what a token was allowed; the same request again must still be refused
    the moment the binding that allowed it goes, the token is revoked, or it expires."""
    import asyncio

    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "carol-view", "namespace": "default"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "carol"}]}
    async with server.client() as admin:
        carol, brief = new_token(), new_token()
        await admin.create(token_object(carol, user="carol"), raw=True)
        await admin.create(token_object(brief, user="carol", ttl=dt.timedelta(seconds=2)), raw=True)
        await admin.create(binding, raw=True)
        async with with_token(server, str(carol)) as as_carol, with_token(server, str(brief)) as briefly:
            for _ in range(2):  # the second is answered from what the server remembers
                await as_carol.list("pods", "default", raw=True)
                await briefly.list("pods", "default", raw=True)
            await admin.delete("rolebindings", "carol-view", "default")
            with pytest.raises(ApiError) as err:
                await as_carol.list("pods", "default", raw=True)
            assert err.value.code == 403
            await admin.create(binding, raw=True)
            for _ in range(2):  # remembered again, under the bindings as they now are
                await as_carol.list("pods", "default", raw=True)
                await briefly.list("pods", "default", raw=True)
            await admin.delete("tokens", carol.id, raw=True)
            with pytest.raises(ApiError) as err:
                await as_carol.list("pods", "default", raw=True)
            assert err.value.code == 401
            await asyncio.sleep(2.2)
            with pytest.raises(ApiError) as err:
                await briefly.list("pods", "default", raw=True)
            assert err.value.code == 401
