"""Task quotas through the real server path, with our client (in memory, where HTTP adds
nothing: the principal is handed to the connection as the HTTP gate would): a principal at its
cap of running tasks is refused with -32000 and does not block another principal, and a task
left at ``input_required`` fails once its deadline passes (on a MockClock)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp import (
    Auth,
    Context,
    Principal,
    ProtocolError,
    Server,
    StaticTokenVerifier,
    open_client,
)
from trio_mcp.client import Client
from trio_mcp.protocol import RATE_LIMITED
from trio_mcp.tasks import MemoryTaskStore, TaskManager, ToolTask
from trio_mcp.transports import Transport

ALICE = Principal("alice", "client-1", frozenset())
BOB = Principal("bob", "client-1", frozenset())
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def a_server(**options: Any) -> Server:
    """A server with authorization, and a task-capable tool that asks and is never answered."""
    verifier = StaticTokenVerifier({"a": ALICE, "b": BOB})
    server = Server("quotas", auth=Auth(verifier, "https://mcp.example.com/mcp"), **options)

    @server.tool(task=True)
    async def hold(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", NAME)
        return f"Hello, {(answer.content or {}).get('name')}"

    return server


class ServedAs:
    """``server`` in memory for one principal, as a target of ``open_client``."""

    def __init__(self, server: Server, principal: Principal) -> None:
        self.server = server
        self.principal = principal

    async def serve_transport(
        self, transport: Transport, /, *, task_status: Any = trio.TASK_STATUS_IGNORED
    ) -> None:
        await self.server.serve_transport(
            transport, principal=self.principal, task_status=task_status
        )


@asynccontextmanager
async def acting_for(server: Server, principal: Principal) -> AsyncIterator[Client]:
    async def never(params: Any) -> Any:
        await trio.sleep_forever()

    # Declares elicitation; its questions are answered only when a test says so (a ToolTask
    # handle is not followed unless its result() is awaited).
    target = ServedAs(server, principal)
    async with open_client(target, mode="modern", on_elicit=never) as client:
        yield client


async def parked(task: ToolTask) -> ToolTask:
    """``task`` once it waits for its answer (its question is asked after its creation)."""
    with trio.fail_after(10):
        while await task.refresh() != "input_required":  # noqa: ASYNC110 - polling, as a client does
            await trio.sleep(0.01)
    return task


async def test_a_principal_at_its_cap_is_refused_and_another_is_not() -> None:
    server = a_server(max_tasks=10, max_tasks_per_principal=3)
    async with (
        server.tasks.hosting(),
        acting_for(server, ALICE) as alice,
        acting_for(server, BOB) as bob,
    ):
        held = [await parked(await alice.call_tool_task("hold")) for _ in range(3)]
        with pytest.raises(ProtocolError) as refused:
            await alice.call_tool_task("hold")
        assert refused.value.code == RATE_LIMITED == -32000
        assert refused.value.message.startswith("Task quota reached: this principal already has")
        assert "tasks/cancel" in refused.value.message
        assert refused.value.data == {"maxTasksPerPrincipal": 3}
        # Alice's full quota leaves Bob's untouched (and the process-wide limit far off).
        await parked(await bob.call_tool_task("hold"))
        assert server.tasks.running == 4
        # One of Alice's tasks ends: she has a slot again.
        await held[0].cancel()
        await parked(await alice.call_tool_task("hold"))


async def test_the_global_limit_still_bounds_every_principal_together() -> None:
    server = a_server(max_tasks=4, max_tasks_per_principal=3)
    async with (
        server.tasks.hosting(),
        acting_for(server, ALICE) as alice,
        acting_for(server, BOB) as bob,
    ):
        for _ in range(3):
            await alice.call_tool_task("hold")
        await bob.call_tool_task("hold")
        with pytest.raises(ProtocolError, match="Task limit reached"):
            await bob.call_tool_task("hold")


async def test_a_task_left_waiting_for_input_fails_after_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = a_server(task_input_timeout=30)
    async with server.tasks.hosting(), acting_for(server, ALICE) as alice:
        task = await parked(await alice.call_tool_task("hold"))
        await trio.sleep(29)
        assert await task.refresh() == "input_required"
        await trio.sleep(2)
        assert await task.refresh() == "failed"
        assert task.status_message == (
            "Input timed out: the task's questions were not answered within 30 s"
        )
        assert task.last is not None
        assert task.last["error"]["code"] == -32000
        assert task.last["error"]["data"] == {"inputTimeoutMs": 30_000}
        assert "inputRequests" not in task.last
        assert server.tasks.running == 0
        # Its slot is free again.
        await parked(await alice.call_tool_task("hold"))


async def test_an_answer_before_the_deadline_lets_the_task_finish(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = a_server(task_input_timeout=30)
    async with server.tasks.hosting(), acting_for(server, ALICE) as alice:
        task = await parked(await alice.call_tool_task("hold"))
        await trio.sleep(20)
        [key] = task.input_requests or {}
        await task.answer({key: {"action": "accept", "content": {"name": "ada"}}})
        result = await task.result()
        assert result.content[0].text == "Hello, ada"  # type: ignore[union-attr]


async def test_anonymous_callers_are_bounded_by_the_global_limit_alone() -> None:
    """Without authorization every caller is the one anonymous principal: a per-principal cap
    would be a second, smaller global limit, so it does not apply."""
    manager = TaskManager(max_running=5, max_per_principal=2)
    gate = trio.Event()

    async def attempt(answers: Any, data: Any) -> dict[str, Any]:
        await gate.wait()
        return {"content": []}

    async with manager.hosting():
        for _ in range(5):
            await manager.create(attempt, owner="")
        with pytest.raises(ProtocolError, match="Task limit reached"):
            await manager.create(attempt, owner="")
        gate.set()


class PlainStore:
    """A store without counting of its own (only the TaskStore protocol)."""

    def __init__(self) -> None:
        self._inner = MemoryTaskStore()
        self.create = self._inner.create
        self.get = self._inner.get
        self.transition = self._inner.transition
        self.answer = self._inner.answer


async def test_the_cap_holds_in_the_memory_store_and_in_a_store_that_does_not_count() -> None:
    async def forever(answers: Any, data: Any) -> dict[str, Any]:
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    memory = MemoryTaskStore()
    for store in (memory, PlainStore()):
        manager = TaskManager(store, max_per_principal=2)
        async with manager.hosting():
            first = await manager.create(forever, owner="alice")
            await manager.create(forever, owner="alice")
            with pytest.raises(ProtocolError) as refused:
                await manager.create(forever, owner="alice")
            assert refused.value.code == -32000
            await manager.create(forever, owner="bob")
            await manager.cancel(first.task_id, owner="alice")
            await manager.create(forever, owner="alice")
    # Two managers sharing one memory store share its count.
    assert memory.unsettled("alice") == 0  # every task settled when its manager stopped
    one, two = TaskManager(memory, max_per_principal=1), TaskManager(memory, max_per_principal=1)
    async with one.hosting(), two.hosting():
        await one.create(forever, owner="carol")
        with pytest.raises(ProtocolError, match="Task quota reached"):
            await two.create(forever, owner="carol")


def test_the_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="max_per_principal"):
        TaskManager(max_per_principal=0)
    with pytest.raises(ValueError, match="input_timeout"):
        TaskManager(input_timeout=0)
    server = Server("defaults")
    assert server.tasks.max_per_principal == 100 < server.tasks.max_running == 1000
    assert server.tasks.input_timeout == 600
    unbounded = Server("unbounded", max_tasks_per_principal=None, task_input_timeout=None)
    assert unbounded.tasks.max_per_principal is None and unbounded.tasks.input_timeout is None
