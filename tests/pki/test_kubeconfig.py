"""kubeconfig files as kubectl reads them: precedence, merging, relative paths, clear errors."""

from __future__ import annotations

import base64

import pytest
import yaml

from corral.pki.kubeconfig import KubeconfigError, build_kubeconfig, load_credentials

CA = b"-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"


def write(path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_a_written_kubeconfig_reads_back_with_token_or_certificate(tmp_path):
    with_token = write(tmp_path / "a", build_kubeconfig("https://h:1", CA, user="alice", token="abcdef.x"))
    creds = load_credentials(with_token)
    assert (creds.server, creds.ca_pem, creds.token, creds.cert_pem) == ("https://h:1", CA, "abcdef.x", b"")
    assert creds.headers() == {"Authorization": "Bearer abcdef.x"}
    with_cert = write(tmp_path / "b", build_kubeconfig("https://h:2", CA, user="system:node:n", cert_pem=b"C", key_pem=b"K"))
    creds = load_credentials(with_cert)
    assert (creds.token, creds.cert_pem, creds.key_pem, creds.headers()) == ("", b"C", b"K", {})
    doc = yaml.safe_load(open(with_cert))
    assert doc["current-context"] == "system:node:n@corral" and doc["kind"] == "Config"


def test_the_flag_wins_over_kubeconfig_which_wins_over_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    (tmp_path / "cfg" / "corral").mkdir(parents=True)
    write(tmp_path / "cfg" / "corral" / "kubeconfig", build_kubeconfig("https://default:1", CA, user="d", token="t"))
    env_file = write(tmp_path / "env", build_kubeconfig("https://env:1", CA, user="e", token="t"))
    flag_file = write(tmp_path / "flag", build_kubeconfig("https://flag:1", CA, user="f", token="t"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    assert load_credentials().server == "https://default:1"
    monkeypatch.setenv("KUBECONFIG", env_file)
    assert load_credentials().server == "https://env:1"
    assert load_credentials(flag_file).server == "https://flag:1"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert load_credentials() is None  # listed files that do not exist are skipped, as kubectl does


def test_files_in_kubeconfig_merge_and_the_first_to_name_something_wins(tmp_path, monkeypatch):
    first = write(tmp_path / "1", yaml.safe_dump({
        "current-context": "mine",
        "contexts": [{"name": "mine", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "first"}}],
    }))
    second = write(tmp_path / "2", yaml.safe_dump({
        "current-context": "other",
        "clusters": [{"name": "c", "cluster": {"server": "https://second:1",
                                               "certificate-authority-data": base64.b64encode(CA).decode()}}],
        "users": [{"name": "u", "user": {"token": "second"}}],
    }))
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    creds = load_credentials()
    assert (creds.server, creds.token, creds.ca_pem) == ("https://second:1", "first", CA)


def test_paths_in_a_kubeconfig_are_relative_to_its_directory(tmp_path):
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.crt").write_bytes(CA)
    (tmp_path / "token").write_text("abcdef.fromfile\n")
    path = write(tmp_path / "config", yaml.safe_dump({
        "current-context": "x",
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://h:1", "certificate-authority": "certs/ca.crt",
                                               "tls-server-name": "api.internal"}}],
        "users": [{"name": "u", "user": {"tokenFile": "token"}}],
    }))
    creds = load_credentials(path)
    assert (creds.ca_pem, creds.token, creds.server_name) == (CA, "abcdef.fromfile", "api.internal")


@pytest.mark.parametrize("text, message", [
    pytest.param("apiVersion: v1\ncurrent-context: x\n", 'context "x" is not defined', id="an unknown context"),
    pytest.param("contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
                 'names cluster "c", which is not defined', id="an unknown cluster"),
    pytest.param("clusters: [{name: c, cluster: {}}]\ncontexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
                 'clusters["c"].cluster.server must be a URL', id="a cluster without a server"),
    pytest.param("clusters: [{name: c, cluster: {server: 'https://h', certificate-authority-data: '%%%'}}]\n"
                 "contexts: [{name: x, context: {cluster: c}}]\ncurrent-context: x\n",
                 "certificate-authority-data is not valid base64", id="bad base64"),
    pytest.param("- a list\n", "a kubeconfig is a mapping", id="not a mapping"),
    pytest.param("a: &x [1]\nb: *x\n", "aliases (*name) are not allowed", id="YAML aliases"),
    pytest.param("clusters: {c: 1}\n", "clusters must be a list", id="a section of the wrong type"),
    pytest.param("apiVersion: v1\n", "no current-context is set", id="no current context"),
])
def test_a_bad_kubeconfig_is_one_error_naming_the_file_and_the_field(tmp_path, text, message):
    path = write(tmp_path / "bad", text)
    with pytest.raises(KubeconfigError) as err:
        load_credentials(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_a_huge_file_is_refused_before_parsing(tmp_path):
    path = tmp_path / "huge"
    path.write_bytes(b"#" * (2 << 20))
    with pytest.raises(KubeconfigError, match="larger than"):
        load_credentials(str(path))


def test_a_credential_with_a_cluster_ca_trusts_that_ca_alone_not_the_systems():
    from corral.pki.ca import CertificateAuthority
    from corral.pki.kubeconfig import Credentials

    ca = CertificateAuthority.generate()
    pinned = Credentials("https://127.0.0.1:7443", ca.cert_pem).ssl_context()
    assert pinned.cert_store_stats()["x509_ca"] == 1  # a public CA cannot vouch for the cluster's server
    assert [c["subject"] for c in pinned.get_ca_certs()] == [((("commonName", "corral-ca"),),)]


@pytest.mark.parametrize("user, token_file, flaw", [
    pytest.param({"token": "abcdef.secret\nmore"}, None, "a line break", id="an inline token with a line break"),
    pytest.param({"token": "abcdef.secret more"}, None, "a space", id="an inline token with a space"),
    pytest.param({"token": "abcdef.secr\tet"}, None, "a control character", id="a tab"),
    pytest.param({"tokenFile": "token"}, b"abcdef.secret\r\nX-Injected: yes\n", "a line break",
                 id="a token file of two lines"),
    pytest.param({"tokenFile": "token"}, "abcdef.secr\u00e9t".encode(), "a character that is not ASCII",
                 id="a token file with a non-ASCII character"),
])
def test_a_token_that_cannot_go_in_a_header_is_one_error_naming_the_field_never_the_token(tmp_path, user,
                                                                                           token_file, flaw):
    if token_file is not None:
        (tmp_path / "token").write_bytes(token_file)
    path = write(tmp_path / "config", yaml.safe_dump({
        "current-context": "x",
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://h:1"}}],
        "users": [{"name": "u", "user": user}],
    }))
    with pytest.raises(KubeconfigError) as err:
        load_credentials(path)
    field = 'users["u"].user.tokenFile' if token_file is not None else 'users["u"].user.token'
    assert str(err.value).startswith(f"{path}: {field}: the token has {flaw}; ")
    assert "secret" not in str(err.value) and "secr" not in str(err.value)


def test_a_token_file_that_is_not_text_is_named(tmp_path):
    (tmp_path / "token").write_bytes(b"\xff\xfe\x00binary")
    path = write(tmp_path / "config", yaml.safe_dump({
        "current-context": "x",
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://h:1"}}],
        "users": [{"name": "u", "user": {"tokenFile": "token"}}],
    }))
    with pytest.raises(KubeconfigError, match=r'users\["u"\]\.user\.tokenFile: the file is not UTF-8 text'):
        load_credentials(path)
