"""The client the conformance suite's grant scenarios drive: client credentials, workload
identity, enterprise-managed authorization, DPoP.

``python tests/conformance/grant_client.py <server-url>``, with ``MCP_CONFORMANCE_SCENARIO``
naming the scenario and ``MCP_CONFORMANCE_CONTEXT`` giving its credentials (client ids,
secrets, keys, the IdP's token). Each scenario is what an application would do: build the
auth from its credentials, connect, list and call the tools. What the suite checks (the token
requests, the proofs, the retries) is the library's, never this file's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import trio

from trio_mcp import open_client
from trio_mcp.client._grant_auth import (
    AuthServer,
    ClientCredentialsAuth,
    EnterpriseAuth,
    GrantAuth,
    WorkloadIdentityAuth,
)
from trio_mcp.client._grants import ClientAuth, DPoPSession, token_request
from trio_mcp.client._jose import DPoPKey
from trio_mcp.client._tokens import TokenSet

Context = dict[str, Any]


async def use_the_server(url: str, auth: httpx.Auth, version: str) -> None:
    """Connect through ``auth``, list the tools and call each one."""
    async with (
        httpx.AsyncClient(auth=auth, timeout=httpx.Timeout(20.0, read=None)) as http,
        open_client(url, protocol_version=version, http_client=http, default_timeout=20) as client,
    ):
        for tool in await client.list_tools():
            await client.call_tool(tool.name, {})


def _version() -> str:
    return os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")


async def client_credentials_jwt(url: str, context: Context) -> None:
    key = context["private_key_pem"]
    client_auth = ClientAuth.private_key_jwt(
        context["client_id"], key, alg=context.get("signing_algorithm")
    )
    await use_the_server(url, ClientCredentialsAuth(client_auth), _version())


async def client_credentials_basic(url: str, context: Context) -> None:
    client_auth = ClientAuth.basic(context["client_id"], context["client_secret"])
    await use_the_server(url, ClientCredentialsAuth(client_auth), _version())


async def enterprise_managed_authorization(url: str, context: Context) -> None:
    auth = EnterpriseAuth(
        idp_token_endpoint=context["idp_token_endpoint"],
        id_token=context["idp_id_token"],
        idp_client_auth=ClientAuth.none(context["idp_client_id"]),
        client_auth=ClientAuth.basic(context["client_id"], context["client_secret"]),
    )
    await use_the_server(url, auth, _version())


async def wif_jwt_bearer(url: str, context: Context) -> None:
    auth = WorkloadIdentityAuth(context["valid_jwt"], client_id=context["client_id"])
    await use_the_server(url, auth, _version())


# The DPoP scenarios judge an authorization_code token request, so the grant here is the
# interactive flow with the browser step done headlessly (the scenario's authorization endpoint
# redirects at once): register, authorize with PKCE, redeem the code. What they check (the proof
# at the token endpoint, the nonces, the DPoP scheme and fresh proofs on every MCP request) is
# done by the library's token_request and DPoPSession.
REDIRECT_URI = "http://127.0.0.1:9/callback"


async def headless_authorization_code(
    http: httpx.AsyncClient, server: AuthServer, dpop: DPoPSession | None
) -> TokenSet:
    registered = await http.post(
        server.metadata["registration_endpoint"],
        json={
            "client_name": "trio-mcp conformance client",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code"],
            "token_endpoint_auth_method": "none",
            "application_type": "native",
        },
    )
    registered.raise_for_status()
    client_id = registered.json()["client_id"]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
    state = secrets.token_urlsafe(16)
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT_URI,
        "code_challenge": challenge.rstrip(b"=").decode(),
        "code_challenge_method": "S256",
        "state": state,
        "resource": server.resource,
    }
    if server.scope:
        params["scope"] = server.scope
    redirect = await http.get(server.metadata["authorization_endpoint"], params=params)
    answer = parse_qs(urlsplit(redirect.headers["Location"]).query)
    assert answer["state"] == [state], "the redirect's state is not ours"
    form = {
        "grant_type": "authorization_code",
        "code": answer["code"][0],
        "code_verifier": verifier,
        "redirect_uri": REDIRECT_URI,
        "resource": server.resource,
    }
    return await token_request(
        http, server.token_endpoint, form, client_auth=ClientAuth.none(client_id), dpop=dpop
    )


async def dpop(url: str, context: Context) -> None:
    auth = GrantAuth(headless_authorization_code, dpop=DPoPKey.generate())
    await use_the_server(url, auth, _version())


SCENARIOS: dict[str, Callable[[str, Context], Awaitable[None]]] = {
    "auth/client-credentials-jwt": client_credentials_jwt,
    "auth/client-credentials-basic": client_credentials_basic,
    "auth/enterprise-managed-authorization": enterprise_managed_authorization,
    "auth/wif-jwt-bearer": wif_jwt_bearer,
    "auth/dpop": dpop,
    "auth/dpop-nonce": dpop,
}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: grant_client.py <server-url>", file=sys.stderr)
        return 2
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    scenario = SCENARIOS.get(name)
    if scenario is None:
        print(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    trio.run(scenario, argv[1], context)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
