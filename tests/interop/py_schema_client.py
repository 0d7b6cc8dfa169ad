"""Call ``schema_server.py``'s tools with the official Python SDK's client, as a child process.

    python -m tests.interop.py_schema_client -- COMMAND [ARG ...]    (from the repository root)

Prints one JSON object: each call's result as the SDK returned it, or the SDK's exception (its
type and message) when it raised instead.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from tests.interop._py_drive import dump

CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("double_string", "double", {"n": "10"}),
    ("double_strict_string", "double_strict", {"n": "10"}),
    ("stars", "stars", {"n": "3"}),
    ("stars_too_many", "stars", {"n": 9}),
    ("place", "place", {"order": {"sku": "a"}}),
    ("place_bad", "place", {"order": {"sku": "a", "qty": 0}}),
    ("broken", "broken", {}),
]


async def drive(command: list[str]) -> dict[str, Any]:
    # The whole environment, so the child imports the trio_mcp under test (PYTHONPATH).
    server = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    out: dict[str, Any] = {}
    async with Client(server, mode="legacy", cache=None) as client:
        out["tools"] = {t.name: dump(t) for t in (await client.list_tools()).tools}
        for label, tool, arguments in CALLS:
            try:
                out[label] = dump(await client.call_tool(tool, arguments))
            except Exception as exc:  # the SDK raises on a result that breaks the schema
                out[label] = {"raised": type(exc).__name__, "message": str(exc)}
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "--":
        sys.stderr.write("usage: py_schema_client.py -- COMMAND [ARG ...]\n")
        return 2
    result = anyio.run(drive, argv[1:])
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
