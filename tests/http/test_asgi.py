"""What the HTTP app's parts share (``http/_asgi.py``): the request's header table."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp.http._asgi import header, header_table, mcp_headers


def one_by_one(raw: list[tuple[bytes, bytes]]) -> dict[bytes, str]:
    """The table as HTTP reads the headers: names in any case, a repeated one's values joined."""
    table: dict[bytes, str] = {}
    for key, value in raw:
        name, text = key.lower(), value.decode("latin-1")
        table[name] = table[name] + ", " + text if name in table else text
    return table


@pytest.mark.parametrize(
    "raw",
    [
        [(b"host", b"127.0.0.1:8000"), (b"accept", b"application/json"), (b"x-n", b"caf\xe9")],
        [(b"Host", b"example"), (b"Mcp-Method", b"tools/call")],  # names not lowercase
        [(b"accept", b"text/plain"), (b"x", b"1"), (b"accept", b"application/json")],  # repeated
        [(b"host", b"a\x00b"), (b"x", b"1")],  # a NUL in a value
        [(b"1", b"digits only"), (b"2", b"no letters")],
        [],
    ],
)
def test_the_header_table_reads_every_request_as_http_does(raw: list[tuple[bytes, bytes]]) -> None:
    scope: dict[str, Any] = {"headers": raw}
    assert header_table(scope) == one_by_one(raw)
    assert header_table(scope) is header_table(scope)  # built once per request


def test_a_repeated_header_is_one_value_that_fails_a_single_valued_check() -> None:
    scope: dict[str, Any] = {"headers": [(b"mcp-method", b"a"), (b"mcp-method", b"b")]}
    assert header(scope, b"mcp-method") == "a, b"


def test_the_mcp_headers_are_picked_by_lowercased_name() -> None:
    raw = [(b"Host", b"h"), (b"MCP-Method", b"tools/call"), (b"mcp-name", b"echo"), (b"x", b"1")]
    assert mcp_headers({"headers": raw}) == {"mcp-method": "tools/call", "mcp-name": "echo"}
