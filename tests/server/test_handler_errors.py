"""A ``ToolError`` or a ``ProtocolError`` raised from any handler (a completion, a custom
method, a resource, a resource template, a prompt) reaches the client with its code and
message, in both eras, served directly and through a mount; only an unexpected exception
becomes -32603, with a generic message that carries none of its text."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from trio_mcp import (
    Client,
    PromptReference,
    ProtocolError,
    Server,
    ToolError,
    open_client,
)
from trio_mcp.protocol import INTERNAL_ERROR, INVALID_PARAMS

MODES = ["legacy", "modern"]
SECRET = "db password hunter2"


def _raise(kind: str) -> None:
    if kind == "tool":
        raise ToolError("the vault is locked until noon")
    if kind == "protocol":
        raise ProtocolError(-32042, "Closed for maintenance", {"until": "noon"})
    raise KeyError(SECRET)


def failing_server() -> Server:
    """Every handler kind, failing as its argument (or params) says."""
    server = Server("failing")

    @server.completion()
    def complete(ref: Any, argument: Any, context: Any) -> list[str]:
        _raise(argument.value)
        return []

    @server.method("custom/fail")
    def custom(params: dict[str, Any]) -> dict[str, Any]:
        _raise(params["kind"])
        return {}

    @server.resource("data://tool")
    def tool_resource() -> str:
        _raise("tool")
        return ""

    @server.resource("data://protocol")
    def protocol_resource() -> str:
        _raise("protocol")
        return ""

    @server.resource("data://unexpected")
    def unexpected_resource() -> str:
        _raise("unexpected")
        return ""

    @server.resource("files://{kind}")
    def template(kind: str) -> str:
        _raise(kind)
        return ""

    @server.prompt()
    def greet(kind: str) -> str:
        _raise(kind)
        return ""

    return server


def mounted() -> Server:
    parent = Server("parent")
    parent.mount(failing_server(), prefix="inner")
    return parent


Call = Callable[[Client, str, str], Awaitable[Any]]

CALLS: dict[str, Call] = {
    "completion": lambda c, kind, p: c.complete(PromptReference(name=f"{p}greet"), "kind", kind),
    "custom method": lambda c, kind, p: c.request("custom/fail", {"kind": kind}),
    "resource": lambda c, kind, p: c.read_resource(
        f"data://{p.rstrip('_') + '/' if p else ''}{kind}"
    ),
    "resource template": lambda c, kind, p: c.read_resource(
        f"files://{p.rstrip('_') + '/' if p else ''}{kind}"
    ),
    "prompt": lambda c, kind, p: c.get_prompt(f"{p}greet", {"kind": kind}),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("handler", sorted(CALLS))
@pytest.mark.parametrize("where", ["served", "mounted"])
async def test_a_handlers_errors_keep_their_code_and_message(
    mode: str, handler: str, where: str
) -> None:
    if where == "mounted" and handler == "custom method":
        pytest.skip("a mount forwards the registrations it names, not custom methods")
    server = failing_server() if where == "served" else mounted()
    prefix = "" if where == "served" else "inner_"
    call = CALLS[handler]
    async with open_client(server, mode=mode) as client:
        with pytest.raises(ProtocolError) as tool:
            await call(client, "tool", prefix)
        assert (tool.value.code, tool.value.message) == (
            INVALID_PARAMS,
            "the vault is locked until noon",
        )
        with pytest.raises(ProtocolError) as protocol:
            await call(client, "protocol", prefix)
        assert (protocol.value.code, protocol.value.message, protocol.value.data) == (
            -32042,
            "Closed for maintenance",
            {"until": "noon"},
        )
        with pytest.raises(ProtocolError) as unexpected:
            await call(client, "unexpected", prefix)
        assert unexpected.value.code == INTERNAL_ERROR
        assert unexpected.value.message == "Internal error"
        assert SECRET not in str(unexpected.value.data)
        # The connection still serves after each.
        await client.ping()
