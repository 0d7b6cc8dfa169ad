"""Sign in to a protected MCP server with the official Python SDK's OAuth client, then use it.

    python -m tests.interop.py_oauth_client MODE URL [--client-id ID] [TOOL]...
    (from the repository root)

The SDK's ``OAuthClientProvider`` (an ``httpx2.Auth``) does the whole flow on its own: the 401,
the Protected Resource Metadata, the authorization server's metadata, dynamic client
registration, PKCE, the resource indicator, the token, and a new authorization when a call is
refused for a missing scope. MODE is the SDK client's ``mode=`` (``legacy`` or ``auto``). With
``--client-id`` the client is the one registered in advance, its secret in the environment
variable ``OAUTH_CLIENT_SECRET`` (``client_secret_basic``), and nothing is registered. (A
dynamically registered client of this SDK registers for the scope of its first authorization,
and an authorization server that holds it to that, as oidc-provider does, then refuses a
step-up to a wider scope.)

The browser step is the parent's: when the SDK wants the user at the authorization URL, this
script writes ``{"authorize": URL}`` as one line on stdout and reads one line from stdin, the
redirect the sign-in ended with (the parent signs in with ``tests/auth/_oidc.py:drive_login``,
which runs on Trio and so not here). Once signed in it lists the tools and calls each TOOL
(no arguments), lists the tools again, then writes ``{"report": {...}}``: the tool names
before and after the calls, each call's text and error flag, and the scope asked for at each
authorization. No token is ever written. It then exits.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.to_thread
import httpx2
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

#: Where the provider sends the browser back to; nothing listens there: the parent hands the
#: redirect over instead.
REDIRECT_URI = "http://127.0.0.1:53682/callback"


class MemoryStorage:
    """The SDK's ``TokenStorage``, in memory: nothing outlives the run."""

    def __init__(self, client: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client = client

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class ParentBrowser:
    """The SDK's redirect and callback handlers: the authorization URL goes to the parent,
    the redirect comes back from it."""

    def __init__(self) -> None:
        self.scopes: list[str | None] = []

    async def redirect(self, authorization_url: str) -> None:
        query = parse_qs(urlsplit(authorization_url).query)
        self.scopes.append(query["scope"][0] if "scope" in query else None)
        say({"authorize": authorization_url})

    async def callback(self) -> AuthorizationCodeResult:
        line = await anyio.to_thread.run_sync(sys.stdin.readline)
        if not line:
            raise RuntimeError("the parent closed stdin instead of handing over the redirect")
        query = {k: v[0] for k, v in parse_qs(urlsplit(line.strip()).query).items()}
        if "code" not in query:
            raise RuntimeError(f"the sign-in ended without a code: {query.get('error')}")
        return AuthorizationCodeResult(
            code=query["code"], state=query.get("state"), iss=query.get("iss")
        )


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def pre_registered(client_id: str) -> OAuthClientInformationFull:
    return OAuthClientInformationFull(
        client_id=client_id,
        client_secret=os.environ["OAUTH_CLIENT_SECRET"],
        redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]  # pydantic parses it
        grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method="client_secret_basic",
    )


async def drive(mode: str, url: str, client_id: str | None, tools: list[str]) -> None:
    browser = ParentBrowser()
    provider = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="official python sdk (interop)",
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]  # pydantic parses it
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=MemoryStorage(pre_registered(client_id) if client_id else None),
        redirect_handler=browser.redirect,
        callback_handler=browser.callback,
    )
    http: httpx2.AsyncClient = create_mcp_http_client(auth=provider)
    report: dict[str, Any] = {"calls": {}}
    async with (
        http,
        Client(streamable_http_client(url, http_client=http), mode=mode, cache=None) as client,
    ):
        report["tools"] = sorted(tool.name for tool in (await client.list_tools()).tools)
        for name in tools:
            result = await client.call_tool(name, {})
            report["calls"][name] = {"text": text_of(result), "isError": result.is_error}
        report["tools_after"] = sorted(tool.name for tool in (await client.list_tools()).tools)
    report["authorization_scopes"] = browser.scopes
    say({"report": report})


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: py_oauth_client.py MODE URL [--client-id ID] [TOOL]...\n")
        return 2
    mode, url, *rest = argv
    client_id = None
    if rest[:1] == ["--client-id"]:
        client_id, rest = rest[1], rest[2:]
    anyio.run(drive, mode, url, client_id, rest)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
