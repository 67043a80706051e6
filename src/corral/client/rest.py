"""The async REST client every corral component and the CLI use to talk to the API.

Calls take a resource (a :class:`ResourceType`, or a name the CLI accepts: ``"pods"``, ``"Pod"``,
``"po"``) and return typed models from :mod:`corral.api.models`, or plain dicts with ``raw=True``
(the CLI uses dicts so that it shows every field the user wrote, including those corral does not
act on). Errors arrive as :class:`ApiError` subclasses named after the Kubernetes reason.

Note for controllers: a typed object drops fields corral does not model, so write with ``patch`` or
the status subresource rather than read-modify-``update`` of a whole object.

Several servers (``Client("http://a:7443,http://b:7443")``): the client talks to one at a time and
moves to the next when it cannot reach it. A request that never reached a server (connection
refused) is sent to the next one at once, whatever its verb; a read cut off mid-way is retried too;
a write cut off mid-way raises :class:`ConnectionFailed` (it may or may not have been applied), and
the next call goes to the next server.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any, AsyncIterator, Generic, Sequence, TypeVar

import aiohttp
import msgspec

from corral.api.resources import ResourceType, by_kind, lookup
from corral.client.http1 import Broken, Connections, NotReached
from corral.pki.kubeconfig import Credentials

__all__ = [
    "Client", "ApiError", "NotFound", "AlreadyExists", "Conflict", "Invalid", "Gone", "TooManyRequests",
    "ObjectList", "WatchEvent", "ConnectionFailed",
]

T = TypeVar("T")
_decode_any = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode
JSON = "application/json"


class ApiError(Exception):
    """The server answered with a ``Status`` error."""

    def __init__(self, code: int, status: dict[str, Any]) -> None:
        self.code = code
        self.status = status
        self.reason = status.get("reason", "")
        self.message = status.get("message") or f"HTTP {code}"
        super().__init__(self.message)

    @property
    def causes(self) -> list[dict[str, Any]]:
        return (self.status.get("details") or {}).get("causes") or []


class NotFound(ApiError): ...
class AlreadyExists(ApiError): ...
class Conflict(ApiError): ...
class Invalid(ApiError): ...
class Gone(ApiError): ...


class TooManyRequests(ApiError):
    """429: the server is busy and did nothing; it asks to be tried again after ``retry_after`` s."""

    def __init__(self, code: int, status: dict[str, Any], retry_after: float = 1.0) -> None:
        super().__init__(code, status)
        self.retry_after = retry_after


BUSY_RETRIES = 8  # 429s taken before giving up (each after the server's Retry-After)
MAX_RETRY_AFTER = 10.0  # seconds: a longer Retry-After is cut to this


class ConnectionFailed(Exception):
    """The server could not be reached."""


_BY_REASON = {"NotFound": NotFound, "AlreadyExists": AlreadyExists, "Conflict": Conflict,
              "Invalid": Invalid, "Expired": Gone, "Gone": Gone}


def _status_of(body: bytes) -> dict[str, Any]:
    try:
        status = _decode_any(body)
        return status if isinstance(status, dict) else {}
    except (msgspec.DecodeError, ValueError):
        return {}


def _retry_after(header: str | None) -> float:
    try:
        return max(0.0, float(header)) if header else 1.0
    except ValueError:
        return 1.0  # an HTTP date, or nonsense: a second


def _error(code: int, body: bytes) -> ApiError:
    try:
        status = _decode_any(body)
        if not isinstance(status, dict):
            raise ValueError
    except (msgspec.DecodeError, ValueError):
        status = {"message": body.decode(errors="replace").strip() or f"HTTP {code}"}
    cls = _BY_REASON.get(status.get("reason", ""), ApiError)
    if code == 410:
        cls = Gone
    return cls(code, status)


@dataclass(slots=True)
class ObjectList(Generic[T]):
    items: list[T]
    resource_version: str
    continue_token: str = ""


@dataclass(slots=True)
class WatchEvent(Generic[T]):
    type: str  # ADDED | MODIFIED | DELETED | BOOKMARK
    object: T
    resource_version: str


def resolve(resource: ResourceType | str) -> ResourceType:
    return resource if isinstance(resource, ResourceType) else lookup(resource)


class Client:
    """A connection pool to a server, or to one of several. Use ``async with Client(url, credentials=c)``.

    ``base_url``: one URL, several separated by commas, or a list of them (default: the credentials'
    server). ``credentials`` (:class:`corral.pki.Credentials`, e.g. from a kubeconfig) give the CA
    to trust and the token or client certificate to present."""

    def __init__(self, base_url: str | Sequence[str] | None = None, *, credentials: Credentials | None = None,
                 timeout: float = 30.0, user_agent: str = "corral-client", connections: int = 64) -> None:
        if base_url is None:
            if credentials is None:
                raise ValueError("no server URL given")
            base_url = credentials.server
        urls = base_url.split(",") if isinstance(base_url, str) else list(base_url)
        self.urls = [u.strip().rstrip("/") for u in urls if u.strip()]
        if not self.urls:
            raise ValueError("no server URL given")
        self._current = 0
        self._timeout = timeout
        self._connections = connections  # at most this many open at once
        self._session: aiohttp.ClientSession | None = None  # watches and streams
        self._http: Connections | None = None  # every other request
        self.credentials = credentials
        self._headers = {"User-Agent": user_agent, "Accept": JSON, **(credentials.headers() if credentials else {})}
        self._ssl = credentials.ssl_context() if credentials is not None else None
        self._tls_name = {"server_hostname": credentials.server_name} if credentials and credentials.server_name else {}
        self.warnings: list[str] = []  # Warning headers of the last write

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                headers=self._headers,
                connector=aiohttp.TCPConnector(limit=self._connections, ssl=self._ssl if self._ssl is not None else True),
                read_bufsize=4 * 1024 * 1024,
            )
        return self._session

    @property
    def http(self) -> Connections:
        if self._http is None:
            self._http = Connections(ssl_context=self._ssl, server_hostname=self._tls_name.get("server_hostname", ""),
                                     limit=self._connections, headers=self._headers)
        return self._http

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._http is not None:
            http, self._http = self._http, None
            await http.close()

    def use_certificate(self, cert_pem: bytes, key_pem: bytes) -> None:
        """Present a new client certificate (a renewed one) on every connection opened from now on."""
        from corral.pki.kubeconfig import load_cert_pair

        if self._ssl is None:
            raise ValueError("this client has no TLS context to present a certificate from")
        load_cert_pair(self._ssl, cert_pem, key_pem)

    async def cluster_ca(self) -> bytes:
        """The cluster CA's certificate: the one this client trusts, else the one the server hands
        out (on a connection whose trust came from elsewhere, e.g. the system's store)."""
        from corral.pki import CA_PATH

        if self.credentials is not None and self.credentials.ca_pem:
            return self.credentials.ca_pem
        return await self.request("GET", CA_PATH)

    @property
    def base_url(self) -> str:
        """The server this client talks to now."""
        return self.urls[self._current]

    def _failed(self, url: str) -> None:
        """``url`` could not be reached: the next call goes to the next server (once per failure,
        however many calls saw it fail at the same time)."""
        if len(self.urls) > 1 and self.base_url == url:
            self._current = (self._current + 1) % len(self.urls)

    # --- raw requests ------------------------------------------------------------------------------------

    async def request(self, method: str, path: str, *, params: dict[str, Any] | None = None,
                      body: Any = None, content_type: str = JSON) -> bytes:
        """One request; answered 429 (the server is busy; nothing was done), it is sent again after
        the ``Retry-After`` the server asks for, up to ``BUSY_RETRIES`` times."""
        for busy in range(BUSY_RETRIES + 1):
            try:
                return await self._request_once(method, path, params=params, body=body, content_type=content_type)
            except TooManyRequests as exc:
                if busy == BUSY_RETRIES:
                    raise
                # Spread over [Retry-After, twice that): clients refused together do not return together.
                wait = min(exc.retry_after, MAX_RETRY_AFTER)
                await asyncio.sleep(wait * (1 + random.random()))
        raise AssertionError("unreachable")  # pragma: no cover

    async def _request_once(self, method: str, path: str, *, params: dict[str, Any] | None,
                            body: Any, content_type: str) -> bytes:
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else _encode(body)
        query = {k: str(v).lower() if isinstance(v, bool) else str(v)
                 for k, v in params.items() if v is not None and v != ""} if params else None
        idempotent = method in ("GET", "HEAD")
        for attempt in range(len(self.urls)):
            url = self.base_url
            last = attempt == len(self.urls) - 1
            try:
                answer = await self.http.request(method, url, path, query, data, content_type, self._timeout)
            except NotReached as exc:  # never reached the server: safe to send elsewhere
                self._failed(url)
                if last:
                    raise _unreachable(self._names(), exc) from None
                continue
            except Broken as exc:
                self._failed(url)
                if last or not idempotent:
                    raise ConnectionFailed(f"lost the connection to the corral server at {url}: {exc}") from None
                continue
            except TimeoutError:
                self._failed(url)
                if last or not idempotent:
                    raise ConnectionFailed(f"the corral server at {url} did not answer in "
                                           f"{self._timeout:.0f}s") from None
                continue
            self.warnings = [_warning_text(w) for w in answer.header_values("Warning")]
            if answer.status == 429:
                raise TooManyRequests(429, _status_of(answer.body), _retry_after(answer.header("Retry-After")))
            if answer.status >= 400:
                raise _error(answer.status, answer.body)
            return answer.body
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt returns or raises

    def _names(self) -> str:
        return self.urls[0] if len(self.urls) == 1 else "any of " + ", ".join(self.urls)

    def _decode(self, resource: ResourceType, payload: bytes, raw: bool) -> Any:
        if raw:
            return _decode_any(payload)
        return msgspec.json.decode(payload, type=resource.model)

    @staticmethod
    def _namespace(resource: ResourceType, namespace: str | None, obj: Any = None) -> str | None:
        if not resource.namespaced:
            return None
        if namespace:
            return namespace
        if isinstance(obj, dict):
            return (obj.get("metadata") or {}).get("namespace") or "default"
        meta = getattr(obj, "metadata", None)
        return (meta.namespace if meta is not None else None) or "default"

    @staticmethod
    def _name(obj: Any) -> str:
        if isinstance(obj, dict):
            return (obj.get("metadata") or {}).get("name") or ""
        meta = getattr(obj, "metadata", None)
        return (meta.name if meta is not None else None) or ""

    @staticmethod
    def _resource_of(obj: Any) -> ResourceType:
        kind = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
        return by_kind(kind)

    # --- verbs -------------------------------------------------------------------------------------------

    async def get(self, resource: ResourceType | str, name: str, namespace: str | None = None,
                  *, raw: bool = False) -> Any:
        r = resolve(resource)
        payload = await self.request("GET", r.item_path(self._namespace(r, namespace), name))
        return self._decode(r, payload, raw)

    async def list(self, resource: ResourceType | str, namespace: str | None = None, *,
                   label_selector: str | None = None, field_selector: str | None = None,
                   limit: int = 0, continue_token: str = "", raw: bool = False) -> ObjectList:
        """One page (all of it when ``limit`` is 0). ``namespace=None`` lists every namespace."""
        r = resolve(resource)
        payload = await self.request("GET", r.collection_path(namespace), params={
            "labelSelector": label_selector, "fieldSelector": field_selector,
            "limit": limit or None, "continue": continue_token or None,
        })
        doc = _decode_any(payload)
        items = doc.get("items") or []
        if not raw:
            items = [msgspec.convert(i, r.model) for i in items]
        meta = doc.get("metadata") or {}
        return ObjectList(items, meta.get("resourceVersion", ""), meta.get("continue", ""))

    async def create(self, obj: Any, namespace: str | None = None, *, raw: bool | None = None,
                     params: dict[str, Any] | None = None) -> Any:
        r = self._resource_of(obj)
        payload = await self.request("POST", r.collection_path(self._namespace(r, namespace, obj)),
                                     body=obj, params=params)
        return self._decode(r, payload, isinstance(obj, dict) if raw is None else raw)

    async def update(self, obj: Any, namespace: str | None = None, *, subresource: str | None = None,
                     raw: bool | None = None, params: dict[str, Any] | None = None) -> Any:
        r = self._resource_of(obj)
        path = r.item_path(self._namespace(r, namespace, obj), self._name(obj))
        if subresource:
            path += f"/{subresource}"
        payload = await self.request("PUT", path, body=obj, params=params)
        return self._decode(r, payload, isinstance(obj, dict) if raw is None else raw)

    async def update_status(self, obj: Any, namespace: str | None = None, *, raw: bool | None = None) -> Any:
        return await self.update(obj, namespace, subresource="status", raw=raw)

    async def patch(self, resource: ResourceType | str, name: str, patch: Any, namespace: str | None = None,
                    *, patch_type: str = "merge", subresource: str | None = None, raw: bool = False) -> Any:
        """``patch_type``: ``merge`` (RFC 7386), ``json`` (RFC 6902) or ``strategic``."""
        r = resolve(resource)
        path = r.item_path(self._namespace(r, namespace), name) + (f"/{subresource}" if subresource else "")
        ctype = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
                 "strategic": "application/strategic-merge-patch+json"}[patch_type]
        payload = await self.request("PATCH", path, body=patch, content_type=ctype)
        return self._decode(r, payload, raw)

    async def delete(self, resource: ResourceType | str, name: str, namespace: str | None = None, *,
                     grace_period_seconds: int | None = None, resource_version: str | None = None,
                     uid: str | None = None, raw: bool = False) -> Any:
        """Delete; with ``resource_version`` / ``uid`` only if the object still has them (else
        :class:`Conflict`), as Kubernetes' DeleteOptions preconditions."""
        r = resolve(resource)
        preconditions = {k: v for k, v in (("resourceVersion", resource_version), ("uid", uid)) if v}
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": preconditions} if preconditions else None
        payload = await self.request("DELETE", r.item_path(self._namespace(r, namespace), name),
                                     params={"gracePeriodSeconds": grace_period_seconds}, body=body)
        return self._decode(r, payload, raw)

    async def bind(self, namespace: str, pod: str, node: str) -> None:
        """POST the binding subresource: assigns ``pod`` to ``node``; :class:`Conflict` if bound."""
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod, "namespace": namespace},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        await self.request("POST", by_kind("Pod").item_path(namespace, pod) + "/binding", body=body)

    async def watch(self, resource: ResourceType | str, namespace: str | None = None, *,
                    resource_version: str | None = None, label_selector: str | None = None,
                    field_selector: str | None = None, timeout_seconds: int | None = None,
                    bookmarks: bool = True, raw: bool = False) -> AsyncIterator[WatchEvent]:
        """Stream changes. Ends when the server closes the watch; raises :class:`Gone` when the
        ``resource_version`` is too old (the caller relists)."""
        r = resolve(resource)
        params = {"watch": "true", "resourceVersion": resource_version,
                  "labelSelector": label_selector, "fieldSelector": field_selector,
                  "timeoutSeconds": timeout_seconds, "allowWatchBookmarks": "true" if bookmarks else None}
        params = {k: str(v) for k, v in params.items() if v is not None and v != ""}
        for attempt in range(len(self.urls)):
            url = self.base_url
            try:
                async with self.session.get(url + r.collection_path(namespace), params=params,
                                            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._timeout),
                                            **self._tls_name) as resp:
                    if resp.status >= 400:
                        raise _error(resp.status, await resp.read())
                    async for line in resp.content:
                        if not line.strip():
                            continue
                        event = _decode_any(line)
                        etype, obj = event.get("type"), event.get("object") or {}
                        if etype == "ERROR":
                            raise _error(int(obj.get("code") or 500), line and _encode(obj))
                        rv = (obj.get("metadata") or {}).get("resourceVersion", "")
                        if etype != "BOOKMARK" and not raw:
                            obj = msgspec.convert(obj, r.model)
                        yield WatchEvent(etype, obj, rv)
                return
            except aiohttp.ClientConnectorError as exc:  # never reached it: the next server, at once
                self._failed(url)
                if attempt == len(self.urls) - 1:
                    raise _unreachable(self._names(), exc) from None
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError) as exc:
                # A payload error is a stream cut mid-chunk: the server went away during the watch.
                # The caller watches again (an informer does, from its last version): at the next server.
                self._failed(url)
                raise ConnectionFailed(f"watch of {r.plural} at {url} broke: {exc}") from None


def _unreachable(names: str, exc: aiohttp.ClientConnectorError | NotReached) -> ConnectionFailed:
    """The error for a server never reached; a certificate that does not name the host the client
    asked for says how to make it name it."""
    message = f"cannot reach the corral server at {names}: {exc}"
    cert_error = getattr(exc, "certificate_error", None)
    if "mismatch" in str(getattr(cert_error, "verify_message", "")):
        message += (f"; its certificate does not name {exc.host}: start the server with --tls-san {exc.host} "
                    "(or reach it by a name its certificate has)")
    return ConnectionFailed(message)


def _warning_text(header: str) -> str:
    """``299 - "text"`` → ``text``."""
    parts = header.split(" ", 2)
    if len(parts) == 3 and parts[0].isdigit():
        return parts[2].strip().strip('"')
    return header
