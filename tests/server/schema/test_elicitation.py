"""The schema of a question put to the user, and the check of its answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from trio_mcp import (
    Context,
    ElicitRequestFormParams,
    ElicitResult,
    MCPError,
    Server,
    TextContent,
    open_client,
)
from trio_mcp.server._schema import ArgumentsError, elicitation_schema

from ._shared import Point

# --- elicitation schemas -----------------------------------------------------------------------


def test_elicitation_schema_of_a_class_is_derived_and_checked_by_the_compiled_checker() -> None:
    requested, check_answer = elicitation_schema(Point)
    assert requested == {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "y": {"type": "integer", "description": "vertical offset", "default": 0},
        },
        "required": ["x"],
    }
    check_answer({"x": 1})
    with pytest.raises(ArgumentsError, match=r"^property 'x': expected an integer"):
        check_answer({"x": "1"})


def test_elicitation_schema_written_by_hand_is_checked_by_the_library() -> None:
    schema = {
        "type": "object",
        "properties": {"email": {"type": "string"}, "phone": {"type": "string"}},
        "dependentRequired": {"phone": ["email"]},
        "unevaluatedProperties": False,
    }
    requested, check_answer = elicitation_schema(schema)
    assert requested == schema
    check_answer({"email": "a@b.c"})
    with pytest.raises(ArgumentsError, match=r"^missing required property 'email'$"):
        check_answer({"phone": "123"})
    with pytest.raises(ArgumentsError, match=r"^unexpected property 'age'$"):
        check_answer({"email": "a@b.c", "age": 3})


def test_a_broken_elicitation_schema_fails_before_anything_is_sent() -> None:
    with pytest.raises(TypeError, match=r"^the elicitation schema is not a valid JSON Schema"):
        elicitation_schema({"type": "object", "properties": {"n": {"type": "int"}}})


async def test_an_answer_the_hand_written_elicitation_schema_refuses_is_not_returned() -> None:
    server = Server("elicit")
    seen: list[Any] = []
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "unevaluatedProperties": False,
    }

    @server.tool()
    async def ask(ctx: Context) -> str:
        try:
            answer = await ctx.elicit("Your name?", schema)
        except MCPError as exc:
            return f"refused: {exc}"
        seen.append(answer.content)
        return "ok"

    answers: Iterator[dict[str, Any]] = iter([{"name": "Ada"}, {"name": "Ada", "admin": True}])

    def on_elicit(params: ElicitRequestFormParams) -> ElicitResult:
        assert params.requested_schema == schema
        return ElicitResult(action="accept", content=next(answers))

    async with open_client(server, on_elicit=on_elicit) as client:
        good = await client.call_tool("ask")
        bad = await client.call_tool("ask")
    assert good.content == [TextContent("ok")]
    assert bad.content == [
        TextContent(
            "refused: the client's elicitation answer is invalid: unexpected property 'admin'"
        )
    ]
    assert seen == [{"name": "Ada"}]
