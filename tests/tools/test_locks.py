"""The two lock files agree: `make up` installs requirements-runtime.lock, `make test` requirements.lock,
and a package both install must be the same version, every runtime dependency must be in the first."""

from __future__ import annotations

import os
import re
import tomllib

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def _pins(name: str) -> dict[str, str]:
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        pins = [line.strip().split("==") for line in f if "==" in line]
    return {_normal(p): v for p, v in pins}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_runtime_lock_is_the_full_lock_restricted_to_what_running_needs():
    runtime, full = _pins("requirements-runtime.lock"), _pins("requirements.lock")
    assert runtime and {p: full.get(p) for p in runtime} == runtime  # same versions, nothing extra
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    for dep in deps:
        assert _normal(re.split(r"[<>=!;\[ ]", dep, maxsplit=1)[0]) in runtime, dep
    assert "pytest" not in runtime and "kubernetes" not in runtime  # the test tools stay out
