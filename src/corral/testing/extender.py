"""A small scheduler extender, run as its own process by tests (``python -m corral.testing.extender``).

It speaks kube-scheduler's extender wire format over HTTPS: ``/filter`` passes the nodes labelled
``extender.test/allow: "yes"`` (the others fail, or fail unresolvably when labelled
``extender.test/allow: never``, or are left out of the answer when labelled ``silent``),
``/prioritize`` scores each node with its ``extender.test/score`` label (0–10), ``/bind`` records the binding (``GET /binds`` lists them). ``/preempt`` keeps
preemption's candidates as proposed, except nodes named ``no-…`` (dropped), ``bogus-…`` (the
pod of uid ``uid-default-keeper`` named a victim too) and ``few-…`` (only the first victim named); ``/preempt-go`` answers the same with the capitalised keys
of kube-scheduler's untagged Go types. ``GET /preempts`` lists what preemption sent, ``GET /filters``
and ``GET /prioritizes`` each filter or prioritize call's pod and nodes. With
``--client-ca`` it accepts only clients with a certificate that CA signed. It prints its port once
it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import sys

from aiohttp import web

ALLOW, SCORE = "extender.test/allow", "extender.test/score"


def _nodes(args: dict) -> list[tuple[str, dict]]:
    if args.get("nodes") is not None:
        return [(n["metadata"]["name"], (n["metadata"].get("labels") or {})) for n in args["nodes"].get("items") or ()]
    return [(name, {}) for name in args.get("nodenames") or ()]


def _call(args: dict) -> dict:
    """What ``GET /filters`` and ``GET /prioritizes`` list of one call: the pod's name and the nodes."""
    return {"pod": ((args.get("pod") or {}).get("metadata") or {}).get("name"),
            "nodes": [name for name, _ in _nodes(args)]}


async def filter_(request: web.Request) -> web.Response:
    args = await request.json()
    request.app["filters"].append(_call(args))
    passed, failed, unresolvable = [], {}, {}
    for name, labels in _nodes(args):
        allow = labels.get(ALLOW)
        if allow == "yes":
            passed.append(name)
        elif allow == "never":
            unresolvable[name] = "node(s) are never allowed by the test extender"
        elif allow == "silent":  # neither passed nor failed, with no reason given
            continue
        else:
            failed[name] = "node(s) not allowed by the test extender"
    return web.json_response({"nodenames": passed, "failedNodes": failed, "failedAndUnresolvableNodes": unresolvable})


async def prioritize(request: web.Request) -> web.Response:
    args = await request.json()
    request.app["prioritizes"].append(_call(args))
    return web.json_response([{"host": name, "score": int(labels.get(SCORE, "0"))} for name, labels in _nodes(args)])


async def bind(request: web.Request) -> web.Response:
    request.app["binds"].append(await request.json())
    return web.json_response({})


async def recorded(request: web.Request) -> web.Response:
    """``GET /binds``, ``/preempts``, ``/filters``, ``/prioritizes``: the calls of that kind so far."""
    return web.json_response(request.app[request.match_info["calls"]])


def _preempt(args: dict) -> dict[str, list[str]]:
    """Node → the victims' uids the extender wants gone."""
    request = args.get("nodeNameToMetaVictims") or args.get("nodeNameToVictims") or {}
    out = {}
    for node, victims in request.items():
        if node.startswith("no-"):
            continue
        out[node] = [p.get("uid") or p["metadata"]["uid"] for p in victims["pods"]]
        if node.startswith("bogus-"):
            out[node].append("uid-default-keeper")
        if node.startswith("few-"):
            del out[node][1:]
    return out


async def _preempt_answer(request: web.Request, key) -> web.Response:
    args = await request.json()
    request.app["preempts"].append(args)
    return web.json_response({key("nodeNameToMetaVictims"): {
        node: {key("pods"): [{key("uid"): uid} for uid in uids], key("numPDBViolations"): 0}
        for node, uids in _preempt(args).items()}})


async def preempt(request: web.Request) -> web.Response:
    return await _preempt_answer(request, lambda name: name)


async def preempt_go(request: web.Request) -> web.Response:
    """The same, in the keys Go's encoder writes for kube-scheduler's untagged types."""
    return await _preempt_answer(request, lambda name: "UID" if name == "uid" else name[0].upper() + name[1:])


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--client-ca")
    options = parser.parse_args()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(options.cert, options.key)
    if options.client_ca:
        ctx.load_verify_locations(options.client_ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    app = web.Application()
    app["binds"], app["preempts"], app["filters"], app["prioritizes"] = [], [], [], []
    app.add_routes([web.post("/scheduler/filter", filter_), web.post("/scheduler/prioritize", prioritize),
                    web.post("/scheduler/bind", bind),
                    web.post("/scheduler/preempt", preempt), web.post("/scheduler/preempt-go", preempt_go),
                    web.get("/scheduler/{calls:binds|preempts|filters|prioritizes}", recorded)])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(json.dumps({"port": port}), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
