"""The demo server for ASGI servers: ``hypercorn --worker-class trio trio_mcp.demo:app``.

``server`` is the demo :class:`~trio_mcp.Server`; ``app`` its Streamable HTTP endpoint at
``/mcp`` (Host and Origin checks on for loopback binds).
"""

from __future__ import annotations

from ._demo import demo_server

server = demo_server()
app = server.http_app()

__all__ = ["app", "server"]
