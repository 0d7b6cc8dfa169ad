"""The client the official MCP conformance suite's client scenarios drive.

``python tests/conformance/client.py <server-url>``: the suite starts a scenario server, then runs
this with ``MCP_CONFORMANCE_SCENARIO`` (what to do), ``MCP_CONFORMANCE_PROTOCOL_VERSION`` (a
handshake version connects with ``initialize``, a modern one with ``server/discover``) and, for
some scenarios, ``MCP_CONFORMANCE_CONTEXT`` (JSON data to use: credentials, keys, the IdP's
token). Each scenario is what an application would do with trio_mcp: configure its OAuth, list,
call, answer a form. The behaviour the suite checks (headers, envelopes, retries, defaults, the
token requests, the DPoP proofs and nonces) is the library's, never this file's. Exit status 0 means
the client did its part; the suite judges the rest.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import httpx
import trio

from trio_mcp import (
    Client,
    ClientAuth,
    ClientCredentials,
    DPoPKey,
    ElicitResult,
    EnterpriseManaged,
    HttpTarget,
    MCPError,
    OAuth,
    OAuthError,
    Tool,
    WorkloadIdentity,
    open_client,
)
from trio_mcp.skills import SkillsClient, SkillVerificationError

Context = dict[str, Any]
Run = Callable[[Client, Context], Awaitable[None]]
ElicitAnswer = Callable[[Client], Callable[[Any], Awaitable[ElicitResult]]]


@attrs.frozen
class Scenario:
    run: Run
    #: Builds the form-answering callback (given the client, for callbacks that call back).
    on_elicit: ElicitAnswer | None = None
    #: The OAuth an application would configure from the context, when the server requires
    #: authorization (an ``auth/*`` scenario).
    auth: Callable[[Context], OAuth] | None = None
    #: The step at which authorization must be refused (a hostile or broken server), or
    #: "call" when the server's last word is an HTTP refusal after authorization.
    refused_at: str | None = None


#: The Client ID Metadata Document URL the suite's authorization servers expect (SEP-991).
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


async def follow_authorization(url: str) -> str:
    """The headless browser: the suite's authorization endpoint redirects at once, so the
    redirect it answers with is where a browser would land."""
    async with httpx.AsyncClient(follow_redirects=False, timeout=10) as http:
        response = await http.get(url)
    location: str | None = response.headers.get("location")
    if not response.is_redirect or location is None:
        raise RuntimeError(f"the authorization endpoint answered HTTP {response.status_code}")
    return location


def oauth_for(context: Context) -> OAuth:
    """What an application configures: its CIMD URL, and credentials when it has some."""
    return OAuth(
        client_id=context.get("client_id"),
        client_secret=context.get("client_secret"),
        client_metadata_url=CLIENT_METADATA_URL,
        on_authorize=follow_authorization,
        timeout=10,
    )


# The extension scenarios (no user, or DPoP): one small function each, building the OAuth an
# application would from the credentials the scenario gives.


def client_credentials_basic(context: Context) -> OAuth:
    secret = ClientAuth.basic(context["client_id"], context["client_secret"])
    return OAuth(grant=ClientCredentials(secret), timeout=10)


def client_credentials_jwt(context: Context) -> OAuth:
    key = ClientAuth.private_key_jwt(
        context["client_id"], context["private_key_pem"], alg=context.get("signing_algorithm")
    )
    return OAuth(grant=ClientCredentials(key), timeout=10)


def enterprise_managed(context: Context) -> OAuth:
    grant = EnterpriseManaged(
        idp_token_endpoint=context["idp_token_endpoint"],
        id_token=context["idp_id_token"],
        idp_client_auth=ClientAuth.none(context["idp_client_id"]),
        client_auth=ClientAuth.basic(context["client_id"], context["client_secret"]),
    )
    return OAuth(grant=grant, timeout=10)


def workload_identity(context: Context) -> OAuth:
    grant = WorkloadIdentity(context["valid_jwt"], client_id=context["client_id"])
    return OAuth(grant=grant, timeout=10)


def dpop(context: Context) -> OAuth:
    """The interactive flow, headless as in the other auth scenarios, with a DPoP key."""
    return OAuth(
        client_metadata_url=CLIENT_METADATA_URL,
        on_authorize=follow_authorization,
        dpop=DPoPKey.generate(),
        timeout=10,
    )


def _find(tools: list[Tool], name: str) -> Tool:
    for tool in tools:
        if tool.name == name:
            return tool
    raise LookupError(f"the server lists no tool {name!r} (it lists {[t.name for t in tools]})")


def _example_arguments(tool: Tool) -> dict[str, Any]:
    """Plausible values for a tool's required arguments, as a user would fill them in."""
    examples = {"string": "example", "integer": 1, "number": 1.5, "boolean": True}
    properties = tool.input_schema.get("properties") or {}
    arguments: dict[str, Any] = {}
    for name in tool.input_schema.get("required") or ():
        schema = properties.get(name)
        kind = schema.get("type") if isinstance(schema, dict) else None
        arguments[name] = examples.get(kind, "example") if isinstance(kind, str) else "example"
    return arguments


async def list_tools(client: Client, context: Context) -> None:
    await client.list_tools()


async def add_numbers(client: Client, context: Context) -> None:
    _find(await client.list_tools(), "add_numbers")
    result = await client.call_tool("add_numbers", {"a": 5, "b": 3})
    assert not result.is_error, result


async def call_every_tool(client: Client, context: Context) -> None:
    """Each tool the client accepted, with example arguments: what a tool-picking agent does."""
    for tool in await client.list_tools():
        await client.call_tool(tool.name, _example_arguments(tool))


async def use_everything(client: Client, context: Context) -> None:
    caps = client.server_capabilities
    if caps.tools is not None:
        await call_every_tool(client, context)
    if caps.resources is not None:
        for resource in await client.list_resources():
            await client.read_resource(resource.uri)
    if caps.prompts is not None:
        for prompt in await client.list_prompts():
            await client.get_prompt(prompt.name)


async def context_tool_calls(client: Client, context: Context) -> None:
    """The calls the scenario asks for, with its arguments, after listing the tools."""
    tools = await client.list_tools()
    for call in context.get("toolCalls", ()):
        _find(tools, call["name"])
        await client.call_tool(call["name"], call.get("arguments"))


async def echo_schema(client: Client, context: Context) -> None:
    """Hand the schema the client holds for one tool back to the server, untouched."""
    tools = await client.list_tools()
    focal = _find(tools, "json_schema_2020_12_tool")
    _find(tools, "json_schema_echo")
    await client.call_tool("json_schema_echo", {"schema": focal.input_schema})


async def multi_round_trip(client: Client, context: Context) -> None:
    for name in ("test_mrtr_echo_state", "test_mrtr_no_state", "test_mrtr_no_result_type"):
        result = await client.call_tool(name, {})
        assert not result.is_error, result


def accept_untouched(client: Client) -> Callable[[Any], Awaitable[ElicitResult]]:
    """The user submits the form without filling anything in: the schema's defaults apply."""

    async def answer(params: Any) -> ElicitResult:
        await trio.lowlevel.checkpoint()
        return ElicitResult(action="accept", content={})

    return answer


def confirm_meanwhile(client: Client) -> Callable[[Any], Awaitable[ElicitResult]]:
    """Confirm, after using another tool while the first call waits for the answer."""

    async def answer(params: Any) -> ElicitResult:
        await client.call_tool("test_mrtr_unrelated", {})
        return ElicitResult(action="accept", content={"confirmed": True})

    return answer


async def list_skills(client: Client, context: Context) -> None:
    """A host building its skill registry: the listing alone, no file of any skill."""
    print(await SkillsClient(client).describe())


async def use_first_skill(client: Client, context: Context) -> None:
    """A host loading a skill, then the supporting files it lists. Content that fails
    verification is refused by the library (SkillVerificationError) and nothing more of that
    skill is read: the scenarios serve a tampered SKILL.md, so the refusal is the success."""
    skills = SkillsClient(client)
    entries = await skills.list_skills()
    if not entries:
        raise AssertionError("the server listed no skills")
    skill = entries[0]
    try:
        await skills.load(skill)
    except SkillVerificationError as exc:
        print(f"refused {exc.uri} ({exc.reason}): {exc}")
        return
    for resource in skill.resources or ():
        if resource.uri != skill.uri:
            await skills.read(skill, resource.uri)


def _auth(refused_at: str | None = None, auth: Callable[[Context], OAuth] = oauth_for) -> Scenario:
    return Scenario(call_every_tool, auth=auth, refused_at=refused_at)


SCENARIOS: dict[str, Scenario] = {
    "initialize": Scenario(list_tools),
    "tools_call": Scenario(add_numbers),
    "elicitation-sep1034-client-defaults": Scenario(call_every_tool, accept_untouched),
    "sse-retry": Scenario(call_every_tool),
    "request-metadata": Scenario(list_tools, accept_untouched),
    "sep-2322-client-request-state": Scenario(multi_round_trip, confirm_meanwhile),
    "http-standard-headers": Scenario(use_everything),
    "http-custom-headers": Scenario(context_tool_calls),
    "http-invalid-tool-headers": Scenario(call_every_tool),
    "json-schema-ref-no-deref": Scenario(list_tools),
    "json-schema-2020-12-preservation": Scenario(echo_schema),
    **{
        f"auth/{name}": _auth()
        for name in (
            "metadata-default",
            "metadata-var1",
            "metadata-var2",
            "metadata-var3",
            "basic-cimd",
            "scope-from-www-authenticate",
            "scope-from-scopes-supported",
            "scope-omitted-when-undefined",
            "scope-step-up",
            "token-endpoint-auth-basic",
            "token-endpoint-auth-post",
            "token-endpoint-auth-none",
            "pre-registration",
            "2025-03-26-oauth-metadata-backcompat",
            "2025-03-26-oauth-endpoint-fallback",
            "offline-access-scope",
            "offline-access-not-supported",
            "authorization-server-migration",
            "iss-supported",
            "iss-not-advertised",
        )
    },
    # The server keeps refusing with 403: the call fails once authorization cannot help.
    "auth/scope-retry-limit": _auth("call"),
    # Hostile or broken authorization parts: the flow must stop at the named step.
    "auth/resource-mismatch": _auth("discovery"),
    "auth/metadata-issuer-mismatch": _auth("metadata"),
    "auth/iss-supported-missing": _auth("authorization"),
    "auth/iss-wrong-issuer": _auth("authorization"),
    "auth/iss-unexpected": _auth("authorization"),
    "auth/iss-normalized": _auth("authorization"),
    # Extensions: client credentials (SEP-1046), enterprise-managed authorization (SEP-990),
    # workload identity (SEP-1933), DPoP (SEP-1932).
    "auth/client-credentials-basic": _auth(auth=client_credentials_basic),
    "auth/client-credentials-jwt": _auth(auth=client_credentials_jwt),
    "auth/enterprise-managed-authorization": _auth(auth=enterprise_managed),
    "auth/wif-jwt-bearer": _auth(auth=workload_identity),
    "auth/dpop": _auth(auth=dpop),
    "auth/dpop-nonce": _auth(auth=dpop),
    # Skills (SEP-2640): list without fetching; load and verify (size, digest, frontmatter).
    "sep-2640-client-no-prefetch": Scenario(list_skills),
    "sep-2640-client-verify-digest": Scenario(use_first_skill),
    "sep-2640-client-verify-size": Scenario(use_first_skill),
    "sep-2640-client-verify-frontmatter": Scenario(use_first_skill),
}


async def run(url: str, scenario: Scenario, version: str, context: Context) -> None:
    client: Client | None = None

    async def on_elicit(params: Any) -> ElicitResult:
        assert scenario.on_elicit is not None and client is not None
        return await scenario.on_elicit(client)(params)

    async def connect_and_run() -> None:
        nonlocal client
        async with open_client(
            HttpTarget(url, auth=scenario.auth(context) if scenario.auth is not None else None),
            protocol_version=version,
            on_elicit=on_elicit if scenario.on_elicit is not None else None,
            default_timeout=20,
        ) as connected:
            client = connected
            await scenario.run(connected, context)

    if scenario.refused_at is None:
        await connect_and_run()
        return
    try:
        await connect_and_run()
    except OAuthError as exc:
        if exc.step != scenario.refused_at:
            raise
        print(f"refused, as it must be: {exc}")
        return
    except MCPError as exc:
        if scenario.refused_at != "call":
            raise
        print(f"refused, as it must be: {exc}")
        return
    raise AssertionError(f"the flow went through where it must stop ({scenario.refused_at})")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: client.py <server-url>", file=sys.stderr)
        return 2
    name = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    scenario = SCENARIOS.get(name)
    if scenario is None:
        print(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    version = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    trio.run(run, argv[1], scenario, version, context)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
