"""The demo server over stdio with a 1 KiB line limit."""

from __future__ import annotations

import trio

from trio_mcp._demo import demo_server

if __name__ == "__main__":
    trio.run(lambda: demo_server().serve_stdio(max_line_bytes=1024))
