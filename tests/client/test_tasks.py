"""The tasks extension (SEP-2663) on the client: ``call_tool`` follows a task to its end,
answers its questions through the usual callbacks, cancels it when its caller is cancelled, and
``call_tool_task`` hands out the task itself; against our own server, in memory and over a real
hypercorn."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import trio

from trio_mcp import (
    Client,
    Context,
    ElicitResult,
    HttpTarget,
    ProtocolError,
    RequestCancelled,
    RequestTimeout,
    Server,
    ToolError,
    ToolTask,
    open_client,
)
from trio_mcp.protocol._tasks import TASKS_EXTENSION
from trio_mcp.tasks._client import POLL_CEILING, POLL_FLOOR, poll_interval

from .._http import serving

CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


class Tools:
    """A server with task tools, and what their handlers saw."""

    def __init__(self) -> None:
        self.server = server = Server("tasks")
        self.started = trio.Event()
        self.stopped_by_cancel = trio.Event()
        self.release = trio.Event()
        self.in_task: list[bool] = []

        @server.tool()
        async def plain(name: str) -> str:
            return f"Hello, {name}!"

        @server.tool(task=True)
        async def slow(ctx: Context, seconds: float = 0) -> str:
            self.in_task.append(ctx.in_task)
            self.started.set()
            try:
                await trio.sleep(seconds)
            except trio.Cancelled:
                self.stopped_by_cancel.set()
                raise
            return f"slept {seconds}"

        @server.tool(task=True)
        async def gated() -> str:
            await self.release.wait()
            return "released"

        @server.tool(task="required")
        async def tool_error() -> str:
            raise ToolError("it did not work")

        @server.tool(task=True)
        async def breaks() -> str:
            raise ProtocolError(-32603, "it broke", {"why": "on purpose"})

        @server.tool(task=True)
        async def confirm(filename: str, ctx: Context) -> str:
            answer = await ctx.elicit(f"Delete {filename}?", CONFIRM)
            ok = answer.action == "accept" and bool((answer.content or {}).get("confirm"))
            return f"{'deleted' if ok else 'kept'} {filename} in_task={ctx.in_task}"

        @server.tool(task=True)
        async def two(ctx: Context) -> str:
            first, second = await ctx.ask_together(
                ctx.elicit("First?", NAME), ctx.elicit("Second?", NAME)
            )
            return f"{(first.content or {})['name']} {(second.content or {})['name']}"

        @server.tool(task="required", input_first=True)
        async def named(ctx: Context) -> str:
            answer = await ctx.elicit("Your name?", NAME, key="user_name")
            await ctx.start_task()
            return f"Hello from the task, {(answer.content or {})['name']} ({ctx.in_task})"


class Asked:
    """An ``on_elicit`` that answers yes (and a name), recording each message it was asked."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    async def __call__(self, params: Any) -> ElicitResult:
        self.messages.append(params.message)
        await trio.lowlevel.checkpoint()
        return ElicitResult(action="accept", content={"confirm": True, "name": params.message})


def text(result: Any) -> str:
    return str(result.content[0].text)


@asynccontextmanager
async def connected(tools: Tools, where: str, **options: Any) -> AsyncIterator[Client]:
    """A modern client of ``tools.server``: in memory, or over a real hypercorn."""
    options.setdefault("mode", "modern")
    if where == "memory":
        async with open_client(tools.server, **options) as client:
            yield client
    else:
        async with serving(tools.server) as served, open_client(served.url, **options) as client:
            yield client


WHERE = pytest.mark.parametrize("where", ["memory", "http"])


@WHERE
async def test_call_tool_follows_a_task_to_its_result(where: str) -> None:
    tools = Tools()
    async with connected(tools, where) as client:
        result = await client.call_tool("slow", {"seconds": 0.2})
    assert text(result) == "slept 0.2" and not result.is_error
    assert tools.in_task == [True]  # it ran as a task, not as a plain call


@WHERE
async def test_input_required_is_answered_through_the_callback(where: str) -> None:
    tools, asked = Tools(), Asked()
    async with connected(tools, where, on_elicit=asked) as client:
        result = await client.call_tool("confirm", {"filename": "a.txt"})
        assert text(result) == "deleted a.txt in_task=True"
        assert asked.messages == ["Delete a.txt?"]
        both = await client.call_tool("two")
        assert text(both) == "First? Second?"
        assert sorted(asked.messages[1:]) == ["First?", "Second?"]  # each asked once
        first = await client.call_tool("named")
        assert text(first) == "Hello from the task, Your name? (True)"


class Polled:
    """The task ids a client polled, and an event set at its first ``tasks/get``."""

    def __init__(self) -> None:
        self.first = trio.Event()
        self.task_ids: list[str] = []


@asynccontextmanager
async def polling(client: Client) -> AsyncIterator[Polled]:
    """Records the task ids the client polls: it holds the task by its first ``tasks/get``."""
    polled = Polled()
    send = client.request

    async def request(method: str, params: Any = None, **options: Any) -> Any:
        if method == "tasks/get":
            polled.task_ids.append(params["taskId"])
            polled.first.set()
        return await send(method, params, **options)

    client.request = request  # type: ignore[method-assign]
    try:
        yield polled
    finally:
        client.request = send  # type: ignore[method-assign]


@WHERE
async def test_cancelling_the_caller_cancels_the_task_on_the_server(where: str) -> None:
    tools = Tools()
    async with connected(tools, where) as client, polling(client) as polled:
        with trio.move_on_after(5) as scope:
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    await client.call_tool("slow", {"seconds": 60})

                nursery.start_soon(call)
                await polled.first.wait()
                nursery.cancel_scope.cancel()
        assert not scope.cancelled_caught
        with trio.fail_after(5):
            await tools.stopped_by_cancel.wait()  # the handler itself stopped


async def test_max_total_bounds_the_whole_task_and_cancels_it() -> None:
    tools = Tools()
    async with connected(tools, "memory") as client:
        with pytest.raises(RequestTimeout):
            await client.call_tool("slow", {"seconds": 60}, max_total=0.5)
        with trio.fail_after(5):
            await tools.stopped_by_cancel.wait()


@WHERE
async def test_a_failed_task_raises_its_error_and_a_tool_error_is_a_result(where: str) -> None:
    tools = Tools()
    async with connected(tools, where) as client:
        with pytest.raises(ProtocolError) as caught:
            await client.call_tool("breaks")
        assert caught.value.error.code == -32603
        assert caught.value.error.message == "it broke"
        assert caught.value.error.data == {"why": "on purpose"}
        result = await client.call_tool("tool_error")
        assert result.is_error and text(result) == "it did not work"


async def until(task: ToolTask, holds: Callable[[], bool]) -> None:
    """Refresh ``task`` until ``holds()``, for at most five seconds."""
    for _ in range(int(5 / POLL_FLOOR)):
        await task.refresh()
        if holds():
            return
        await trio.sleep(POLL_FLOOR)
    raise AssertionError(f"{task!r} never got there")


@WHERE
async def test_the_handle_api(where: str) -> None:
    tools, asked = Tools(), Asked()
    async with connected(tools, where, on_elicit=asked) as client:
        task = await client.call_tool_task("gated")
        assert task.task_id and task.status == "working" and not task.terminal
        assert await task.refresh() == "working"
        tools.release.set()
        result = await task.result()
        assert text(result) == "released" and task.status == "completed" and task.terminal
        assert await task.refresh() == "completed"  # a finished task is not asked again

        # Answering by hand: the question is visible, and a partial answer keeps it waiting.
        question = await client.call_tool_task("two")
        await until(question, lambda: len(question.input_requests) == 2)
        first, second = sorted(question.input_requests)
        await question.answer({first: {"action": "accept", "content": {"name": "A"}}})
        assert list(question.input_requests) == [second]
        await until(question, lambda: list(question.input_requests) == [second])
        await question.answer({second: {"action": "accept", "content": {"name": "B"}}})
        assert text(await question.result()) in {"A B", "B A"}
        assert asked.messages == []  # answered by hand, the callback was never asked

        # Cancelling: the server settles it cancelled, and result() says so.
        running = await client.call_tool_task("slow", {"seconds": 60})
        await tools.started.wait()
        await running.cancel()
        with pytest.raises(RequestCancelled):
            await running.result()
        assert running.status == "cancelled"
        await tools.stopped_by_cancel.wait()
        await running.cancel()  # a finished task: nothing is sent, nothing fails


@WHERE
async def test_a_server_answering_at_once_still_works(where: str) -> None:
    tools = Tools()
    async with connected(tools, where) as client:
        assert text(await client.call_tool("plain", {"name": "Ada"})) == "Hello, Ada!"
        handle = await client.call_tool_task("plain", {"name": "Bo"})
        assert handle.task_id is None and handle.status == "completed"
        assert text(await handle.result()) == "Hello, Bo!"
        await handle.cancel()  # nothing to cancel
    # Without the extension a task-capable tool runs as a plain call, in either era.
    tools = Tools()
    async with connected(tools, where, tasks=False) as client:
        assert text(await client.call_tool("slow", {"seconds": 0})) == "slept 0.0"
        with pytest.raises(ProtocolError) as caught:
            await client.call_tool("tool_error")  # task-required: -32021
        assert caught.value.error.code == -32021
    assert tools.in_task == [False]
    tools = Tools()
    async with connected(tools, where, mode="legacy") as client:
        assert text(await client.call_tool("slow", {"seconds": 0})) == "slept 0.0"
    assert tools.in_task == [False]


async def test_the_extension_is_declared_on_tools_call_and_task_requests_only() -> None:
    tools = Tools()
    seen: list[tuple[str, Any]] = []

    @tools.server.tool()
    async def caps(ctx: Context) -> str:
        seen.append(("tools/call", ctx.client_capabilities.extra.get("extensions")))
        return "ok"

    @tools.server.prompt()
    async def hello(ctx: Context) -> str:
        seen.append(("prompts/get", ctx.client_capabilities.extra.get("extensions")))
        return "hi"

    async with connected(tools, "memory") as client:
        await client.call_tool("caps")
        await client.get_prompt("hello")
    async with connected(tools, "memory", tasks=False) as client:
        await client.call_tool("caps")
    assert seen == [
        ("tools/call", {TASKS_EXTENSION: {}}),
        ("prompts/get", None),
        ("tools/call", None),
    ]


def test_the_poll_interval_honours_the_server_within_bounds() -> None:
    assert poll_interval({"pollIntervalMs": 200}) == 0.2
    assert poll_interval({"pollIntervalMs": 0}) == POLL_FLOOR
    assert poll_interval({"pollIntervalMs": 3_600_000}) == POLL_CEILING
    assert poll_interval({}) == poll_interval({"pollIntervalMs": "soon"}) == 0.5


async def test_a_failing_callback_raises_and_cancels_the_task() -> None:
    async def broken(params: Any) -> ElicitResult:
        await trio.lowlevel.checkpoint()
        raise ValueError("the window was closed")

    tools = Tools()
    async with connected(tools, "memory", on_elicit=broken) as client, polling(client) as polled:
        with pytest.raises(ValueError, match="the window was closed"):
            await client.call_tool("confirm", {"filename": "a.txt"})
        assert polled.task_ids
        task = await client.request("tasks/get", {"taskId": polled.task_ids[0]})
        assert task["status"] == "cancelled"


async def test_task_requests_over_http_name_their_task_in_mcp_name() -> None:
    tools = Tools()
    sent: list[tuple[str | None, str | None]] = []

    async def record(request: httpx.Request) -> None:
        sent.append((request.headers.get("mcp-method"), request.headers.get("mcp-name")))

    async with (
        serving(tools.server) as served,
        httpx.AsyncClient(event_hooks={"request": [record]}) as http,
        open_client(HttpTarget(served.url, http_client=http), mode="modern") as client,
    ):
        task = await client.call_tool_task("gated")
        await task.refresh()
        await task.answer({"unknown": {"action": "accept"}})  # a key it never asked: ignored
        tools.release.set()
        await task.result()
    assert ("tools/call", "gated") in sent
    task_requests = [entry for entry in sent if entry[0] and entry[0].startswith("tasks/")]
    assert {method for method, _ in task_requests} == {"tasks/get", "tasks/update"}
    assert {name for _, name in task_requests} == {task.task_id}
