from __future__ import annotations

import asyncio

import pytest

from corral.client import Client, Informer


def pod(name: str, node: str | None = None) -> dict:
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


async def eventually(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def test_an_informer_lists_then_follows_changes_with_handlers_and_indexes(server):
    async with server.client() as c:
        await c.create(pod("a", node="n1"))
        by_node = {"node": lambda p: [p.spec.node_name] if p.spec and p.spec.node_name else []}
        informer = Informer(c, "pods", indexers=by_node)
        log: list[tuple[str, str]] = []
        informer.on_add(lambda p: log.append(("add", p.metadata.name)))
        informer.on_update(lambda old, new: log.append(("update", new.metadata.name)))
        informer.on_delete(lambda p: log.append(("delete", p.metadata.name)))
        informer.start()
        try:
            await informer.wait_synced(5)
            assert informer.keys() == ["default/a"]
            await c.create(pod("b", node="n2"))
            await c.patch("pods", "a", {"metadata": {"labels": {"x": "1"}}}, "default")
            await c.delete("pods", "a", "default", grace_period_seconds=0)
            await eventually(lambda: len(log) == 4)
            assert log == [("add", "a"), ("add", "b"), ("update", "a"), ("delete", "a")]
            assert [p.metadata.name for p in informer.by_index("node", "n2")] == ["b"]
            assert informer.by_index("node", "n1") == []
        finally:
            await informer.stop()


async def test_after_compaction_the_informer_relists_and_converges(server):
    async with server.client() as c:
        informer = Informer(c, "pods", raw=True)
        deleted: list[str] = []
        informer.on_delete(lambda p: deleted.append(p["metadata"]["name"]))
        for i in range(3):
            await c.create(pod(f"p{i}"))
        informer.start()
        await informer.wait_synced(5)
        await informer.stop()  # the informer is away while the cluster changes...
        await c.delete("pods", "p0", "default")
        for i in range(3, 6):
            await c.create(pod(f"p{i}"))
        await server.compact(server.store.revision)  # ...and its revision is compacted away
        informer.start()
        try:
            await eventually(lambda: informer.relists >= 2 and sorted(informer.keys()) ==
                             [f"default/p{i}" for i in range(1, 6)])
            assert deleted == ["p0"]  # the missed delete is delivered by the relist
        finally:
            await informer.stop()


async def test_a_running_informer_whose_watch_revision_expires_relists_and_sees_later_changes(server):
    async with server.client() as c:
        await c.create(pod("before"))
        informer = Informer(c, "pods", raw=True, watch_timeout=1)
        informer.start()
        try:
            await informer.wait_synced(5)
            assert informer.relists == 1
            # A write elsewhere moves the store on; compacting there expires the informer's version,
            # so its next watch (after the 1 s timeout) is answered 410 Gone.
            await c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}})
            await server.compact(server.store.revision)
            await eventually(lambda: informer.relists == 2)
            await c.create(pod("after"))
            await eventually(lambda: informer.get("default/after") is not None)
            assert sorted(informer.keys()) == ["default/after", "default/before"]
        finally:
            await informer.stop()


async def test_an_informer_reconnects_when_the_server_comes_back(tmp_path):
    from corral.testing import ServerProcess

    proc = ServerProcess(str(tmp_path / "data"), "--no-scheduler")
    url = proc.start()
    port = url.rsplit(":", 1)[1]
    async with proc.client() as c:
        informer = Informer(c, "pods", raw=True, backoff_initial=0.05, backoff_max=0.2)
        informer.start()
        try:
            await informer.wait_synced(5)
            proc.kill()
            # Same data directory and port: the informer's URL stays valid.
            proc2 = ServerProcess(str(tmp_path / "data"), "--no-scheduler", address=f"127.0.0.1:{port}")
            proc2.start()
            try:
                async def create_when_up() -> None:
                    while True:
                        try:
                            await c.create(pod("after"))
                            return
                        except Exception:
                            await asyncio.sleep(0.1)

                await asyncio.wait_for(create_when_up(), 20)
                await eventually(lambda: informer.get("default/after") is not None, 15)
            finally:
                proc2.stop()
        finally:
            await informer.stop()


async def test_a_watch_cut_mid_chunk_is_a_connection_failure_and_the_informer_survives_it():
    """A server killed while streaming leaves half a chunk: the client must report a lost
    connection (never crash the informer), and the informer must keep trying until a watch works."""
    import logging

    from corral.client import ConnectionFailed

    list_body = b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]}'
    added = (b'{"type":"ADDED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"after-cuts",'
             b'"namespace":"default","resourceVersion":"6"},"spec":{"containers":[]}}}\n')
    watches = 0
    finished = asyncio.Event()

    async def handle(reader, writer):
        nonlocal watches
        request = await reader.readuntil(b"\r\n\r\n")
        if b"watch=true" in request:
            watches += 1
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            if watches <= 4:  # promises 1024 bytes, sends a few, then dies
                writer.write(head + b"400\r\n{\"type\":\"ADDED\"")
            else:  # the fifth watch works: one event, then the stream stays open
                writer.write(head + f"{len(added):x}\r\n".encode() + added + b"\r\n")
                await writer.drain()
                await finished.wait()
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(list_body)).encode() + b"\r\n\r\n" + list_body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with Client(url) as c:
            with pytest.raises(ConnectionFailed):
                async with asyncio.timeout(10):
                    async for _ in c.watch("pods", "default", resource_version="5"):
                        pass
            informer = Informer(c, "pods", raw=True, backoff_initial=0.01, backoff_max=0.05)
            logging.getLogger("corral.client.informer").setLevel(logging.CRITICAL)
            informer.start()
            try:
                await eventually(lambda: informer.get("default/after-cuts") is not None)
                assert watches == 5  # three cut watches of the informer's own, then the one that worked
            finally:
                await informer.stop()
    finally:
        finished.set()
        server.close()
        await server.wait_closed()


async def test_indexes_keep_the_other_objects_of_a_value_and_deletes_hand_over_the_final_state(server):
    async with server.client() as c:
        for name in ("a", "b"):
            await c.create(pod(name, node="n1"))
        informer = Informer(c, "pods", raw=True,
                            indexers={"node": lambda p: [p["spec"]["nodeName"]] if p["spec"].get("nodeName") else []})
        deleted: list[dict] = []
        informer.on_delete(deleted.append)
        informer.start()
        try:
            await informer.wait_synced(5)
            assert sorted(p["metadata"]["name"] for p in informer.list()) == ["a", "b"]
            updated = await c.patch("pods", "a", {"metadata": {"labels": {"last": "words"}}}, "default", raw=True)
            final = await c.delete("pods", "a", "default", grace_period_seconds=0, raw=True)
            await eventually(lambda: len(deleted) == 1)
            assert deleted[0]["metadata"]["resourceVersion"] != updated["metadata"]["resourceVersion"]
            assert deleted[0]["metadata"]["labels"] == {"last": "words"}
            assert [p["metadata"]["name"] for p in informer.by_index("node", "n1")] == ["b"]
            assert [p["metadata"]["name"] for p in informer.list()] == ["b"]
            assert final["metadata"]["name"] == "a"
        finally:
            await informer.stop()
