"""The official-Python-SDK server of ``py_server.py``, served over HTTP+SSE (2024-11-05).

    python -m tests.interop.py_sse_server      (from the repository root)

The same ``MCPServer`` (tools echo, add, slow; a prompt; resources) is served by the SDK's SSE
app (``SseServerTransport`` under Starlette: ``GET /sse``, ``POST /messages/``) under uvicorn on
127.0.0.1 at a free port. The socket is listening before ``serving MCP at URL`` is written to
stderr. ``slow`` writes ``CANCELLED slow <id>`` to stderr when its handler is cancelled.
SIGINT or SIGTERM stops it.
"""

from __future__ import annotations

import socket
import sys

import anyio
import uvicorn

from tests.interop.py_server import server


async def main() -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    host, port = listener.getsockname()
    app = server.sse_app(host=host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    sys.stderr.write(f"serving MCP at http://{host}:{port}/sse\n")
    sys.stderr.flush()
    await uvicorn.Server(config).serve(sockets=[listener])


if __name__ == "__main__":
    anyio.run(main)
