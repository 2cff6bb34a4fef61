"""An in-process aiohttp app on a free local port, for client tests that need a real HTTP server but no process."""

from __future__ import annotations

from typing import Any, Awaitable, Callable


async def serve_app(path: str, handler: Callable[[Any], Awaitable[Any]]) -> tuple[Any, str]:
    """Serve ``handler`` for POST ``path`` on 127.0.0.1 (a free port) inside the running event loop.

    Returns:
        (the app runner — ``await runner.cleanup()`` stops it —, the base URL ``http://127.0.0.1:PORT/v1``).
    """
    from aiohttp import web

    app = web.Application()
    app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}/v1"
