"""The client cancels its own nested handlers with their parent, whatever the server sends.

Over the handshake-era Streamable HTTP a server's elicitation for a tool call comes on the
call's SSE stream, and so does the server's ``notifications/cancelled`` for it once the call is
cancelled. The client closes that stream as soon as its own cancel is accepted: a server that
sends its notice a moment later (fastmcp does, 3.5 ms after) or never is not heard. Ours runs on
a real hypercorn here behind an ASGI wrapper that holds back its cancel notices (``late``) or
drops them (``never``); the client's elicitation handler must be cancelled all the same.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

from trio_mcp import Context, ElicitResult, HttpTarget, Server, open_client

from .._http import GUARD, eventually, serving_app

VERSION = "2025-11-25"
FORM = {"type": "object", "properties": {"ok": {"type": "boolean"}}}


@attrs.define
class CancelNotices:
    """An ASGI wrapper of the app: what it does with the server's ``notifications/cancelled``
    on a response stream (``late``: held until the client's cancel was answered, then a
    while longer; ``never``: dropped), and whether it saw one."""

    app: Any
    mode: str
    held: list[bytes] = attrs.Factory(list)
    cancel_answered: trio.Event = attrs.Factory(trio.Event)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        is_cancel = False

        async def reading() -> Any:
            nonlocal is_cancel
            message = await receive()
            if b'"notifications/cancelled"' in message.get("body", b""):
                is_cancel = True
            return message

        async def sending(message: Any) -> None:
            body = message.get("body", b"")
            if message["type"] == "http.response.body" and b'"notifications/cancelled"' in body:
                self.held.append(body)
                if self.mode == "never":
                    return
                await self.cancel_answered.wait()
                await trio.sleep(0.05)
            await send(message)
            if is_cancel and message["type"] == "http.response.start":
                self.cancel_answered.set()

        await self.app(scope, reading, sending)


def eliciting_server(tool_cancelled: trio.Event) -> Server:
    server = Server("elicits", "1.0")

    @server.tool()
    async def confirm(ctx: Context) -> str:
        try:
            answer = await ctx.elicit("Go ahead?", FORM)
        except trio.Cancelled:
            tool_cancelled.set()
            raise
        return answer.action

    return server


@pytest.mark.parametrize("mode", ["late", "never"])
async def test_a_cancelled_call_cancels_its_nested_elicitation_handler(mode: str) -> None:
    tool_cancelled = trio.Event()
    asked = trio.Event()
    handler_cancelled = trio.Event()

    async def on_elicit(params: Any) -> ElicitResult:
        asked.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            handler_cancelled.set()
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    wrapper = CancelNotices(eliciting_server(tool_cancelled).http_app(), mode)
    with trio.fail_after(GUARD):
        async with (
            serving_app(wrapper) as url,
            open_client(HttpTarget(url), protocol_version=VERSION, on_elicit=on_elicit) as client,
            trio.open_nursery() as nursery,
        ):
            assert not client.modern
            call = trio.CancelScope()

            async def calling() -> None:
                with call:
                    await client.call_tool("confirm", {})

            nursery.start_soon(calling)
            await asked.wait()
            call.cancel()
            await tool_cancelled.wait()
            await handler_cancelled.wait()
            # The server did send (or would have sent) its notice: the wrapper kept it back.
            await eventually(lambda: bool(wrapper.held))
            # The client stays usable, and the next elicitation is handled afresh.
            assert [t.name for t in await client.list_tools()] == ["confirm"]
