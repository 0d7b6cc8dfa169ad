"""The official Python SDK's client calls a trio_mcp server over stdio (a child process each):
strings for numbers are converted as the SDK's own servers do, constraints from pydantic's
``Field`` are advertised and enforced, and a result that breaks the declared output type comes
back as a tool error rather than a ``structuredContent`` the SDK refuses."""

from __future__ import annotations

import sys
from typing import Any

from ._support import HERE, run_json, text_of

SERVER = [sys.executable, str(HERE / "schema_server.py")]


async def run_calls() -> dict[str, Any]:
    out: dict[str, Any] = await run_json(
        [sys.executable, "-m", "tests.interop.py_schema_client", "--", *SERVER]
    )
    return out


async def test_the_official_client_meets_lax_strings_constraints_models_and_checked_results() -> (
    None
):
    out = await run_calls()

    # "10" for an int: converted by default, refused (as a tool error) when the tool is strict.
    assert out["double_string"]["structuredContent"] == {"result": 20}
    assert out["double_string"]["isError"] is False
    assert out["double_strict_string"]["isError"] is True
    assert text_of(out["double_strict_string"]) == (
        "Invalid arguments for tool double_strict: argument 'n': expected an integer, got a "
        "string ('10')"
    )

    # Annotated[int, Field(ge=1, le=5)] and a Field(1) default: in the schema, and enforced.
    stars = out["tools"]["stars"]["inputSchema"]
    assert stars["properties"] == {
        "n": {"type": "integer", "minimum": 1, "maximum": 5},
        "repeat": {"type": "integer", "default": 1},
    }
    assert text_of(out["stars"]) == "***"
    assert out["stars_too_many"]["isError"] is True
    assert text_of(out["stars_too_many"]) == (
        "Invalid arguments for tool stars: argument 'n': must be <= 5, got 9"
    )

    # A pydantic model parameter: pydantic's schema, pydantic's validation, our wording.
    order = out["tools"]["place"]["inputSchema"]["properties"]["order"]
    assert order["properties"]["qty"] == {"default": 1, "minimum": 1, "type": "integer"}
    assert out["place"]["structuredContent"] == {"sku": "a", "qty": 1}
    assert out["place_bad"]["isError"] is True
    assert text_of(out["place_bad"]) == (
        "Invalid arguments for tool place: argument 'order.qty': Input should be greater than "
        "or equal to 1, got 0"
    )

    # -> int returning a string: a tool error naming the problem, which the SDK accepts.
    assert "raised" not in out["broken"], out["broken"]
    assert out["broken"]["isError"] is True
    assert "structuredContent" not in out["broken"]
    assert text_of(out["broken"]) == (
        "Tool broken returned an invalid result: the return value: expected an integer, got a "
        "string ('not an int')"
    )
