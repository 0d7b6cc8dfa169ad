"""A server whose tools, prompts, resources and templates need scopes, protected by static
tokens: the scope tests use it in memory, and run it as a stdio child, where its token comes
from the environment (``MCP_ACCESS_TOKEN``).

    python tests/servers/scoped_server.py [--run]

``--run`` serves through ``Server.run()`` rather than ``trio.run(server.serve_stdio)``.
"""

from __future__ import annotations

import sys
from typing import Any

import trio

from trio_mcp import Auth, Context, Principal, Server, StaticTokenVerifier

RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://issuer.example.com"
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

ALICE = Principal("alice", "client-1", frozenset({"mcp:tools"}), issuer=ISSUER)
#: Bob holds the same scopes as Alice: only who he is tells them apart.
BOB = Principal("bob", "client-1", frozenset({"mcp:tools"}), issuer=ISSUER)
#: ``mcp:admin`` implies ``mcp:tools`` and ``files:read`` (see ``IMPLIED``).
ADMIN = Principal("root", "client-2", frozenset({"mcp:admin"}), issuer=ISSUER)
NOBODY = Principal("nobody", "client-3", frozenset(), issuer=ISSUER)
LATE = Principal("late", "client-4", frozenset({"mcp:tools"}), issuer=ISSUER, expires_at=1.0)

TOKENS = {
    "alice-token-1234": ALICE,
    "bob-token-5678": BOB,
    "admin-token-9012": ADMIN,
    "nobody-token-3456": NOBODY,
    "late-token-7890": LATE,
}
IMPLIED = {"mcp:admin": ["mcp:tools", "files:read"]}


def static_auth(**options: Any) -> Auth:
    return Auth(StaticTokenVerifier(TOKENS), RESOURCE, implied_scopes=IMPLIED, **options)


def scoped_server(
    *,
    page_size: int | None = 2,
    auth: Auth | None = None,
    protected: bool = True,
    calls: list[str] | None = None,
    **options: Any,
) -> Server:
    """The server (with :func:`static_auth` unless ``auth`` is given, with none unless
    ``protected``); ``calls`` collects the name of every handler that ran."""
    if auth is None and protected:
        auth = static_auth()
    ran = calls if calls is not None else []
    server = Server("scoped", "1.0.0", page_size=page_size, auth=auth, **options)

    @server.tool()
    def hello() -> str:
        ran.append("hello")
        return "hello"

    @server.tool(scopes="mcp:tools")
    def whoami(ctx: Context) -> str:
        ran.append("whoami")
        assert ctx.auth is not None
        return f"{ctx.auth.subject} {' '.join(sorted(ctx.auth.scopes))}"

    @server.tool(scopes=["mcp:tools"])
    async def greet(ctx: Context) -> str:
        ran.append("greet")
        answer = await ctx.elicit("Your name?", FORM)
        return f"Hello {answer.content['name'] if answer.content else 'nobody'}"

    @server.tool(scopes={"mcp:admin"})
    def deploy() -> str:
        ran.append("deploy")
        return "deployed"

    @server.tool(scopes="mcp:admin files:write")
    def purge() -> str:
        ran.append("purge")
        return "purged"

    @server.prompt()
    def open_prompt() -> str:
        ran.append("open_prompt")
        return "open"

    @server.prompt(scopes="mcp:admin")
    def secret_prompt(topic: str) -> str:
        ran.append("secret_prompt")
        return f"secret {topic}"

    @server.resource("file:///public")
    def public() -> str:
        ran.append("public")
        return "public"

    @server.resource("file:///private", scopes="files:read")
    def private() -> str:
        ran.append("private")
        return "private"

    @server.resource("file:///docs/{name}", scopes="files:read")
    def doc(name: str) -> str:
        ran.append("doc")
        return f"doc {name}"

    @server.resource("file:///notes/{name}")
    def note(name: str) -> str:
        ran.append("note")
        return f"note {name}"

    @server.completion()
    def complete(ref: Any, argument: Any, context: Any) -> list[str]:
        ran.append("complete")
        return ["a", "b"]

    return server


if __name__ == "__main__":
    if "--run" in sys.argv[1:]:
        scoped_server().run()
    else:
        trio.run(scoped_server().serve_stdio)
