from __future__ import annotations

import uuid

import pytest


@pytest.fixture(scope="module")
def etcd(tmp_path_factory):
    """One real etcd on loopback for a test module, with its own data directory."""
    from corral.testing.etcd import EtcdProcess

    proc = EtcdProcess(str(tmp_path_factory.mktemp("etcd"))).start()
    yield proc
    proc.stop()


@pytest.fixture
async def pair(etcd):
    """Two stores sharing one etcd under different roots, as two clusters (or a cluster and etcdctl) would."""
    from corral.store import open_store

    a = await open_store(etcd.url, root=f"/a-{uuid.uuid4().hex[:12]}")
    b = await open_store(etcd.url, root=f"/b-{uuid.uuid4().hex[:12]}")
    yield a, b
    await a.close()
    await b.close()
