"""The tasks extension's wire shapes (SEP-2663), without an event loop."""

from __future__ import annotations

import pytest

from trio_mcp.protocol._errors import ProtocolError
from trio_mcp.protocol._headers import check_request, modern_headers, schema_declarations
from trio_mcp.protocol._jsonrpc import Request
from trio_mcp.protocol._tasks import (
    TASKS_EXTENSION,
    TaskState,
    create_task_result,
    declares_tasks,
    detailed_task,
    iso8601,
    tasks_required,
)

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


def test_times_are_iso_8601_utc_with_milliseconds() -> None:
    assert iso8601(0) == "1970-01-01T00:00:00.000Z"
    assert iso8601(951_782_400.25) == "2000-02-29T00:00:00.250Z"
    assert iso8601(1_764_585_000.123) == "2025-12-01T10:30:00.123Z"
    assert iso8601(4_107_542_399.9994) == "2100-02-28T23:59:59.999Z"


def test_a_create_task_result_is_flat_and_a_detailed_task_is_keyed_on_its_status() -> None:
    state = TaskState("t1", "working", 0.0, 1.5, 60_000, poll_interval_ms=500)
    assert create_task_result(state) == {
        "resultType": "task",
        "taskId": "t1",
        "status": "working",
        "createdAt": "1970-01-01T00:00:00.000Z",
        "lastUpdatedAt": "1970-01-01T00:00:01.500Z",
        "ttlMs": 60_000,
        "pollIntervalMs": 500,
    }
    done = TaskState("t1", "completed", 0.0, 0.0, None, result={"content": []})
    assert detailed_task(done)["result"] == {"content": []}
    assert detailed_task(done)["ttlMs"] is None
    failed = TaskState("t1", "failed", 0.0, 0.0, None, error={"code": -1, "message": "x"})
    assert detailed_task(failed)["error"] == {"code": -1, "message": "x"}
    assert "result" not in detailed_task(failed)
    asking = TaskState("t1", "input_required", 0.0, 0.0, None, input_requests={"k": {}})
    assert detailed_task(asking)["inputRequests"] == {"k": {}}
    with pytest.raises(ValueError, match="not a task status"):
        TaskState("t1", "done", 0.0, 0.0, None)


def test_the_capability_and_its_missing_error() -> None:
    assert declares_tasks({"extensions": {TASKS_EXTENSION: {}}})
    assert not declares_tasks({"extensions": {}})
    assert not declares_tasks({"tasks": {"requests": {}}})  # the legacy capability
    error = tasks_required("tasks/get")
    assert error.code == -32021
    assert error.error.data == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}


def test_mcp_name_carries_the_task_id() -> None:
    params = {"taskId": "abc", "_meta": META}
    headers = modern_headers("tasks/get", params)
    assert headers["mcp-name"] == "abc"
    check_request(Request(1, "tasks/get", params), headers, schema_declarations({}))
    with pytest.raises(ProtocolError) as info:
        check_request(
            Request(1, "tasks/get", params),
            {**headers, "mcp-name": "other"},
            schema_declarations({}),
        )
    assert info.value.code == -32020
