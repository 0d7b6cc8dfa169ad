"""The README quick start, kept runnable (a test checks the two stay identical)."""

import trio

from trio_mcp import Context, Server, open_client

server = Server("demo", "1.0.0")


@server.tool()
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def countdown(n: int, ctx: Context) -> str:
    """Count down, reporting progress; cancellable at every step."""
    for i in range(n):
        await ctx.report_progress(i + 1, n, f"step {i + 1}")
        await trio.sleep(0.01)
    return "liftoff"


async def main() -> None:
    async with open_client(server) as client:
        tools = await client.list_tools()
        print([tool.name for tool in tools])

        result = await client.call_tool("add", {"a": 2, "b": 3})
        print(result.structured_content)  # {'result': 5}

        def on_progress(progress: float, total: float | None, message: str | None) -> None:
            print("progress", progress, total, message)

        result = await client.call_tool("countdown", {"n": 3}, on_progress=on_progress)
        print(result.content[0].text)  # liftoff

        # Cancellation is just Trio: leaving the scope cancels the call on the wire.
        with trio.move_on_after(0.015):
            await client.call_tool("countdown", {"n": 1000})
        print("cancelled; the server was told")


if __name__ == "__main__":  # run the client above; `trio-mcp serve` imports `server` only
    trio.run(main)
