"""A server whose lifespan opens a pool-like state, for the lifespan tests.

``python lifespan_server.py LOG [fail] [http]``: the lifespan appends ``open`` and ``close`` to
the file LOG; with ``fail`` its startup raises; with ``http`` it serves Streamable HTTP on a
free loopback port (printing where), else stdio.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs

from trio_mcp import Context, Server


@attrs.define
class Pool:
    name: str
    uses: int = 0
    closed: bool = False


def lifespan_server(log: Path, fail: bool = False) -> Server:
    @asynccontextmanager
    async def lifespan(server: Server) -> AsyncIterator[Pool]:
        if fail:
            raise ConnectionRefusedError("the database at db://nowhere refused the connection")
        with log.open("a") as file:
            file.write("open\n")
        pool = Pool(server.info.name)
        try:
            yield pool
        finally:
            pool.closed = True
            with log.open("a") as file:
                file.write("close\n")

    server = Server("lifespan_server", lifespan=lifespan)

    @server.tool()
    def use(ctx: Context) -> str:
        pool = ctx.lifespan_as(Pool)
        pool.uses += 1
        return f"{pool.name}: use {pool.uses}"

    return server


if __name__ == "__main__":
    args = sys.argv[1:]
    server = lifespan_server(Path(args[0]), fail="fail" in args)
    if "http" in args:
        server.run("http", port=0)
    else:
        server.run()
