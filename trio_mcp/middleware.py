"""Middleware for :class:`~trio_mcp.Server`: the built-ins, and the types to write your own.

``Server(middleware=[LoggingMiddleware(), RateLimitMiddleware(rate=5, burst=10)])`` or
``@server.middleware``; each is ``async def mw(ctx: MiddlewareContext, call_next) -> dict``.
See ``docs/middleware.md``.
"""

from __future__ import annotations

from .server._middleware import (
    CACHED_METHODS,
    RATE_LIMITED,
    CallNext,
    ErrorHandlingMiddleware,
    ErrorHook,
    LoggingMiddleware,
    Middleware,
    MiddlewareContext,
    MiddlewareServer,
    RateLimitMiddleware,
    ResponseCacheMiddleware,
    TimingMiddleware,
    TimingStats,
)

__all__ = [
    "CACHED_METHODS",
    "RATE_LIMITED",
    "CallNext",
    "ErrorHandlingMiddleware",
    "ErrorHook",
    "LoggingMiddleware",
    "Middleware",
    "MiddlewareContext",
    "MiddlewareServer",
    "RateLimitMiddleware",
    "ResponseCacheMiddleware",
    "TimingMiddleware",
    "TimingStats",
]
