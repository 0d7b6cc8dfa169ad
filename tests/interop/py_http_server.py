"""The official-Python-SDK server of ``py_server.py``, served over Streamable HTTP.

    python -m tests.interop.py_http_server      (from the repository root)

The same ``MCPServer`` (tools echo, add, slow; a prompt; resources) is served by the SDK's
Streamable HTTP app under uvicorn on 127.0.0.1 at a free port. The socket is bound and
listening before ``serving MCP at URL`` is written to stderr, so a client may connect at once
(uvicorn accepts once the app's lifespan has started). ``slow`` writes ``CANCELLED slow <id>``
to stderr when its handler is cancelled. SIGINT or SIGTERM stops it.
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
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    sys.stderr.write(f"serving MCP at http://{host}:{port}/mcp\n")
    sys.stderr.flush()
    await uvicorn.Server(config).serve(sockets=[listener])


if __name__ == "__main__":
    anyio.run(main)
