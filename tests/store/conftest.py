from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def etcd(tmp_path_factory):
    """One real etcd on loopback for a test module, with its own data directory."""
    from corral.testing.etcd import EtcdProcess

    proc = EtcdProcess(str(tmp_path_factory.mktemp("etcd"))).start()
    yield proc
    proc.stop()
