"""Drive an MCP server with the official Python SDK's client (``mcp``), as a child process.

    python -m tests.interop.py_client MODE -- COMMAND [ARG ...]    (from the repository root)

MODE is the SDK client's ``mode=`` (``legacy``: the ``initialize`` handshake; ``auto``: the
SDK's default, which probes ``server/discover`` and falls back to the handshake). The script
speaks to ``trio-mcp demo`` (possibly behind a recording proxy) and prints one JSON object with
what it saw, for ``test_official_clients.py`` to assert on.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from tests.interop._py_drive import cancel_and_go_on, common_calls, dump


async def drive(mode: str, command: list[str]) -> dict[str, Any]:
    server = StdioServerParameters(command=command[0], args=command[1:])
    out: dict[str, Any] = {}
    # cache=None: every call below reaches the wire.
    async with Client(server, mode=mode, cache=None) as client:
        await common_calls(client, out)
        out["prompts"] = [dump(prompt) for prompt in (await client.list_prompts()).prompts]
        out["prompt_styled"] = dump(
            await client.get_prompt("greeting", {"name": "Ada", "style": "formal"})
        )
        out["resources"] = [dump(r) for r in (await client.list_resources()).resources]
        templates = await client.list_resource_templates()
        out["templates"] = [dump(t) for t in templates.resource_templates]
        # The SDK sends notifications/cancelled for the cancelled sleep.
        await cancel_and_go_on(client, out, "sleep", {"seconds": 60})
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: py_client.py MODE -- COMMAND [ARG ...]\n")
        return 2
    result = anyio.run(drive, argv[0], argv[2:])
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
