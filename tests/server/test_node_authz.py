"""The node authoriser, table-driven: a node's credential reaches its own objects and nothing else."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from corral.server.authz.node import NodeAuthorizer, node_name
from corral.server.authz.rbac import Attributes

NODE = ("system:node:n1", ("system:nodes", "system:authenticated"))


@dataclass
class FakeRecord:
    obj: dict


PODS = {
    "/core/pods/default/here": FakeRecord({"spec": {"nodeName": "n1"}}),
    "/core/pods/default/there": FakeRecord({"spec": {"nodeName": "n2"}}),
    "/core/pods/default/pending": FakeRecord({"spec": {}}),
}


def decide(user=NODE, **attrs):
    authz = NodeAuthorizer(PODS.get, lease_namespace="kube-node-lease",
                           non_resource_paths=frozenset({"/version", "/corral/v1/throughput"}))
    decision = authz.authorize(Attributes(user[0], user[1], **attrs))
    return None if decision is None else decision.allowed


@pytest.mark.parametrize("attrs, allowed", [
    pytest.param(dict(verb="create", resource="nodes"), True, id="it registers a Node (its name is checked at admission)"),
    pytest.param(dict(verb="update", resource="nodes", name="n1"), True, id="it updates its own Node"),
    pytest.param(dict(verb="patch", resource="nodes", subresource="status", name="n1"), True,
                 id="it writes its own Node's status"),
    pytest.param(dict(verb="patch", resource="nodes", subresource="status", name="n2"), None,
                 id="it cannot write another Node's status"),
    pytest.param(dict(verb="update", resource="nodes", name="n2"), None, id="it cannot change another Node"),
    pytest.param(dict(verb="delete", resource="nodes", name="n1"), None, id="it cannot delete even its own Node"),
    pytest.param(dict(verb="list", resource="nodes"), True, id="it reads Nodes"),
    pytest.param(dict(verb="patch", api_group="coordination.k8s.io", resource="leases", namespace="kube-node-lease",
                      name="n1"), True, id="it renews its own Lease"),
    pytest.param(dict(verb="patch", api_group="coordination.k8s.io", resource="leases", namespace="kube-node-lease",
                      name="n2"), None, id="it cannot renew another node's Lease"),
    pytest.param(dict(verb="patch", api_group="coordination.k8s.io", resource="leases", namespace="kube-system",
                      name="corral-control-plane"), None, id="it cannot touch the leader's Lease"),
    pytest.param(dict(verb="update", api_group="coordination.k8s.io", resource="leases", namespace="kube-system",
                      name="n1"), None, id="its name does not open Leases outside the node-lease namespace"),
    pytest.param(dict(verb="create", api_group="coordination.k8s.io", resource="leases", namespace="kube-system"),
                 None, id="it creates Leases only in the node-lease namespace"),
    pytest.param(dict(verb="watch", resource="pods", fields=(("spec.nodeName", "n1"),)), True,
                 id="it watches the pods bound to it"),
    pytest.param(dict(verb="list", resource="pods"), None, id="it cannot list every pod"),
    pytest.param(dict(verb="list", resource="pods", fields=(("spec.nodeName", "n2"),)), None,
                 id="it cannot list another node's pods"),
    pytest.param(dict(verb="get", resource="pods", namespace="default", name="here"), True,
                 id="it reads a pod bound to it"),
    pytest.param(dict(verb="get", resource="pods", namespace="default", name="there"), None,
                 id="it cannot read a pod bound elsewhere"),
    pytest.param(dict(verb="get", resource="pods", namespace="default", name="pending"), None,
                 id="it cannot read a pod bound nowhere"),
    pytest.param(dict(verb="update", resource="pods", subresource="status", namespace="default", name="here"), True,
                 id="it writes the status of a pod bound to it"),
    pytest.param(dict(verb="update", resource="pods", subresource="status", namespace="default", name="there"), None,
                 id="it cannot write the status of a pod bound elsewhere"),
    pytest.param(dict(verb="create", resource="pods", namespace="default"), None, id="it cannot create pods"),
    pytest.param(dict(verb="create", resource="pods", subresource="binding", namespace="default", name="pending"),
                 None, id="it cannot bind pods"),
    pytest.param(dict(verb="update", resource="pods", namespace="default", name="here"), None,
                 id="it cannot change a pod's spec, even one bound to it"),
    pytest.param(dict(verb="delete", resource="pods", namespace="default", name="here"), True,
                 id="it removes a pod bound to it once stopped"),
    pytest.param(dict(verb="create", resource="events", namespace="default"), True, id="it reports events"),
    pytest.param(dict(verb="list", api_group="auth.corral.dev", resource="tokens"), None, id="it cannot read tokens"),
    pytest.param(dict(verb="get", path="/corral/v1/throughput"), True, id="it measures its throughput"),
    pytest.param(dict(verb="get", path="/metrics"), None, id="it cannot read the server's metrics"),
])
def test_a_node_reaches_its_own_objects_and_nothing_else(attrs, allowed):
    assert decide(**attrs) is allowed


@pytest.mark.parametrize("user, groups", [
    ("system:node:n1", ("system:authenticated",)),  # the name without the group
    ("alice", ("system:nodes",)),  # the group without a node name
    ("system:node:", ("system:nodes",)),
])
def test_only_a_node_name_in_the_nodes_group_is_a_node(user, groups):
    assert node_name(user, groups) is None
    assert decide((user, groups), verb="get", resource="nodes", name="n1") is None


def test_a_node_credential_names_its_node():
    assert node_name(*NODE) == "n1"


async def test_node_leases_live_in_kube_node_lease_and_old_ones_are_let_go_at_start(tmp_path):
    """Where kubectl describe node looks for them; a cluster from before keeps no stale heartbeat
    in corral-node-lease (its agents renew theirs in the new place)."""
    from corral.client import Client, NotFound
    from corral.testing import running_server

    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {"holderIdentity": "n1"}}
    async with running_server(str(tmp_path / "d"), scheduler=False, controllers=False) as server:
        async with server.client() as admin:
            await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "corral-node-lease"}},
                               raw=True)
            await admin.create({**lease, "metadata": {"name": "n1", "namespace": "corral-node-lease"}}, raw=True)
    async with running_server(str(tmp_path / "d"), scheduler=False, controllers=False) as server:
        async with server.client() as admin:
            with pytest.raises(NotFound):
                await admin.get("leases", "n1", "corral-node-lease", raw=True)
            await admin.get("namespaces", "kube-node-lease", raw=True)
        async with Client(credentials=server.node_credentials("n1")) as n1:
            await n1.create({**lease, "metadata": {"name": "n1", "namespace": "kube-node-lease"}}, raw=True)
            await n1.patch("leases", "n1", {"spec": {"leaseDurationSeconds": 40}}, "kube-node-lease", raw=True)


async def test_a_node_reads_the_configmaps_and_secrets_of_the_pods_bound_to_it_and_no_others(tmp_path):
    from corral.client import ApiError, Client
    from corral.testing import running_server

    def config(kind: str, name: str) -> dict:
        return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "default"},
                "data": {"k": "dg=="}}

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": "default"},
           "spec": {"nodeName": "n1", "volumes": [{"name": "conf", "configMap": {"name": "settings"}}],
                    "containers": [{"name": "c", "image": "busybox", "volumeMounts": [{"name": "conf", "mountPath": "/c"}],
                                    "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "k"}}}]}]}}

    async def allowed(client, resource: str, name: str) -> bool:
        try:
            await client.get(resource, name, "default", raw=True)
            return True
        except ApiError as exc:
            assert exc.code == 403, exc.message
            return False

    async with running_server(str(tmp_path / "d"), scheduler=False, controllers=False) as server:
        async with server.client() as admin:
            for kind, name in (("Secret", "db"), ("Secret", "other"), ("ConfigMap", "settings")):
                await admin.create(config(kind, name), raw=True)
            await admin.create(pod, raw=True)
            async with Client(credentials=server.node_credentials("n1")) as n1, \
                    Client(credentials=server.node_credentials("n2")) as n2:
                assert await allowed(n1, "secrets", "db") and await allowed(n1, "configmaps", "settings")
                assert not await allowed(n1, "secrets", "other")  # no pod of its own uses it
                assert not await allowed(n2, "secrets", "db") and not await allowed(n2, "configmaps", "settings")
                with pytest.raises(ApiError, match="forbidden"):
                    await n1.list("secrets", "default", raw=True)
                await admin.delete("pods", "app", "default", grace_period_seconds=0)
                assert not await allowed(n1, "secrets", "db")  # the pod is gone: so is the right
