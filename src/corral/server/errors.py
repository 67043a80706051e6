"""API errors as Kubernetes ``Status`` objects: one exception type, constructors named by reason."""

from __future__ import annotations

from typing import Any, Iterable

import msgspec

from corral.api.resources import ResourceType
from corral.api.validation import Cause

__all__ = [
    "ApiError", "not_found", "already_exists", "conflict", "invalid", "bad_request", "gone",
    "forbidden", "too_large", "method_not_allowed", "status_body",
]

_encode = msgspec.json.Encoder().encode


def status_body(code: int, reason: str, message: str, details: dict[str, Any] | None = None,
                status: str = "Failure") -> bytes:
    body: dict[str, Any] = {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": status,
        "message": message, "reason": reason, "code": code,
    }
    if details:
        body["details"] = details
    return _encode(body)


class ApiError(Exception):
    """Raised anywhere in a request; the server answers with the Status it describes."""

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def body(self) -> bytes:
        return status_body(self.code, self.reason, self.message, self.details)


def _details(resource: ResourceType | None, name: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if name:
        out["name"] = name
    if resource is not None:
        if resource.group:
            out["group"] = resource.group
        out["kind"] = resource.plural
    return out


def not_found(resource: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{resource.plural} "{name}" not found', _details(resource, name))


def already_exists(resource: ResourceType, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{resource.plural} "{name}" already exists',
                    _details(resource, name))


def conflict(resource: ResourceType, name: str, why: str | None = None) -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {resource.plural} "{name}": {why}',
                    _details(resource, name))


def invalid(resource: ResourceType, name: str | None, causes: Iterable[Cause]) -> ApiError:
    causes = list(causes)
    listed = ", ".join(str(c) for c in causes)
    message = f'{resource.kind} "{name or ""}" is invalid: ' + (f"[{listed}]" if len(causes) > 1 else listed)
    details = _details(resource, name)
    details["kind"] = resource.kind
    details["causes"] = [{"reason": c.reason, "message": c.message, "field": c.field} for c in causes]
    return ApiError(422, "Invalid", message, details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def forbidden(resource: ResourceType, name: str, why: str) -> ApiError:
    return ApiError(403, "Forbidden", f'{resource.plural} "{name}" is forbidden: {why}',
                    _details(resource, name))


def too_large(limit: int) -> ApiError:
    return ApiError(413, "RequestEntityTooLarge",
                    f"the request body is too large: the limit is {limit} bytes")


def method_not_allowed(method: str, what: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", f"the server does not allow the method {method} on {what}")
