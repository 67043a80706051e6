"""kubeconfig files: written by the server (admin, users, joined nodes), read by every client.

Reading follows kubectl: ``--kubeconfig FILE`` alone if given; else the files listed in
``$KUBECONFIG`` (``:``-separated), merged so that the first file to name a cluster, user, context or
the current context wins; else corral's default, ``~/.config/corral/kubeconfig``. Paths inside a
file (``certificate-authority``, ``client-certificate``, ``client-key``, ``tokenFile``) are relative
to that file. Only what corral's clients use is read: server, CA, token, client certificate,
``insecure-skip-tls-verify`` and ``tls-server-name``.
"""

from __future__ import annotations

import base64
import os
import ssl
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = ["Credentials", "KubeconfigError", "build_kubeconfig", "load_credentials", "default_kubeconfig_path",
           "token_flaw", "MAX_KUBECONFIG_BYTES"]

MAX_KUBECONFIG_BYTES = 1 << 20


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class Credentials:
    """Where a server is and how to prove who we are to it."""

    server: str
    ca_pem: bytes = b""  # empty: the system's trust store
    token: str = ""
    cert_pem: bytes = b""
    key_pem: bytes = field(default=b"", repr=False)
    insecure: bool = False  # insecure-skip-tls-verify
    server_name: str = ""  # tls-server-name
    source: str = ""  # the file(s) it came from, for messages

    def with_server(self, server: str) -> "Credentials":
        return Credentials(server, self.ca_pem, self.token, self.cert_pem, self.key_pem, self.insecure,
                           self.server_name, self.source)

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context: trusts the cluster CA (or the system's), presents the client
        certificate if there is one."""
        # With a cluster CA, that CA alone (as kubectl): not the system's store as well, which would
        # also let any public CA vouch for "the cluster", and costs ~1 MB and ~20 ms per context.
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=self.ca_pem.decode() if self.ca_pem else None)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_pem and self.key_pem:
            load_cert_pair(ctx, self.cert_pem, self.key_pem)
        return ctx

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def load_cert_pair(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """``load_cert_chain`` takes only file names: a private temporary file, removed at once."""
    import tempfile

    with tempfile.NamedTemporaryFile("wb", suffix=".pem") as f:  # created 0600
        f.write(cert_pem + b"\n" + key_pem)
        f.flush()
        ctx.load_cert_chain(f.name)


def default_kubeconfig_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "corral", "kubeconfig")


def build_kubeconfig(server: str, ca_pem: bytes, *, user: str, token: str = "", cert_pem: bytes = b"",
                     key_pem: bytes = b"", cluster: str = "corral") -> str:
    """A kubeconfig with one cluster, one user and one context (named ``user@cluster``), as YAML."""
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    creds: dict[str, Any] = {}
    if token:
        creds["token"] = token
    if cert_pem:
        creds["client-certificate-data"] = b64(cert_pem)
        creds["client-key-data"] = b64(key_pem)
    context = f"{user}@{cluster}"
    doc = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "current-context": context,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def _read_file(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_KUBECONFIG_BYTES + 1)
    except OSError as exc:
        raise KubeconfigError(f"{path}: cannot read the kubeconfig: {exc.strerror}") from None
    if len(raw) > MAX_KUBECONFIG_BYTES:
        raise KubeconfigError(f"{path}: larger than {MAX_KUBECONFIG_BYTES} bytes; not a kubeconfig")
    try:
        # The C loader when present; aliases are refused (a kubeconfig has no need for them).
        doc = yaml.load(raw, Loader=_NoAliasLoader)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"{path}: not valid YAML: {exc}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise KubeconfigError(f"{path}: a kubeconfig is a mapping (apiVersion, clusters, users, contexts)")
    return doc


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("aliases (*name) are not allowed in a kubeconfig")
        return super().compose_node(parent, index)


@dataclass
class _Merged:
    clusters: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)  # name → (fields, file)
    users: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    contexts: dict[str, tuple[dict[str, Any], str]] = field(default_factory=dict)
    current: tuple[str, str] = ("", "")

    def add(self, doc: dict[str, Any], path: str) -> None:
        for section, inner, target in (("clusters", "cluster", self.clusters), ("users", "user", self.users),
                                       ("contexts", "context", self.contexts)):
            entries = doc.get(section) or []
            if not isinstance(entries, list):
                raise KubeconfigError(f"{path}: {section} must be a list")
            for i, entry in enumerate(entries):
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    raise KubeconfigError(f"{path}: {section}[{i}].name must be a string")
                body = entry.get(inner) or {}
                if not isinstance(body, dict):
                    raise KubeconfigError(f"{path}: {section}[{i}].{inner} must be a mapping")
                target.setdefault(entry["name"], (body, path))
        current = doc.get("current-context")
        if current and not self.current[0]:
            if not isinstance(current, str):
                raise KubeconfigError(f"{path}: current-context must be a string")
            self.current = (current, path)


def token_flaw(token: str) -> str:
    """What makes ``token`` unfit for an ``Authorization: Bearer`` header ("" if nothing), never
    quoting it (it is a secret)."""
    for ch in token:
        if ch in "\r\n":
            return "a line break"
        if ch == " ":
            return "a space"
        if not ch.isascii():
            return "a character that is not ASCII"
        if not ch.isprintable():
            return "a control character"
    return ""


def _file(ref: str, key: str, path: str) -> bytes:
    """A file a kubeconfig names, relative to the kubeconfig's own directory."""
    full = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.expanduser(ref))
    try:
        with open(full, "rb") as f:
            return f.read(MAX_KUBECONFIG_BYTES)
    except OSError as exc:
        raise KubeconfigError(f"{path}: {key} {full}: {exc.strerror}") from None


def _data(fields: dict[str, Any], key: str, path: str) -> bytes:
    """``key-data`` (base64) or ``key`` (a file)."""
    inline = fields.get(f"{key}-data")
    if inline:
        try:
            return base64.b64decode(str(inline), validate=True)
        except ValueError:
            raise KubeconfigError(f"{path}: {key}-data is not valid base64") from None
    ref = fields.get(key)
    return _file(str(ref), key, path) if ref else b""


def candidate_files(explicit: str | None = None) -> list[str]:
    """The files to read, in kubectl's order of precedence (existing ones only, except an explicit one)."""
    if explicit:
        return [explicit]
    env = os.environ.get("KUBECONFIG", "")
    listed = [p for p in env.split(os.pathsep) if p]
    if listed:
        return [p for p in listed if os.path.exists(p)]
    default = default_kubeconfig_path()
    return [default] if os.path.exists(default) else []


def load_credentials(explicit: str | None = None, *, context: str | None = None) -> Credentials | None:
    """The current context's server and credentials, or ``None`` when no kubeconfig exists."""
    files = candidate_files(explicit)
    if not files:
        return None
    merged = _Merged()
    for path in files:
        merged.add(_read_file(path), path)
    name = context or merged.current[0]
    where = ", ".join(files)
    if not name:
        raise KubeconfigError(f"{where}: no current-context is set (and no context was asked for)")
    if name not in merged.contexts:
        raise KubeconfigError(f'{where}: context "{name}" is not defined')
    ctx, ctx_file = merged.contexts[name]
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    if cluster_name not in merged.clusters:
        raise KubeconfigError(f'{ctx_file}: context "{name}" names cluster "{cluster_name}", which is not defined')
    cluster, cluster_file = merged.clusters[cluster_name]
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise KubeconfigError(f'{cluster_file}: clusters["{cluster_name}"].cluster.server must be a URL')
    user, user_file = merged.users.get(user_name, ({}, ctx_file)) if user_name else ({}, ctx_file)
    token, field = str(user.get("token") or ""), f'users["{user_name}"].user.token'
    if not token and user.get("tokenFile"):
        field += "File"
        try:
            token = _file(str(user["tokenFile"]), "tokenFile", user_file).decode().strip()
        except UnicodeDecodeError:
            raise KubeconfigError(f"{user_file}: {field}: the file is not UTF-8 text") from None
    flaw = token_flaw(token)
    if flaw:
        # It goes into an Authorization header: a line break there would end the request's headers
        # early and leave its body to be read as a request of its own.
        raise KubeconfigError(f"{user_file}: {field}: the token has {flaw}; a bearer token is one line of "
                              "printable ASCII characters without spaces")
    return Credentials(
        server=server,
        ca_pem=_data(cluster, "certificate-authority", cluster_file),
        token=str(token),
        cert_pem=_data(user, "client-certificate", user_file),
        key_pem=_data(user, "client-key", user_file),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        server_name=str(cluster.get("tls-server-name") or ""),
        source=where,
    )
