"""The benchmark server built on the official Python SDK (``mcp``), over Streamable HTTP.

    python py_http_server.py --port PORT [--json] [--stamps PATH]

The tools of ``py_server.py`` served the way the SDK serves Streamable HTTP by default:
``MCPServer.run("streamable-http")``, its Starlette app under uvicorn, stateful sessions.
``--json`` passes ``json_response=True`` (one JSON body per POST instead of an SSE stream).
The SDK speaks the handshake era only.
"""

from __future__ import annotations

import argparse
import os

from py_server import build


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--json", action="store_true", help="JSON responses instead of SSE")
    parser.add_argument("--stamps", help="append cancellation timestamps (ns) to this file")
    args = parser.parse_args()
    fd = None
    if args.stamps:
        fd = os.open(args.stamps, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    build(fd).run("streamable-http", host="127.0.0.1", port=args.port, json_response=args.json)


if __name__ == "__main__":
    main()
