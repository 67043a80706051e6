"""The ``corral`` command: click commands that cross into the async client with ``asyncio.run``.

Heavy imports (rich, yaml, aiohttp) happen inside the commands that need them, so ``corral --help``
and ``corral version`` start quickly.
"""
