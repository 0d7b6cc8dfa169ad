"""Middleware for :class:`~trio_mcp.Server`: the built-ins, and the types to write your own.

``Server(middleware=[LoggingMiddleware(), RateLimitMiddleware(rate=5, burst=10)])`` or
``@server.middleware``; each is ``async def mw(ctx: MiddlewareContext, call_next) -> dict``.
See ``docs/middleware.md``.
"""

from __future__ import annotations

# The module's own ``__all__`` is the one list of what is public here: a star import re-exports
# exactly it, so the two cannot drift apart.
from .server._middleware import *  # noqa: F403
from .server._middleware import __all__ as __all__
