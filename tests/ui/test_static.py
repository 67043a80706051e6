"""The dashboard's files: served to anyone, and nothing else under /ui/ — no path from the request
reaches the disk, every response carries the policy that keeps API data from running as script,
and the API behind the page still asks for credentials."""

from __future__ import annotations

import aiohttp
import pytest

from corral.testing.server import running_server


@pytest.fixture
async def server(tmp_path):
    async with running_server(str(tmp_path / "ui"), scheduler=False, controllers=False) as s:
        yield s


async def get(server, path: str, **headers):
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{server.url}{path}", ssl=False, allow_redirects=False, headers=headers) as r:
            return r.status, r.headers, await r.read()


async def test_the_page_and_its_two_files_are_served_without_credentials_with_a_strict_policy(server):
    for path, kind, marker in (("/ui/", "text/html", b'<script type="module" src="app.js">'),
                               ("/ui/app.js", "text/javascript", b"textContent"),
                               ("/ui/style.css", "text/css", b"--cordoned")):
        status, headers, body = await get(server, path)
        assert status == 200 and headers["Content-Type"].startswith(kind) and marker in body
        policy = headers["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe" not in policy
        assert headers["X-Content-Type-Options"] == "nosniff"
    status, headers, _ = await get(server, "/ui")
    assert status == 301 and headers["Location"] == "/ui/"


@pytest.mark.parametrize("path", ["/ui/admin.kubeconfig", "/ui/../admin.kubeconfig", "/ui/%2e%2e/admin.kubeconfig",
                                  "/ui/static/app.js", "/ui/__init__.py", "/ui/app.js/", "/ui//etc/passwd"])
async def test_nothing_else_under_ui_is_served(server, path):
    status, _, body = await get(server, path)
    assert status in (401, 404), (status, body[:200])
    assert b"BEGIN" not in body and b"token" not in body and b"import" not in body


async def test_the_api_the_page_reads_still_refuses_anonymous_requests(server):
    status, _, _ = await get(server, "/api/v1/pods")
    assert status == 401
    status, _, _ = await get(server, "/api/v1/pods", Referer=f"{server.url}/ui/")
    assert status == 401
