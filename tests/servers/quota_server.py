"""A server with one task-capable tool that asks a question nobody answers, so every task it
starts stays at ``input_required`` and holds its slot: what the served task-quota test needs.

    trio-mcp serve tests/servers/quota_server.py --transport http --max-tasks-per-principal 3 \
        --auth-issuer ISSUER
"""

from __future__ import annotations

from trio_mcp import Context, Server

server = Server("quota")

FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@server.tool(task=True)
async def hold(ctx: Context) -> str:
    """Ask a name, then greet it (the test never answers: the task keeps its slot)."""
    answer = await ctx.elicit("Your name?", FORM)
    return f"Hello, {(answer.content or {}).get('name')}"
