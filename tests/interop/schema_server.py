"""A trio_mcp server for ``test_official_schema.py``, served over stdio.

Its tools are what a fastmcp user writes first: an ``int`` parameter a client may send as a
string, constrained parameters, a pydantic model, and a tool whose return value does not match
its declared type.
"""

from __future__ import annotations

from typing import Annotated

import pydantic
import trio

from trio_mcp import Server

server = Server("schema-interop", "1.0.0")


class Order(pydantic.BaseModel):
    sku: str
    qty: int = pydantic.Field(1, ge=1)


@server.tool()
def double(n: int) -> int:
    """Twice n."""
    return 2 * n


@server.tool(strict=True)
def double_strict(n: int) -> int:
    """Twice n, and n must be a JSON number."""
    return 2 * n


@server.tool()
def stars(n: Annotated[int, pydantic.Field(ge=1, le=5)], repeat: int = pydantic.Field(1)) -> str:
    """n stars, repeat times."""
    return "*" * n * repeat


@server.tool()
def place(order: Order) -> Order:
    """Echo an order."""
    return order


@server.tool()
def broken() -> int:
    """Declared to return an int, returns a string."""
    return "not an int"  # type: ignore[return-value]


if __name__ == "__main__":
    trio.run(server.serve_stdio)
