"""Files only their owner may read: the data directory (0700), keys, tokens and kubeconfigs (0600)."""

from __future__ import annotations

import os
import tempfile

__all__ = ["private_dir", "write_private"]


def private_dir(path: str) -> str:
    """Create ``path`` (and its parents) if missing and make it 0700; returns ``path``."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def write_private(path: str, data: bytes | str) -> None:
    """Write ``path`` atomically with mode 0600 (never readable by others, not even for a moment).

    The parent directory must exist. A crash leaves the old file or the new one, never half of it."""
    if isinstance(data, str):
        data = data.encode()
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
