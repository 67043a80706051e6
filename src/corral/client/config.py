"""Where the server is and who we are: the kubeconfig, as kubectl reads it, with corral's overrides.

Credentials and the server URL come from the kubeconfig (``--kubeconfig``, then ``$KUBECONFIG``, then
``~/.config/corral/kubeconfig``, which ``corral server`` writes when there is none). ``--server`` and
``$CORRAL_SERVER`` replace the URL only (several servers separated by commas: the client fails over
between them). A URL without a scheme is HTTPS: corral serves nothing else.
"""

from __future__ import annotations

import os

from corral.pki.kubeconfig import Credentials, KubeconfigError, default_kubeconfig_path, load_credentials

__all__ = ["server_url", "client_credentials", "DEFAULT_SERVER", "KubeconfigError", "default_kubeconfig_path"]

DEFAULT_SERVER = "https://127.0.0.1:7443"


def server_url(value: str) -> str:
    """One URL or several separated by commas, each given ``https://`` if it has no scheme."""
    urls = [u.strip() for u in value.split(",") if u.strip()]
    if not urls:
        raise ValueError(f"no server address in {value!r}")
    return ",".join(u if "://" in u else f"https://{u}" for u in urls)


def client_credentials(server: str | None = None, kubeconfig: str | None = None) -> Credentials:
    """The credentials a command uses: the kubeconfig's current context, its URL replaced by
    ``server`` or ``$CORRAL_SERVER`` when given; with no kubeconfig, no credentials at all (the
    server then answers 401, and the message says where a kubeconfig is looked for)."""
    creds = load_credentials(kubeconfig)
    override = server or os.environ.get("CORRAL_SERVER")
    if creds is None:
        return Credentials(server_url(override or DEFAULT_SERVER), source="")
    return creds.with_server(server_url(override or creds.server))
