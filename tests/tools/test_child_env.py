"""Child processes that tests start import the same corral as the test, so a mutation run reaches them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import corral
from corral.testing.process import SOURCE_ROOT, child_env

SHOW = "import corral; print(corral.__file__)"


def test_a_child_imports_corral_from_where_this_process_did_and_keeps_the_rest_of_pythonpath(tmp_path):
    assert os.path.abspath(corral.__file__).startswith(SOURCE_ROOT + os.sep)
    env = child_env({"PYTHONPATH": str(tmp_path), "CORRAL_SERVER": "http://x"})
    assert env["PYTHONPATH"] == SOURCE_ROOT + os.pathsep + str(tmp_path)
    assert env["CORRAL_SERVER"] == "http://x"
    out = subprocess.run([sys.executable, "-c", SHOW], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == os.path.abspath(corral.__file__)


def test_a_copy_of_the_package_is_what_its_grandchildren_import(tmp_path):
    # As a mutation tool runs the suite: corral imported from a copy, whose children must use the copy.
    copy = tmp_path / "src"
    shutil.copytree(SOURCE_ROOT + "/corral", copy / "corral", ignore=shutil.ignore_patterns("__pycache__"))
    grandchild = ("import subprocess, sys; from corral.testing.process import child_env; "
                  f"subprocess.run([sys.executable, '-c', {SHOW!r}], env=child_env(), check=True)")
    env = {**os.environ, "PYTHONPATH": str(copy)}
    out = subprocess.run([sys.executable, "-c", grandchild], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(copy / "corral" / "__init__.py")


def test_free_port_never_gives_the_same_port_twice_even_when_the_kernel_offers_it_again(monkeypatch):
    """What made an etcd cluster of three members start with two on one port ("has duplicate url"):
    the kernel offered a closed port again. A fake socket offers 5000, 5000, then 5001."""
    from corral.testing import process

    offered = iter([5000, 5000, 5001])

    class Offering:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def bind(self, address):
            self.port = next(offered)

        def getsockname(self):
            return ("127.0.0.1", self.port)

    monkeypatch.setattr(process, "_handed_out", set())
    monkeypatch.setattr(process.socket, "socket", Offering)
    assert [process.free_port(), process.free_port()] == [5000, 5001]
