"""The tasks extension (SEP-2663) on the server: task-capable and task-required tools, the
``tasks/*`` methods, input through the multi round-trip machinery, cancellation, TTL, and
principal isolation; in memory and over a real hypercorn."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from trio_mcp import Auth, Context, Principal, ProtocolError, Server, StaticTokenVerifier, ToolError
from trio_mcp.protocol._tasks import TASKS_EXTENSION, TaskState
from trio_mcp.tasks import MemoryTaskStore, TaskManager, TaskRecord
from trio_mcp.transports import memory_transport_pair

from .._http import request_body, serving
from ..wire import WirePeer, wire_to

VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
MODERN = "2026-07-28"
TASKS_CAPS: dict[str, Any] = {"elicitation": {}, "extensions": {TASKS_EXTENSION: {}}}
CONFIRM = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def meta(caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return {VERSION_KEY: MODERN, CAPS_KEY: TASKS_CAPS if caps is None else caps}


class Tools:
    """A server with one tool of each kind, and what their handlers saw."""

    def __init__(self, **server_options: Any) -> None:
        self.server = server = Server("tasks", **server_options)
        self.started = trio.Event()
        self.stopped_by_cancel = trio.Event()
        self.runs = 0

        @server.tool()
        async def plain(name: str) -> str:
            return f"Hello, {name}!"

        @server.tool(task=True)
        async def slow(seconds: float = 0) -> str:
            self.started.set()
            try:
                await trio.sleep(seconds)
            except trio.Cancelled:
                self.stopped_by_cancel.set()
                raise
            return f"slept {seconds}"

        @server.tool(task="required")
        async def fails() -> str:
            raise ToolError("it did not work")

        @server.tool(task="required", scopes="admin")
        async def admin_job() -> str:
            return "done"  # pragma: no cover

        @server.tool(task=True)
        async def breaks() -> str:
            raise ProtocolError(-32603, "it broke")

        @server.tool(task=True)
        async def crashes() -> str:
            raise RuntimeError("a secret detail")

        @server.tool(task=True)
        async def confirm(filename: str, ctx: Context) -> str:
            self.runs += 1
            answer = await ctx.elicit(f"Delete {filename}?", CONFIRM)
            ok = answer.action == "accept" and bool((answer.content or {}).get("confirm"))
            return f"{'deleted' if ok else 'kept'} {filename} in_task={ctx.in_task}"

        @server.tool(task=True)
        async def two(ctx: Context) -> str:
            first, second = await ctx.ask_together(
                ctx.elicit("First?", NAME), ctx.elicit("Second?", NAME)
            )
            return f"{(first.content or {})['name']} {(second.content or {})['name']}"

        @server.tool(task=True)
        async def chatty(ctx: Context) -> str:
            await ctx.report_progress(1, 2)
            await ctx.info("a log line")
            return "said nothing"

        @server.tool(task="required", input_first=True)
        async def named(ctx: Context) -> str:
            answer = await ctx.elicit("Your name?", NAME, key="user_name")
            await ctx.start_task()
            return f"Hello from the task, {(answer.content or {})['name']} ({ctx.in_task})"


async def call(
    peer: WirePeer, rid: Any, tool: str, arguments: dict[str, Any] | None = None, **extra: Any
) -> Any:
    caps = extra.pop("caps", None)
    params = {"name": tool, "arguments": arguments or {}, "_meta": meta(caps), **extra}
    return await peer.request(rid, "tools/call", params)


async def tasks_request(
    peer: WirePeer, rid: Any, method: str, task_id: str, caps: Any = None, **extra: Any
) -> Any:
    params = {"taskId": task_id, "_meta": meta(caps), **extra}
    return await peer.request(rid, method, params)


async def settled(peer: WirePeer, task_id: str, *, until: frozenset[str] | None = None) -> Any:
    wanted = until or frozenset({"completed", "failed", "cancelled"})
    with trio.fail_after(10):
        while True:
            result = (await tasks_request(peer, "poll", "tasks/get", task_id))["result"]
            if result["status"] in wanted:
                return result
            await trio.sleep(0.01)


# -- creation ----------------------------------------------------------------------------------


async def test_a_task_capable_tool_is_a_task_only_for_a_request_declaring_the_extension() -> None:
    tools = Tools()
    async with wire_to(tools.server, initialize=False) as peer:
        sync = (await call(peer, 1, "slow", caps={}))["result"]
        assert sync["resultType"] == "complete"
        assert sync["content"] == [{"type": "text", "text": "slept 0"}]
        assert "taskId" not in sync

        created = (await call(peer, 2, "slow", {"seconds": 0.05}))["result"]
        assert created["resultType"] == "task"
        assert created["status"] == "working"
        assert set(created) >= {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"}
        assert not {"result", "error", "inputRequests", "requestState", "task"} & set(created)
        assert created["createdAt"].endswith("Z") and "T" in created["createdAt"]
        assert len(created["taskId"]) >= 32  # unguessable
        # Durable before the CreateTaskResult: an immediate tasks/get resolves.
        now = (await tasks_request(peer, 3, "tasks/get", created["taskId"]))["result"]
        assert now["taskId"] == created["taskId"]
        assert now["resultType"] == "complete"
        done = await settled(peer, created["taskId"])
        assert done["status"] == "completed"
        assert done["result"] == {"content": [{"type": "text", "text": "slept 0.05"}]}
        assert "requestState" not in done

        # A sync-only tool never becomes a task, and the legacy params.task is ignored.
        plain = await call(peer, 4, "plain", {"name": "W"}, task={"ttl": 1000, "pollInterval": 5})
        assert plain["result"]["content"] == [{"type": "text", "text": "Hello, W!"}]
        assert plain["result"]["resultType"] == "complete"


async def test_a_required_task_tool_refuses_a_request_without_the_extension() -> None:
    async with wire_to(Tools().server, initialize=False) as peer:
        error = (await call(peer, 1, "fails", caps={}))["error"]
        assert error["code"] == -32021
        assert error["data"] == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
        created = (await call(peer, 2, "fails"))["result"]
        done = await settled(peer, created["taskId"])
        # A tool error is a completed task whose result says so, not a failed one.
        assert done["status"] == "completed"
        assert done["result"]["isError"] is True
        assert "error" not in done


async def test_a_protocol_error_fails_the_task_and_a_crash_shows_no_internals() -> None:
    async with wire_to(Tools().server, initialize=False) as peer:
        broke = await settled(peer, (await call(peer, 1, "breaks"))["result"]["taskId"])
        assert broke["status"] == "failed"
        assert broke["error"] == {"code": -32603, "message": "it broke"}
        assert broke["statusMessage"] == "it broke"
        assert "result" not in broke
        # An unexpected exception in a tool is a tool error (invariant 8), so completed.
        crashed = await settled(peer, (await call(peer, 2, "crashes"))["result"]["taskId"])
        assert crashed["status"] == "completed"
        assert crashed["result"]["isError"] is True
        assert "secret" not in str(crashed)


async def test_the_handshake_era_knows_no_tasks() -> None:
    tools = Tools()
    async with wire_to(tools.server) as peer:
        slow = await peer.request(1, "tools/call", {"name": "slow", "arguments": {}})
        assert slow["result"] == {"content": [{"type": "text", "text": "slept 0"}]}
        required = await peer.request(2, "tools/call", {"name": "fails", "arguments": {}})
        assert required["result"]["isError"] is True
        named = await peer.request(3, "tools/call", {"name": "plain", "arguments": {"name": "x"}})
        assert "resultType" not in named["result"]
        gone = await peer.request(4, "tasks/get", {"taskId": "x"})
        assert gone["error"]["code"] == -32601
    assert len(tools.server.tasks.store) == 0  # type: ignore[arg-type]


async def test_the_extension_is_advertised_in_server_discover() -> None:
    async with wire_to(Tools().server, initialize=False) as peer:
        result = (await peer.request(1, "server/discover", {"_meta": meta({})}))["result"]
        assert result["capabilities"]["extensions"] == {TASKS_EXTENSION: {}}
        assert "tasks" not in result["capabilities"]
    bare = Server("bare")

    @bare.tool()
    async def only() -> str:
        return ""  # pragma: no cover

    async with wire_to(bare, initialize=False) as peer:
        result = (await peer.request(1, "server/discover", {"_meta": meta({})}))["result"]
        assert "extensions" not in result["capabilities"]


# -- the methods -------------------------------------------------------------------------------


async def test_the_task_methods_are_gated_and_the_removed_ones_are_not_found() -> None:
    async with wire_to(Tools().server, initialize=False) as peer:
        task_id = (await call(peer, 1, "slow", {"seconds": 10}))["result"]["taskId"]
        for method in ("tasks/get", "tasks/update", "tasks/cancel"):
            error = (await tasks_request(peer, method, method, task_id, caps={}))["error"]
            assert error["code"] == -32021, method
            assert TASKS_EXTENSION in error["data"]["requiredCapabilities"]["extensions"]
        for method in ("tasks/result", "tasks/list"):
            assert (await tasks_request(peer, method, method, task_id))["error"]["code"] == -32601
        for method in ("tasks/get", "tasks/cancel"):
            error = (await tasks_request(peer, method, method, "no-such-task"))["error"]
            assert error["code"] == -32602, method
        error = (await tasks_request(peer, 9, "tasks/update", "nope", inputResponses={}))["error"]
        assert error["code"] == -32602
        error = (await tasks_request(peer, 10, "tasks/get", ""))["error"]
        assert error["code"] == -32602
        await tasks_request(peer, 11, "tasks/cancel", task_id)


async def test_cancel_stops_the_handler_and_a_finished_task_gets_the_same_ack() -> None:
    tools = Tools()
    async with wire_to(tools.server, initialize=False) as peer:
        task_id = (await call(peer, 1, "slow", {"seconds": 3600}))["result"]["taskId"]
        await tools.started.wait()
        ack = (await tasks_request(peer, 2, "tasks/cancel", task_id))["result"]
        assert ack == {"resultType": "complete", "_meta": ack["_meta"]}
        state = (await tasks_request(peer, 3, "tasks/get", task_id))["result"]
        assert state["status"] == "cancelled"
        with trio.fail_after(5):
            await tools.stopped_by_cancel.wait()
        again = (await tasks_request(peer, 4, "tasks/cancel", task_id))["result"]
        assert again["resultType"] == "complete" and set(again) == {"resultType", "_meta"}
        # A completed task stays completed when cancelled afterwards.
        done_id = (await call(peer, 5, "slow", {"seconds": 0}))["result"]["taskId"]
        await settled(peer, done_id)
        assert "error" not in await tasks_request(peer, 6, "tasks/cancel", done_id)
        assert (await settled(peer, done_id))["status"] == "completed"


class SlowStore(MemoryTaskStore):
    """A store whose durable write takes until the test lets it finish."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = trio.Event()
        self.written = trio.Event()

    async def create(self, record: TaskRecord) -> None:
        self.writing.set()
        await self.written.wait()
        await super().create(record)


async def test_a_task_whose_request_is_cancelled_before_its_answer_is_cancelled_too() -> None:
    """The client cancels the tools/call while the task is being stored: it will never learn
    the task's id, so the server cancels the task itself (its handler stops), and answers
    nothing for the cancelled request."""
    store = SlowStore()
    tools = Tools(task_store=store)
    async with wire_to(tools.server, initialize=False) as peer:
        params = {"name": "slow", "arguments": {"seconds": 3600}, "_meta": meta()}
        await peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
        with trio.fail_after(5):
            await store.writing.wait()
        await peer.cancel(1, "changed my mind")
        await trio.testing.wait_all_tasks_blocked()
        store.written.set()
        with trio.fail_after(5):
            await tools.stopped_by_cancel.wait()
        (task_id,) = store._records
        stored = await store.get(task_id)
        assert stored is not None and stored.state.status == "cancelled"
        assert await peer.recv_within(0.2) is None  # the cancelled request gets no answer


# -- input -------------------------------------------------------------------------------------


async def test_an_elicitation_parks_the_task_until_tasks_update_answers_it() -> None:
    tools = Tools()
    async with wire_to(tools.server, initialize=False) as peer:
        created = await call(peer, 1, "confirm", {"filename": "a.txt"})
        task_id = created["result"]["taskId"]
        parked = await settled(peer, task_id, until=frozenset({"input_required"}))
        (key,) = parked["inputRequests"]
        assert parked["inputRequests"][key]["method"] == "elicitation/create"
        assert "requestState" not in parked
        # Unknown keys are ignored: still waiting.
        ack = await tasks_request(
            peer, 2, "tasks/update", task_id, inputResponses={"other": {"action": "accept"}}
        )
        assert ack["result"]["resultType"] == "complete"
        assert (await tasks_request(peer, 3, "tasks/get", task_id))["result"]["status"] == (
            "input_required"
        )
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        ack = await tasks_request(peer, 4, "tasks/update", task_id, inputResponses=answer)
        assert not {"taskId", "status", "result"} & set(ack["result"])
        done = await settled(peer, task_id)
        assert done["result"]["content"][0]["text"] == "deleted a.txt in_task=True"
        assert tools.runs == 2  # asked, then run again with the answer
        malformed = await tasks_request(peer, 5, "tasks/update", task_id, inputResponses=[])
        assert malformed["error"]["code"] == -32602


async def test_a_partial_update_leaves_the_task_waiting_for_the_rest() -> None:
    async with wire_to(Tools().server, initialize=False) as peer:
        task_id = (await call(peer, 1, "two"))["result"]["taskId"]
        parked = await settled(peer, task_id, until=frozenset({"input_required"}))
        first, second = parked["inputRequests"]
        answer = {first: {"action": "accept", "content": {"name": "one"}}}
        await tasks_request(peer, 2, "tasks/update", task_id, inputResponses=answer)
        now = (await tasks_request(peer, 3, "tasks/get", task_id))["result"]
        assert now["status"] == "input_required"
        assert list(now["inputRequests"]) == [second]
        answer = {second: {"action": "accept", "content": {"name": "two"}}}
        await tasks_request(peer, 4, "tasks/update", task_id, inputResponses=answer)
        done = await settled(peer, task_id)
        assert done["result"]["content"][0]["text"] == "one two"


async def test_input_first_resolves_the_multi_round_trip_before_the_task_exists() -> None:
    tools = Tools()
    async with wire_to(tools.server, initialize=False) as peer:
        first = (await call(peer, 1, "named"))["result"]
        assert first["resultType"] == "input_required"
        assert "taskId" not in first
        assert list(first["inputRequests"]) == ["user_name"]
        assert len(tools.server.tasks.store) == 0  # type: ignore[arg-type]
        second = await call(
            peer,
            2,
            "named",
            inputResponses={"user_name": {"action": "accept", "content": {"name": "Alice"}}},
            requestState=first["requestState"],
        )
        created = second["result"]
        assert created["resultType"] == "task"
        assert "requestState" not in created and "inputRequests" not in created
        done = await settled(peer, created["taskId"])
        assert done["result"]["content"][0]["text"] == "Hello from the task, Alice (True)"
        # Without the extension, start_task() is a plain step of the call: here -32021 first.
        assert (await call(peer, 3, "named", caps={"elicitation": {}}))["error"]["code"] == -32021


async def test_a_task_sends_no_progress_and_no_log_notifications() -> None:
    async with wire_to(Tools().server, initialize=False) as peer:
        extra_meta = {**meta(), "progressToken": "p", "io.modelcontextprotocol/logLevel": "debug"}
        params = {"name": "chatty", "arguments": {}, "_meta": extra_meta}
        created = (await peer.request(1, "tools/call", params))["result"]
        done = await settled(peer, created["taskId"])
        assert done["result"]["content"][0]["text"] == "said nothing"
        # Only responses came back: no notification was sent for the task.
        assert await peer.recv_within(0.1) is None


async def test_a_listen_hears_of_its_tasks_status_changes() -> None:
    tools = Tools()
    async with wire_to(tools.server, initialize=False) as peer:
        task_id = (await call(peer, 1, "confirm", {"filename": "x"}))["result"]["taskId"]
        await settled(peer, task_id, until=frozenset({"input_required"}))
        refused = await peer.request(
            2, "subscriptions/listen", {"notifications": {"taskIds": [task_id]}, "_meta": meta({})}
        )
        assert refused["error"]["code"] == -32021
        wanted = {"taskIds": [task_id, "not-a-task"]}
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": "listen",
                "method": "subscriptions/listen",
                "params": {"notifications": wanted, "_meta": meta()},
            }
        )
        ack = await peer.recv()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"] == {"taskIds": [task_id]}
        (key,) = (await tasks_request(peer, 3, "tasks/get", task_id))["result"]["inputRequests"]
        answer = {key: {"action": "accept", "content": {"confirm": True}}}
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tasks/update",
                "params": {"taskId": task_id, "inputResponses": answer, "_meta": meta()},
            }
        )
        statuses = []
        with trio.fail_after(10):
            while "completed" not in statuses:
                frame = await peer.recv()
                if frame.get("method") == "notifications/tasks":
                    assert frame["params"]["taskId"] == task_id
                    assert frame["params"]["_meta"] == {
                        "io.modelcontextprotocol/subscriptionId": "listen"
                    }
                    statuses.append(frame["params"]["status"])
                    if frame["params"]["status"] == "completed":
                        assert frame["params"]["result"]["content"][0]["text"].startswith("deleted")
        assert statuses == ["working", "completed"]


# -- the store, TTL and principals -------------------------------------------------------------


def _state(task_id: str, status: str, ttl_ms: int | None = 1000) -> TaskState:
    return TaskState(task_id, status, created_at=0.0, last_updated_at=0.0, ttl_ms=ttl_ms)


async def test_a_settled_task_expires_after_its_ttl_and_never_early(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryTaskStore()
    await store.create(TaskRecord(_state("t", "working"), owner=""))
    await trio.sleep(3600)  # a running task never expires
    assert await store.get("t") is not None
    settled_record = await store.transition("t", _state("t", "completed"))
    assert settled_record is not None and settled_record.state.status == "completed"
    await trio.sleep(0.999)
    assert await store.get("t") is not None
    await trio.sleep(0.001)
    assert await store.get("t") is None
    # Unlimited: kept.
    await store.create(TaskRecord(_state("u", "completed", ttl_ms=None), owner=""))
    await trio.sleep(10**6)
    assert await store.get("u") is not None


async def test_expired_tasks_are_dropped_even_if_nobody_asks_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryTaskStore()
    for n in range(100):
        await store.create(TaskRecord(_state(f"t{n}", "completed"), owner=""))
    assert len(store) == 100
    await trio.sleep(2)
    await store.create(TaskRecord(_state("new", "working"), owner=""))
    assert len(store) == 1


async def test_a_terminal_state_never_changes_and_answers_take_only_asked_keys() -> None:
    store = MemoryTaskStore()
    await store.create(TaskRecord(_state("t", "cancelled"), owner=""))
    after = await store.transition("t", _state("t", "completed"))
    assert after is not None and after.state.status == "cancelled"
    asked = TaskState("q", "input_required", 0.0, 0.0, None, input_requests={"a": {}, "b": {}})
    await store.create(TaskRecord(asked, owner=""))
    record = await store.answer("q", {"a": {"action": "accept"}, "zz": {"action": "accept"}})
    assert record is not None
    assert record.answers == {"a": {"action": "accept"}}
    assert record.state.input_requests == {"b": {}}
    assert record.state.status == "input_required"
    resumed = await store.answer("q", {"b": {"action": "decline"}})
    assert resumed is not None and resumed.state.status == "working"
    assert resumed.state.input_requests is None
    assert dict(resumed.answers) == {"a": {"action": "accept"}, "b": {"action": "decline"}}
    # A late answer to a resumed task changes nothing.
    assert await store.answer("q", {"b": {"action": "accept"}}) == resumed
    with pytest.raises(ValueError, match="exists already"):
        await store.create(TaskRecord(asked, owner=""))
    assert await store.get("missing") is None


async def test_a_task_is_visible_only_to_the_principal_that_created_it() -> None:
    manager = TaskManager()
    seen: list[str] = []

    async def attempt(answers: Any, data: Any) -> dict[str, Any]:
        seen.append("ran")
        return {"content": []}

    async with manager.hosting():
        state = await manager.create(attempt, owner="alice")
        assert (await manager.get(state.task_id, owner="alice")).task_id == state.task_id
        for other in ("bob", ""):
            with pytest.raises(ProtocolError) as info:
                await manager.get(state.task_id, owner=other)
            assert info.value.code == -32602
            with pytest.raises(ProtocolError):
                await manager.cancel(state.task_id, owner=other)
            with pytest.raises(ProtocolError):
                await manager.update(state.task_id, {}, owner=other)
        with trio.fail_after(5):
            while True:
                if (await manager.get(state.task_id, owner="alice")).status == "completed":
                    break
                await trio.sleep(0.01)
        assert manager.running == 0
    assert seen == ["ran"]
    with pytest.raises(ProtocolError):  # no nursery: no tasks
        await manager.create(attempt, owner="alice")


ALICE = Principal("alice", "client-1", frozenset())
BOB = Principal("bob", "client-1", frozenset())


@asynccontextmanager
async def acting_for(server: Server, principal: Principal) -> AsyncIterator[WirePeer]:
    ours, theirs = memory_transport_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(functools.partial(server.serve_transport, theirs, principal=principal))
        yield WirePeer(ours)
        nursery.cancel_scope.cancel()


async def test_with_authorization_another_principal_sees_no_task() -> None:
    verifier = StaticTokenVerifier({"a": ALICE, "b": BOB})
    tools = Tools(auth=Auth(verifier, "https://mcp.example.com/mcp"))
    async with (
        tools.server.tasks.hosting(),
        acting_for(tools.server, ALICE) as alice,
        acting_for(tools.server, BOB) as bob,
    ):
        task_id = (await call(alice, 1, "slow", {"seconds": 3600}))["result"]["taskId"]
        assert (await tasks_request(alice, 2, "tasks/get", task_id))["result"]["status"] == (
            "working"
        )
        for method in ("tasks/get", "tasks/cancel", "tasks/update"):
            answer = await tasks_request(bob, 3, method, task_id, inputResponses={})
            assert answer["error"]["code"] == -32602, method
            assert answer["error"]["message"] == "Invalid params: unknown task"
        # Authorization comes first: a tool Bob may not call tells him nothing of its kind.
        refused = (await call(bob, 6, "admin_job", caps={}))["error"]
        assert refused["code"] == -32600
        assert refused["message"].startswith("Forbidden")
        # Bob's cancel changed nothing; Alice's own works.
        assert (await tasks_request(alice, 4, "tasks/get", task_id))["result"]["status"] == (
            "working"
        )
        await tasks_request(alice, 5, "tasks/cancel", task_id)
        with trio.fail_after(5):
            await tools.stopped_by_cancel.wait()


async def test_tasks_are_bounded_and_a_stopping_server_fails_its_running_tasks() -> None:
    manager = TaskManager(max_running=2)
    gate = trio.Event()

    async def attempt(answers: Any, data: Any) -> dict[str, Any]:
        await gate.wait()
        return {"content": []}

    async with manager.hosting():
        first = await manager.create(attempt, owner="")
        await manager.create(attempt, owner="")
        with pytest.raises(ProtocolError) as info:
            await manager.create(attempt, owner="")
        assert info.value.code == -32603
        assert "Task limit reached" in info.value.message
    # Leaving the nursery cancelled both: each says why, instead of "working" forever.
    stopped = await manager.get(first.task_id, owner="")
    assert stopped.status == "failed"
    assert stopped.error == {"code": -32603, "message": "The server stopped"}
    assert manager.running == 0
    with pytest.raises(ValueError, match="max_running"):
        TaskManager(max_running=0)


# -- over HTTP ---------------------------------------------------------------------------------


def _headers(method: str, name: str) -> dict[str, str]:
    return {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
        "mcp-name": name,
    }


async def test_over_http_a_task_outlives_the_post_that_created_it() -> None:
    tools = Tools()
    async with serving(tools.server) as served:

        async def post(method: str, name: str, params: dict[str, Any]) -> Any:
            body = request_body(1, method, {**params, "_meta": meta()})
            return await served.client.post(served.url, json=body, headers=_headers(method, name))

        arguments = {"seconds": 3600}
        created = await post("tools/call", "slow", {"name": "slow", "arguments": arguments})
        assert created.status_code == 200
        task_id = created.json()["result"]["taskId"]
        # The POST is over; the work goes on in the app's nursery.
        with trio.fail_after(10):
            await tools.started.wait()
        got = await post("tasks/get", task_id, {"taskId": task_id})
        assert got.json()["result"]["status"] == "working"
        assert tools.server.tasks.running == 1
        # Mcp-Name must be the task id.
        wrong = await post("tasks/get", "another", {"taskId": task_id})
        assert wrong.status_code == 400
        assert wrong.json()["error"]["code"] == -32020
        cancelled = await post("tasks/cancel", task_id, {"taskId": task_id})
        assert cancelled.json()["result"]["resultType"] == "complete"
        with trio.fail_after(10):
            await tools.stopped_by_cancel.wait()
        got = await post("tasks/get", task_id, {"taskId": task_id})
        assert got.json()["result"]["status"] == "cancelled"

        quick = await post("tools/call", "two", {"name": "two", "arguments": {}})
        quick_id = quick.json()["result"]["taskId"]
        with trio.fail_after(10):
            while True:
                got = await post("tasks/get", quick_id, {"taskId": quick_id})
                if got.json()["result"]["status"] == "input_required":
                    break
                await trio.sleep(0.02)
        answers = {
            key: {"action": "accept", "content": {"name": key}}
            for key in got.json()["result"]["inputRequests"]
        }
        update = {"taskId": quick_id, "inputResponses": answers}
        assert (await post("tasks/update", quick_id, update)).status_code == 200
        with trio.fail_after(10):
            while True:
                got = await post("tasks/get", quick_id, {"taskId": quick_id})
                if got.json()["result"]["status"] == "completed":
                    break
                await trio.sleep(0.02)
        assert got.json()["result"]["result"]["content"][0]["text"] == " ".join(answers)
