"""What a request asks, in the authorisers' terms, from its method, path and query alone.

Read before the body is (authorisation comes before decoding), as kube-apiserver's request-info
step does: ``/api/v1/...`` and ``/apis/{group}/{version}/...`` are resource requests (verb from the
method — ``list`` or ``watch`` for a collection GET, ``deletecollection`` for a collection DELETE —
namespace, resource, name, subresource); corral's own ``/corral/v1/namespaces/{ns}/pods/{name}/explain``
is the ``explain`` subresource of pods; every other path is a non-resource URL whose verb is the
lower-case method. A create names its object only in the body: admission checks that name.
"""

from __future__ import annotations

from typing import Callable, Mapping

from corral.server.authz.rbac import Attributes
from corral.server.http.params import is_true

__all__ = ["request_attributes", "exact_fields", "RememberedAttributes", "MAX_REMEMBERED"]

_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_EXPLAIN_PREFIX = "/corral/v1/namespaces/"
_STREAMS = ("exec", "attach", "portforward")
MAX_REMEMBERED = 8192  # distinct (user, method, path, query) remembered before starting over
_NO_QUERY: Mapping[str, str] = {}


def exact_fields(selector: str | None) -> tuple[tuple[str, str], ...]:
    """The ``field=value`` (or ``==``) requirements of a field selector; ``!=`` ones say nothing
    about what a request is limited to, so they are left out."""
    if not selector:
        return ()
    out = []
    for term in selector.split(","):
        if "!=" in term:
            continue
        key, sep, value = term.partition("==") if "==" in term else term.partition("=")
        if sep:
            out.append((key.strip(), value.strip()))
    return tuple(out)


def request_attributes(user: str, groups: tuple[str, ...], method: str, path: str,
                       query: Mapping[str, str]) -> Attributes:
    segs = [s for s in path.split("/") if s]
    if len(segs) >= 3 and segs[0] == "api":
        rest, group = segs[2:], ""
    elif len(segs) >= 4 and segs[0] == "apis":
        rest, group = segs[3:], segs[1]
    elif len(segs) == 7 and path.startswith(_EXPLAIN_PREFIX) and segs[3] == "pods" and segs[5] == "explain":
        return Attributes(user, groups, "get", "", "pods", "explain", segs[2], segs[4])
    else:
        return Attributes(user, groups, method.lower(), path=path)
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces":
        # As Kubernetes: a namespace's own object (and its status) is in that namespace too.
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""  # as Kubernetes: nodes/NAME/proxy/metrics/resource is nodes/proxy
    verb = _VERBS.get(method, method.lower())
    if resource == "pods" and sub in _STREAMS:
        verb = "create"  # a WebSocket upgrade is a GET; it starts a command all the same (Kubernetes asks create)
    if not name:
        if verb == "get":
            verb = "watch" if is_true(query.get("watch")) else "list"
        elif verb == "delete":
            verb = "deletecollection"
    fields = exact_fields(query.get("fieldSelector")) if verb in ("list", "watch", "deletecollection") else ()
    return Attributes(user, groups, verb, group, resource, sub, namespace, name, fields=fields)


class RememberedAttributes:
    """:func:`request_attributes` remembered by everything they depend on (user, groups, method,
    path, raw query): clients repeat the same few requests, and working them out again cost ~2.7 µs
    of every request (the query is parsed only for a request not seen before). Bounded: past
    ``limit`` distinct requests it starts over."""

    def __init__(self, limit: int = MAX_REMEMBERED) -> None:
        self.limit = limit
        self._known: dict[tuple, Attributes] = {}

    def __call__(self, user: str, groups: tuple[str, ...], method: str, path: str, query_string: str,
                 query: Callable[[], Mapping[str, str]]) -> Attributes:
        key = (user, groups, method, path, query_string)
        known = self._known.get(key)
        if known is None:
            known = request_attributes(user, groups, method, path, query() if query_string else _NO_QUERY)
            if len(self._known) >= self.limit:
                self._known.clear()
            self._known[key] = known
        return known
