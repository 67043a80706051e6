from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from hypothesis import Phase, settings

# `make mutation` runs the tests with this profile: any failure kills the mutant, so shrinking the
# failing example (tens of seconds for the property tests) would only slow the run.
settings.register_profile("mutation", phases=[Phase.explicit, Phase.reuse, Phase.generate])

from corral.testing import ServerProcess, running_server

# Servers write ~/.config/corral/kubeconfig when there is none: never the developer's own. Nor do a
# developer's KUBECONFIG or CORRAL_SERVER reach the commands the tests run.
_CONFIG_HOME = os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="corral-tests-config-")
for _name in ("KUBECONFIG", "CORRAL_SERVER", "CORRAL_JOIN_TOKEN"):
    os.environ.pop(_name, None)


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_gone_after_a_mutation_run_session(tmp_path_factory):
    """In `make mutation`, each mutant's tests run in a forked pytest session that ends with
    os._exit, so pytest never frees its temporary directories (etcd alone preallocates 64 MB of
    WAL in each): ten thousand sessions filled a disk. Such a session removes its own."""
    yield
    shutil.rmtree(_CONFIG_HOME, ignore_errors=True)
    if "MUTANT_UNDER_TEST" in os.environ:
        shutil.rmtree(tmp_path_factory.getbasetemp(), ignore_errors=True)


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "wallclock: asserts a wall-clock bound the README promises")


def pytest_collection_modifyitems(config, items) -> None:
    """Under mutmut, tests marked wallclock are left out: the mutated copy sends every call through
    mutmut's trampolines (the whole suite took 48 min there against 16), so a promise such as "another
    server takes over within 20 s" measured there says nothing about the code (a clean pass failed on
    it at 21.2 s, stopping the run). `make test` runs them.

    `make mutation` first runs the whole suite twice: traced, to learn which tests reach which
    function (mutmut's "stats"), then untraced with no mutant ("clean", MUTANT_UNDER_TEST empty).
    Both are slower than a plain run, and at nice 19 beside other work slower still, so a test there
    may take up to the suite's own limit (120 s) instead of the 45 s a mutant's run allows. One test
    over 45 s in either pass stops the whole run (twice, after 25 minutes)."""
    if "MUTANT_UNDER_TEST" in os.environ:
        timed = [item for item in items if item.get_closest_marker("wallclock") is not None]
        if timed:
            config.hook.pytest_deselected(items=timed)
            items[:] = [item for item in items if item.get_closest_marker("wallclock") is None]
    if os.environ.get("MUTANT_UNDER_TEST") not in ("stats", ""):
        return
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(120))


@pytest.fixture
def server_process(tmp_path):
    """A real `corral server` process with its own data directory, API only (no scheduler
    changing pods behind the test's back)."""
    with ServerProcess(str(tmp_path / "server"), "--no-scheduler") as proc:
        yield proc


@pytest.fixture
def cluster_process(tmp_path):
    """A real `corral server` process with its scheduler, as `make up` runs it."""
    with ServerProcess(str(tmp_path / "cluster")) as proc:
        yield proc


@pytest.fixture
def kubeconfig(server_process) -> str:
    """The admin kubeconfig of ``server_process``, as a user would point a client at it."""
    return server_process.kubeconfig


@pytest.fixture
async def server(tmp_path):
    """A server in the test's event loop (for tests that need its internals, e.g. compaction)."""
    async with running_server(str(tmp_path / "inproc"), scheduler=False) as s:
        yield s
