"""The dashboard at ``/ui/``: three static files, served by the API server itself.

Everything the dashboard shows it asks of the API, from the browser, with the user's own bearer
token (pasted, or taken from a kubeconfig pasted whole): the same authentication, authorisation and
flow control as any client, so it shows a user only what that user may read. The files themselves
hold nothing secret and are served to anyone, like ``/version``: only these names, from the
package, never a path from the request. No build step and no library: plain ES modules, a canvas
for the map of nodes, tables that render only the rows in view, watches read as streams.

A strict Content-Security-Policy (scripts and styles from these files only, requests to this
origin only, not framed) keeps a name or label a user wrote from ever running as script; the
script writes text, never HTML, from API data.
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

__all__ = ["UI_PREFIX", "handler", "FILES"]

UI_PREFIX = "/ui/"
FILES = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}
_HEADERS = {
    "Content-Security-Policy": ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                                "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
_cache: dict[str, bytes] = {}


def _body(name: str) -> bytes:
    body = _cache.get(name)
    if body is None:
        body = _cache[name] = resources.files(__package__).joinpath("static", name).read_bytes()
    return body


async def handler(request: web.Request) -> web.Response:
    """``/ui`` → ``/ui/``; ``/ui/`` → the page; ``/ui/NAME`` → one of :data:`FILES`, else 404."""
    if request.path == "/ui":
        return web.Response(status=301, headers={"Location": UI_PREFIX})
    name = request.path[len(UI_PREFIX):] or "index.html"
    content_type = FILES.get(name)
    if content_type is None:
        raise web.HTTPNotFound()
    return web.Response(body=_body(name), content_type=content_type, charset="utf-8", headers=_HEADERS)
