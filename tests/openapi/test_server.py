"""Server.from_openapi against a real local API (hypercorn on 127.0.0.1): our client calls the
tools in memory, the tools call the API over real HTTP."""

from __future__ import annotations

import httpx
import pytest
import trio

from trio_mcp import Server, TextContent, TextResourceContents, open_client
from trio_mcp.openapi import RESOURCES_FOR_GETS, OpenApiError, Route

from ._api import DOCUMENT, serving_api

#: A hang guard, never a performance assertion.
GUARD = 30


def text(result: object) -> str:
    block = result.content[0]  # type: ignore[attr-defined]
    assert isinstance(block, TextContent)
    return block.text


async def test_an_operation_is_a_tool_that_calls_the_api_and_returns_structured_content() -> None:
    async with serving_api() as api, httpx.AsyncClient(base_url=api.url) as http:
        server = Server.from_openapi(DOCUMENT, client=http)
        async with open_client(server) as client:
            tools = {t.name: t for t in await client.list_tools()}
            result = await client.call_tool("getItem", {"item_id": 7})
    assert set(tools) == {"getItem", "createItem", "getTree", "get_tags", "whoami", "slow"}
    assert tools["getItem"].input_schema["required"] == ["item_id"]
    assert tools["getItem"].annotations is not None and tools["getItem"].annotations.read_only_hint
    assert not result.is_error
    assert result.structured_content == {"id": 7, "name": "seven"}
    assert api.requests[-1]["path"] == "/items/7"


async def test_a_4xx_answer_is_a_tool_error_the_model_reads_with_status_and_body() -> None:
    async with (
        serving_api() as api,
        httpx.AsyncClient(base_url=api.url) as http,
        open_client(Server.from_openapi(DOCUMENT, client=http)) as client,
    ):
        result = await client.call_tool("getItem", {"item_id": 99})
    assert result.is_error
    assert text(result) == 'GET /items/{item_id}: HTTP 404 Not Found: {"detail": "no item 99"}'


async def test_arguments_are_checked_like_a_hand_written_tools_before_any_request() -> None:
    async with (
        serving_api() as api,
        httpx.AsyncClient(base_url=api.url) as http,
        open_client(Server.from_openapi(DOCUMENT, client=http)) as client,
    ):
        wrong = await client.call_tool("getItem", {"item_id": "seven"})
        extra = await client.call_tool("getItem", {"item_id": 7, "verbose": True})
    assert wrong.is_error and "item_id" in text(wrong)
    assert extra.is_error and "verbose" in text(extra)
    assert api.requests == []


async def test_a_parameter_and_a_body_property_of_one_name_become_two_arguments() -> None:
    async with serving_api() as api, httpx.AsyncClient(base_url=api.url) as http:
        server = Server.from_openapi(DOCUMENT, client=http)
        async with open_client(server) as client:
            tools = {t.name: t for t in await client.list_tools()}
            result = await client.call_tool(
                "createItem",
                {"name_query": "q", "name_body": "lamp", "price": 2.5, "X-Request-Tag": "t1"},
            )
    schema = tools["createItem"].input_schema
    assert set(schema["properties"]) == {"name_query", "X-Request-Tag", "name_body", "price"}
    assert schema["required"] == ["name_body"]
    assert result.structured_content == {"made": {"name": "lamp", "price": 2.5}, "query": "name=q"}
    seen = api.requests[-1]
    assert seen["headers"]["x-request-tag"] == "t1"
    assert seen["headers"]["content-type"] == "application/json"


async def test_a_recursive_schema_and_a_non_object_answer_are_served() -> None:
    async with serving_api() as api, httpx.AsyncClient(base_url=api.url) as http:
        server = Server.from_openapi(DOCUMENT, client=http)
        async with open_client(server) as client:
            tools = {t.name: t for t in await client.list_tools()}
            tree = await client.call_tool("getTree")
            tags = await client.call_tool("get_tags")
    assert tools["getTree"].output_schema is not None
    assert tools["getTree"].output_schema["properties"]["children"]["items"] == {
        "$ref": "#/$defs/Node"
    }
    assert tree.structured_content == {"name": "root", "children": [{"name": "leaf"}]}
    assert tools["get_tags"].output_schema is not None
    assert tools["get_tags"].output_schema["required"] == ["result"]
    assert tags.structured_content == {"result": ["a", "b"]}


async def test_an_answer_that_breaks_the_documented_schema_is_a_tool_error() -> None:
    async with (
        serving_api() as api,
        httpx.AsyncClient(base_url=api.url) as http,
        open_client(Server.from_openapi(DOCUMENT, client=http)) as client,
    ):
        result = await client.call_tool("getItem", {"item_id": 8})
    assert result.is_error
    assert "does not match its documented schema" in text(result)


async def test_the_clients_headers_reach_the_api() -> None:
    async with serving_api() as api:
        headers = {"Authorization": "Bearer upstream-key"}
        async with (
            httpx.AsyncClient(base_url=api.url, headers=headers) as http,
            open_client(Server.from_openapi(DOCUMENT, client=http)) as client,
        ):
            result = await client.call_tool("whoami")
    assert result.structured_content == {"authorization": "Bearer upstream-key"}


async def test_upstream_headers_add_headers_per_call_from_the_context() -> None:
    async with serving_api() as api, httpx.AsyncClient(base_url=api.url) as http:
        server = Server.from_openapi(
            DOCUMENT,
            client=http,
            upstream_headers=lambda ctx: {"Authorization": f"Bearer for-{ctx.method}"},
        )
        async with open_client(server) as client:
            result = await client.call_tool("whoami")
    assert result.structured_content == {"authorization": "Bearer for-tools/call"}


async def test_a_timeout_is_a_tool_error_that_says_so() -> None:
    async with serving_api() as api:
        async with (
            httpx.AsyncClient(base_url=api.url, timeout=0.2) as http,
            open_client(Server.from_openapi(DOCUMENT, client=http)) as client,
        ):
            with trio.fail_after(GUARD):
                result = await client.call_tool("slow")
        with trio.fail_after(GUARD):
            await api.slow_disconnected.wait()
    assert result.is_error
    assert text(result) == "GET /slow: the API did not answer in time (timed out)"


async def test_a_cancelled_call_aborts_its_http_request() -> None:
    async with (
        serving_api() as api,
        httpx.AsyncClient(base_url=api.url) as http,
        open_client(Server.from_openapi(DOCUMENT, client=http)) as client,
    ):
        with trio.fail_after(GUARD):
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()

                async def call() -> None:
                    with scope:
                        await client.call_tool("slow")

                nursery.start_soon(call)
                await api.slow_started.wait()
                assert not api.slow_disconnected.is_set()
                scope.cancel()
            # The API sees the disconnect: nothing waits on it any more.
            await api.slow_disconnected.wait()
        # The session is still good for the next call.
        assert not (await client.call_tool("getItem", {"item_id": 7})).is_error


async def test_route_rules_make_gets_resources_and_templates() -> None:
    async with serving_api() as api, httpx.AsyncClient(base_url=api.url) as http:
        routes = [Route("exclude", path="^/slow$"), *RESOURCES_FOR_GETS]
        server = Server.from_openapi(DOCUMENT, client=http, routes=routes)
        async with open_client(server) as client:
            tools = {t.name for t in await client.list_tools()}
            resources = {r.uri for r in await client.list_resources()}
            templates = {t.uri_template for t in await client.list_resource_templates()}
            item = await client.read_resource("api://items/7")
            missing_error = None
            try:
                await client.read_resource("api://items/99")
            except Exception as exc:
                missing_error = exc
    assert tools == {"createItem"}
    assert resources == {"api://tree", "api://tags", "api://whoami"}
    assert templates == {"api://items/{item_id}"}
    assert isinstance(item.contents[0], TextResourceContents)
    assert item.contents[0].text == '{"id": 7, "name": "seven"}'
    assert missing_error is not None and "Resource not found" in str(missing_error)


def test_a_document_it_cannot_use_is_a_value_error_naming_the_place() -> None:
    with pytest.raises(OpenApiError, match=r"not OpenAPI 3\.x") as swagger:
        Server.from_openapi({"swagger": "2.0", "paths": {}}, base_url="http://127.0.0.1:1")
    assert swagger.value.pointer == "#/openapi"
    broken = {
        "openapi": "3.1.0",
        "info": {"title": "x", "version": "1"},
        "paths": {"/a": {"get": {"parameters": [{"$ref": "#/components/parameters/Gone"}]}}},
    }
    with pytest.raises(ValueError, match="points at nothing") as gone:
        Server.from_openapi(broken, base_url="http://127.0.0.1:1")
    assert gone.value.pointer == "#/paths/~1a/get/parameters/0"  # type: ignore[attr-defined]
    upload = {
        "openapi": "3.1.0",
        "info": {"title": "x", "version": "1"},
        "paths": {
            "/up": {
                "put": {
                    "requestBody": {"content": {"application/octet-stream": {}}},
                    "responses": {"204": {"description": "ok"}},
                }
            }
        },
    }
    with pytest.raises(OpenApiError, match="application/octet-stream") as unsupported:
        Server.from_openapi(upload, base_url="http://127.0.0.1:1")
    assert unsupported.value.pointer == "#/paths/~1up/put/requestBody"
    # Left out by a route, the operation no longer stops the import.
    served = Server.from_openapi(
        upload, base_url="http://127.0.0.1:1", routes=[Route("exclude", methods="PUT")]
    )
    assert served.tools == {}


async def test_a_document_url_is_fetched_once_with_the_given_client() -> None:
    async with serving_api() as api, httpx.AsyncClient(base_url=api.url) as http:
        server = Server.from_openapi(f"{api.url}/openapi.json", client=http)
        for _ in range(2):
            async with open_client(server) as client:
                result = await client.call_tool("getItem", {"item_id": 7})
                assert not result.is_error
    assert [r["path"] for r in api.requests] == ["/openapi.json", "/items/7", "/items/7"]
