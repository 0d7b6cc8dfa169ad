"""Record what fastmcp makes of the functions in ``functions.py``: run with a Python where
fastmcp (not trio_mcp) is installed, from this directory:

    pip install fastmcp==4.2.3 attrs && python record.py > fastmcp_4.2.3.json

(The comparison only needs fastmcp's output, recorded once per fastmcp version; the interop
extra installs fastmcp too, for the interop tests, so this import may or may not resolve.)

It records the registrations fastmcp refuses (attrs classes) and, for each tool, fastmcp's
``inputSchema`` and ``outputSchema``; and, for each sample
call in ``functions.CALLS``, whether fastmcp accepted the arguments. ``test_fastmcp_parity.py``
compares trio_mcp against that file.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import fastmcp  # type: ignore[import-not-found, unused-ignore]
import functions  # type: ignore[import-not-found]
from fastmcp import Client, FastMCP


async def main() -> dict[str, Any]:
    server = FastMCP("parity")
    out: dict[str, Any] = {"fastmcp": fastmcp.__version__, "tools": {}, "calls": []}
    out["refused"] = {}
    for fn in functions.TOOLS:
        try:
            server.tool(fn)
        except Exception as exc:  # attrs classes: pydantic cannot build their schema
            out["refused"][fn.__name__] = type(exc).__name__
    async with Client(server) as client:
        for tool in await client.list_tools():
            out["tools"][tool.name] = {
                "inputSchema": tool.inputSchema,
                "outputSchema": tool.outputSchema,
            }
        for name, arguments in functions.CALLS:
            if name in out["refused"]:
                continue
            result = await client.call_tool_mcp(name, arguments)
            out["calls"].append(
                {"tool": name, "arguments": arguments, "accepted": not result.isError}
            )
    return out


if __name__ == "__main__":
    sys.stdout.write(json.dumps(asyncio.run(main()), indent=1, sort_keys=True) + "\n")
