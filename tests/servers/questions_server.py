"""A server whose tools ask the user (elicitation) and the user's model (sampling), for the
CLI's tests: ``trio-mcp call tests/servers/questions_server.py cancel_order order_id=7``."""

from __future__ import annotations

from trio_mcp import Context, NestedRequestError, Server

server = Server("questions")

FORM = {
    "type": "object",
    "properties": {
        "confirm": {"type": "boolean", "description": "Really cancel?"},
        "reason": {"type": "string", "enum": ["late", "wrong", "other"]},
        "refund": {"type": "integer", "minimum": 0, "maximum": 100, "default": 100},
        "note": {"type": "string"},
    },
    "required": ["confirm", "reason"],
}


@server.tool()
async def cancel_order(order_id: int, ctx: Context) -> str:
    """Cancel an order, once the user confirms."""
    answer = await ctx.elicit(f"Cancel order {order_id}?", FORM)
    if answer.action != "accept" or answer.content is None:
        return f"order {order_id} kept ({answer.action})"
    return f"order {order_id}: {sorted(answer.content.items())}"


@server.tool()
async def summarize(text: str, ctx: Context) -> str:
    """Ask the client's model for a summary."""
    try:
        reply = await ctx.sample(f"Summarize: {text}", max_tokens=50)
    except NestedRequestError as exc:
        return f"no summary: {exc.code} {exc.message}"
    return f"summary by {reply.model}: {getattr(reply.content, 'text', '?')}"
