"""The handlers of explain and plan, and the forwarding of both from a follower to the leader."""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from corral.api.resources import by_kind
from corral.pki import MASTERS_GROUP
from corral.pki.kubeconfig import Credentials
from corral.plan import PLAN_PATH, PLAN_VERSION_PATH
from corral.server import errors
from corral.server.http.routes import read_body

__all__ = ["SchedulingRoutes", "EXPLAIN_PATH"]

EXPLAIN_PATH = "/corral/v1/namespaces/{namespace}/pods/{name}/explain"


class SchedulingRoutes:
    """Bound to a server (its scheduler, elector, watch cache and API), which it reads at each
    request: a server that starts or stops leading gains or loses its scheduler meanwhile."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self._own_credentials: Credentials | None = None  # this server as a client of the leader

    def add_to(self, app: web.Application) -> None:
        app.router.add_get(EXPLAIN_PATH, self.explain)
        app.router.add_post(PLAN_PATH, self.plan)
        app.router.add_get(PLAN_VERSION_PATH, self.plan)

    def _scheduler(self) -> Any:
        """The scheduler, or None where a follower forwards; 404 where none runs at all."""
        s = self.server
        if s.scheduler is None and s.elector is None:
            raise errors.ApiError(404, "NotFound", "the scheduler does not run in this server")
        return s.scheduler

    async def explain(self, request: web.Request) -> web.Response:
        """Why a pod goes (or cannot go) where it does: every node, rejected by whom or scored how."""
        scheduler = self._scheduler()
        if scheduler is None:
            return await self.at_leader(request)
        ns, name = request.match_info["namespace"], request.match_info["name"]
        record = await self.server.api.current(by_kind("Pod"), ns, name)
        try:
            report = await scheduler.explain_with_extenders(record.obj)
        except LookupError as exc:
            raise errors.bad_request(str(exc)) from None
        except (RuntimeError, TimeoutError) as exc:  # a scheduler process starting again, or not answering
            raise errors.ApiError(503, "ServiceUnavailable", f"the scheduler process cannot explain now: {exc}") from None
        return web.Response(body=msgspec.json.encode(report), content_type="application/json")

    async def plan(self, request: web.Request) -> web.Response:
        """A dry run of manifests on a copy of the scheduler's state (POST), or the plan version now (GET)."""
        scheduler = self._scheduler()
        if scheduler is None:
            return await self.at_leader(request)
        from corral.scheduler.process import SchedulerProcess
        from corral.server.scheduling.plan import make_plan, make_plan_apart, plan_version, plan_version_apart

        if isinstance(scheduler, SchedulerProcess):
            try:
                if request.method == "GET":
                    body = await plan_version_apart(scheduler, self.server.api)
                else:
                    body = await make_plan_apart(request, scheduler, self.server.api)
            except (RuntimeError, TimeoutError) as exc:  # starting again, or not answering
                raise errors.ApiError(503, "ServiceUnavailable", f"the scheduler process cannot plan now: {exc}") from None
            return web.Response(body=body, content_type="application/json")

        revision = self.server.cache.revision
        if request.method == "GET":
            body = plan_version(scheduler, revision)
        else:
            body = await make_plan(request, scheduler, self.server.api, revision)
        return web.Response(body=body, content_type="application/json")

    async def at_leader(self, request: web.Request) -> web.Response:
        """A follower has no scheduler: the leader answers, at the URL it wrote on its Lease."""
        from corral.client.rest import ApiError, Client, ConnectionFailed
        from corral.server.control.leader import LEADER_URL_ANNOTATION

        s = self.server
        lease = s.cache.get(s.elector.key)
        meta = (lease.obj.get("metadata") or {}) if lease is not None else {}
        holder = ((lease.obj.get("spec") or {}).get("holderIdentity") if lease is not None else "") or ""
        url = (meta.get("annotations") or {}).get(LEADER_URL_ANNOTATION, "")
        if not holder or not url or holder == s.elector.identity:
            raise errors.ApiError(503, "ServiceUnavailable", "no server leads right now (an election is under "
                                  "way); try again in a few seconds")
        body = await read_body(request) if request.method == "POST" else None
        # Asked as this server: the follower has already authenticated and authorised the user. (A
        # plan's admission then runs as this server.)
        if self._own_credentials is None:
            self._own_credentials = s.issue_credentials("system:apiserver", [MASTERS_GROUP])
        own = self._own_credentials.with_server(url)
        try:
            async with Client(credentials=own, user_agent="corral-server") as leader:
                answer = await leader.request(request.method, request.path_qs, body=body)
                return web.Response(body=answer, content_type="application/json")
        except ApiError as exc:
            return web.Response(body=msgspec.json.encode(exc.status), status=exc.code, content_type="application/json")
        except ConnectionFailed as exc:
            raise errors.ApiError(503, "ServiceUnavailable", f"the leader {holder} at {url} did not answer: {exc}") from None
