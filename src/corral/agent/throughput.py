"""Network throughput between an agent and the server, as cara measures it: download and upload a
known number of bytes and time them. Reported on the Node as ``status.network.throughput``."""

from __future__ import annotations

import time
from typing import Any

from corral.api.defaults import now_rfc3339

__all__ = ["measure", "format_rate", "THROUGHPUT_PATH"]

THROUGHPUT_PATH = "/corral/v1/throughput"


def format_rate(bits_per_second: float) -> str:
    """``9.4e8`` → ``"940Mbps"``."""
    for unit, scale in (("Gbps", 1e9), ("Mbps", 1e6), ("kbps", 1e3)):
        if bits_per_second >= scale:
            return f"{bits_per_second / scale:.0f}{unit}" if bits_per_second / scale >= 10 else \
                f"{bits_per_second / scale:.1f}{unit}"
    return f"{bits_per_second:.0f}bps"


async def measure(client: Any, nbytes: int) -> dict[str, str]:
    start = time.perf_counter()
    payload = await client.request("GET", THROUGHPUT_PATH, params={"bytes": nbytes})
    download = len(payload) * 8 / max(time.perf_counter() - start, 1e-9)
    body = bytes(nbytes)
    start = time.perf_counter()
    await client.request("POST", THROUGHPUT_PATH, body=body, content_type="application/octet-stream")
    upload = nbytes * 8 / max(time.perf_counter() - start, 1e-9)
    return {"download": format_rate(download), "upload": format_rate(upload), "lastTestTime": now_rfc3339()}
