"""A pod's volumes on the node's disk: ConfigMaps and Secrets projected as files, and emptyDirs.

A projected volume is laid out as kubelet lays it out, so that an update is atomic for the reader:

    VOLUME/..2026_11_25_02_10_00.123456789/KEY    the files, at their modes
    VOLUME/..data -> ..2026_11_25_...            swapped by one rename when the content changes
    VOLUME/KEY -> ..data/KEY                     what the container reads

A reader opening ``KEY`` sees the old content or the new, never half of each. The runtimes mount
the volume's directory (docker: a bind mount; process: a symlink in the container's directory).
Files and directories are made here, by the agent; nothing a pod's spec says becomes a path outside
its volume (keys and item paths are checked by validation and again here). No API calls here.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

__all__ = ["project", "empty_dir", "DATA_LINK", "inside"]

DATA_LINK = "..data"
DEFAULT_MODE = 0o644  # Kubernetes' defaultMode for both ConfigMap and Secret volumes


def inside(base: Path, relative: str) -> Path | None:
    """``base/relative`` when it stays inside ``base`` (no ``..``, not absolute), else None."""
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if not parts or relative.startswith("/") or ".." in parts:
        return None
    return base.joinpath(*parts)


def empty_dir(directory: Path) -> Path:
    """An emptyDir: made once, writable by the pod's containers whoever they run as (0777, as
    Kubernetes makes it); kept across container restarts, gone with the pod."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o777)
    return directory


def project(directory: Path, files: dict[str, tuple[bytes, int]]) -> bool:
    """Make ``directory`` hold exactly ``files`` (relative path → (content, mode)), atomically for
    readers; False when it held them already (nothing written)."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o755)
    link = directory / DATA_LINK
    if _holds(link, files):
        return False
    stamp = time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()) + f"{time.time_ns() % 10**9:09d}"
    fresh = directory / stamp
    fresh.mkdir(mode=0o755)
    for relative, (content, mode) in files.items():
        path = inside(fresh, relative)
        if path is None:
            continue  # refused by validation already; never written outside the volume
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(content)
        os.chmod(path, mode)
    previous = os.readlink(link) if link.is_symlink() else None
    swap = directory / f"{DATA_LINK}_tmp"
    if swap.is_symlink():
        swap.unlink()
    os.symlink(stamp, swap)
    os.replace(swap, link)  # the atomic step
    tops = {relative.split("/")[0] for relative in files if inside(fresh, relative) is not None}
    for entry in directory.iterdir():  # the names the container reads: one link per top-level entry
        if entry.name.startswith("..") or entry.name in tops:
            continue
        if entry.is_symlink():
            entry.unlink()
    for top in tops:
        visible = directory / top
        if not visible.is_symlink():
            os.symlink(f"{DATA_LINK}/{top}", visible)
    if previous and previous != stamp:
        shutil.rmtree(directory / previous, ignore_errors=True)
    return True


def _holds(link: Path, files: dict[str, tuple[bytes, int]]) -> bool:
    """Whether the projection ``link`` points to is ``files``, content and modes."""
    if not link.is_symlink():
        return False
    current = link.resolve()
    found: dict[str, tuple[bytes, int]] = {}
    for path in current.rglob("*"):
        if path.is_file():
            found[str(path.relative_to(current))] = (path.read_bytes(), path.stat().st_mode & 0o7777)
    return found == {k: v for k, v in files.items() if inside(current, k) is not None}
