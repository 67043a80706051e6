"""Clients of the in-process server (the ``server`` fixture of tests/conftest.py)."""

from __future__ import annotations

import aiohttp
import pytest



@pytest.fixture
async def c(server):
    """corral's API client."""
    async with server.client() as client:
        yield client


@pytest.fixture
async def http(server):
    """Plain HTTP, for what a client would hide: status codes, raw bodies, headers."""
    async with aiohttp.ClientSession(server.url, headers=server.admin.headers(),
                                     connector=aiohttp.TCPConnector(ssl=server.admin.ssl_context())) as session:
        yield session
