"""The demo server behind ``trio-mcp demo``: a small server that exercises the protocol's
everyday paths (tools with progress and cancellation, a prompt, resources, a template), and an
MCP App: ``add`` is linked to a small adder view (:data:`ADDER_URI`), which a host that renders
apps shows with its result; any other client gets the sum as text.

Served with authorization (``trio-mcp demo --transport http --auth-issuer URL``, or
``demo_server(auth=Auth(...))``) it has two more tools, which show who the access token says
the caller is: ``whoami``, and ``admin``, which needs the :data:`ADMIN_SCOPE` scope of its own
(a per-tool scope: a token without it gets a 403 ``insufficient_scope`` for that call).
"""

from __future__ import annotations

import math
from typing import Annotated

import trio

from ._demo_app import ADDER_HTML, ADDER_URI
from .apps import Apps, Csp, Permissions
from .protocol._types import PromptMessage, TextContent, ToolAnnotations
from .server import Auth, Context, Server, ToolError

README_TEXT = """trio-mcp demo server.

Tools: echo, add, sleep. Prompt: greeting. Resources: demo://readme, demo://greeting/{name}.
App: ui://trio-mcp-demo/adder, the view of add's results (MCP Apps).
"""

#: The scope the ``admin`` tool needs (beyond the scopes every request needs).
ADMIN_SCOPE = "mcp:admin"


def demo_server(*, auth: Auth | None = None) -> Server:
    """Build the demo server (a fresh one each call, so tests do not share state); with
    ``auth``, protected by it and with the signed-in tools (:func:`add_signed_in_tools`)."""
    server = Server(
        "trio-mcp-demo",
        "0.1.0",
        title="trio-mcp demo",
        instructions="A demo server: echo text, add numbers, or sleep with progress.",
        auth=auth,
    )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    async def echo(text: Annotated[str, "The text to send back"]) -> str:
        """Return the text unchanged."""
        return text

    apps = Apps(server)  # MCP Apps: add's results have a view (registered below)

    @apps.tool(ui=ADDER_URI, annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    async def add(
        a: Annotated[float, "First addend"], b: Annotated[float, "Second addend"]
    ) -> int | float:
        """Add two numbers."""
        total = a + b
        if not math.isfinite(total):
            raise ToolError(f"the sum of {a:g} and {b:g} is too large")
        # Past 2**53 a float holds no exact integer: it stays a float, which JSON can carry.
        return int(total) if total.is_integer() and abs(total) <= 2**53 else total

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def sleep(
        seconds: Annotated[float, {"minimum": 0, "maximum": 3600, "description": "How long"}],
        ctx: Context,
    ) -> str:
        """Sleep, reporting progress every 100 ms when asked to; cancellable at any moment."""
        deadline = trio.current_time() + seconds
        ticks = max(1, round(seconds * 10))
        for tick in range(1, ticks + 1):
            await trio.sleep_until(min(deadline, trio.current_time() + 0.1))
            await ctx.report_progress(
                min(tick / 10, seconds), seconds, f"slept {min(tick / 10, seconds):.1f}s"
            )
        return f"slept {seconds:g}s"

    @server.prompt(description="A friendly greeting for someone")
    async def greeting(name: str, style: str = "warm") -> list[PromptMessage]:
        return [
            PromptMessage(role="user", content=TextContent(f"Write a {style} greeting for {name}."))
        ]

    @server.resource("demo://readme", mime_type="text/plain", description="About this server")
    async def readme() -> str:
        return README_TEXT

    @server.resource(
        "demo://greeting/{name}", mime_type="text/plain", description="A greeting by name"
    )
    async def greeting_resource(name: str) -> str:
        return f"Hello, {name}!"

    apps.html(
        ADDER_URI,
        ADDER_HTML,
        name="adder",
        title="Adder",
        description="A view of add's result that can add again",
        csp=Csp(),  # self-contained: it reaches no origin
        permissions=Permissions(clipboard_write=True),
        prefers_border=True,
    )
    if auth is not None:
        add_signed_in_tools(server)
    return server


def add_signed_in_tools(server: Server) -> None:
    """The tools that answer with who the caller is: ``whoami`` (any signed-in caller) and
    ``admin`` (a caller whose token also grants :data:`ADMIN_SCOPE`)."""

    def signed_in(ctx: Context) -> tuple[str, str | None, list[str]]:
        principal = ctx.auth
        if principal is None:
            raise ToolError("no one is signed in: this server runs without authorization")
        return principal.subject or "", principal.client_id, sorted(principal.scopes)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def whoami(ctx: Context) -> str:
        """Who the access token of this request says you are: subject, client and scopes."""
        subject, client_id, scopes = signed_in(ctx)
        return f"{subject} (client {client_id or 'unknown'}; scopes: {' '.join(scopes) or 'none'})"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True), scopes=[ADMIN_SCOPE])
    async def admin(ctx: Context) -> str:
        """For administrators only (the mcp:admin scope): says who is acting as one."""
        subject, _, _ = signed_in(ctx)
        return f"{subject} is signed in as an administrator"
