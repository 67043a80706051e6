"""Where the server is: ``--server``, then ``CORRAL_SERVER``, then the config file, then the default."""

from __future__ import annotations

import os

__all__ = ["server_url", "config_path", "DEFAULT_SERVER"]

DEFAULT_SERVER = "http://127.0.0.1:7443"


def config_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "corral", "config.yaml")


def server_url(flag: str | None = None) -> str:
    """The server address, in the documented order of precedence; ``http://`` is added if missing.

    Several servers are separated by commas (``a:7443,b:7443``); the client fails over between them."""
    value = flag or os.environ.get("CORRAL_SERVER") or _from_config_file() or DEFAULT_SERVER
    urls = [u.strip() for u in value.split(",") if u.strip()]
    if not urls:
        raise ValueError(f"no server address in {value!r}")
    return ",".join(u if "://" in u else f"http://{u}" for u in urls)


def _from_config_file() -> str | None:
    path = config_path()
    if not os.path.exists(path):
        return None
    import yaml

    with open(path, encoding="utf-8") as f:
        try:
            doc = yaml.safe_load(f) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not valid YAML: {exc}") from None
    value = doc.get("server") if isinstance(doc, dict) else None
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{path}: 'server' must be a string like http://127.0.0.1:7443 "
                         "(several servers separated by commas)")
    return value
