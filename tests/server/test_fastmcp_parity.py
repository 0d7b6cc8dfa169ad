"""The same functions give the same schemas and the same validation as fastmcp gives them.

fastmcp's side is recorded (``fastmcp_data/fastmcp_4.2.3.json``, made by
``fastmcp_data/record.py`` from ``fastmcp_data/functions.py``; the note there says how to
regenerate it) rather than installed, since fastmcp brings a large dependency tree of its own.

The differences are deliberate and normalised here, each for a stated reason:

* objects built from dataclasses, attrs classes and TypedDicts are closed
  (``additionalProperties: false``) so a misspelt field is reported; fastmcp leaves them open
  (a pydantic model keeps pydantic's own rule, as with fastmcp);
* fastmcp marks its wrapped outputs with ``x-fastmcp-wrap-result``, and also gives a ``-> str``
  tool an output schema, where ours sends plain text;
* fastmcp refuses attrs classes, which we support.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trio_mcp import Server, open_client

from .fastmcp_data import functions

RECORDED = json.loads((Path(__file__).parent / "fastmcp_data" / "fastmcp_4.2.3.json").read_text())


def open_nested(schema: Any, *, root: bool = True) -> Any:
    """``schema`` with nested objects' ``additionalProperties: false`` removed."""
    if isinstance(schema, list):
        return [open_nested(s, root=False) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: open_nested(v, root=False) for k, v in schema.items()}
    if not root and out.get("additionalProperties") is False:
        del out["additionalProperties"]
    return out


def server() -> Server:
    built = Server("parity")
    for fn in functions.TOOLS:
        built.tool()(fn)
    return built


def test_the_recording_is_fastmcp_4_2_3_and_it_refuses_only_the_attrs_class() -> None:
    assert RECORDED["fastmcp"] == "4.2.3"
    assert RECORDED["refused"] == {"attrs_tool": "PydanticSchemaGenerationError"}


async def test_the_schemas_are_fastmcps() -> None:
    async with open_client(server()) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
    for name, theirs in RECORDED["tools"].items():
        ours = tools[name]
        assert open_nested(ours.input_schema) == theirs["inputSchema"], name
        if ours.output_schema is not None:
            # Marks included: a wrapped result carries x-fastmcp-wrap-result, as fastmcp's does.
            assert ours.output_schema == theirs["outputSchema"], name
    # The attrs class fastmcp cannot take gives the schema a dataclass gives.
    assert open_nested(tools["attrs_tool"].input_schema)["properties"]["colour"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "alpha": {"type": "number", "default": 1.0}},
        "required": ["name"],
    }


async def test_the_same_calls_are_accepted_and_refused() -> None:
    differences = []
    async with open_client(server()) as client:
        for call in RECORDED["calls"]:
            result = await client.call_tool(call["tool"], call["arguments"])
            if result.is_error == call["accepted"]:
                differences.append((call, result.content))
        attrs_calls = [
            not (await client.call_tool("attrs_tool", arguments)).is_error
            for name, arguments in functions.CALLS
            if name == "attrs_tool"
        ]
    assert differences == []
    assert attrs_calls == [True, True, False]
