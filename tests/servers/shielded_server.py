"""A stdio server whose ``commit`` tool ignores its cancel: its work is shielded, it waits until
the cancel has arrived, then returns a normal result. It says where it is on stderr."""

from __future__ import annotations

import sys

import trio

from trio_mcp import Context, Server


def shielded_server() -> Server:
    server = Server("shielded")

    @server.tool()
    async def commit(ctx: Context) -> str:
        with trio.CancelScope(shield=True):
            sys.stderr.write("entered\n")
            sys.stderr.flush()
            while not ctx.cancelled:  # noqa: ASYNC110 - the cancel flag has no event
                await trio.sleep(0.01)
        sys.stderr.write("returning\n")
        sys.stderr.flush()
        return "committed"

    return server


if __name__ == "__main__":
    trio.run(shielded_server().serve_stdio)
