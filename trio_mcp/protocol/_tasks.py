"""The tasks extension (SEP-2663, ``io.modelcontextprotocol/tasks``): its wire shapes.

A modern ``tools/call`` whose request declares the extension in its own client capabilities may
be answered with a ``CreateTaskResult`` (``resultType: "task"``) instead of its result; the
client then polls ``tasks/get``, answers input with ``tasks/update`` and may ``tasks/cancel``.
Sans-IO: values and pure functions; times are passed in (seconds since the epoch).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from ._errors import ProtocolError
from ._jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY, JSONObject

#: The extension's identifier, under ``extensions`` in client and server capabilities.
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"

WORKING: Final = "working"
INPUT_REQUIRED: Final = "input_required"
COMPLETED: Final = "completed"
FAILED: Final = "failed"
CANCELLED: Final = "cancelled"
STATUSES: Final = frozenset({WORKING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED})
TERMINAL: Final = frozenset({COMPLETED, FAILED, CANCELLED})

#: The methods of the extension; each names its task in ``params.taskId`` (and ``Mcp-Name``).
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
#: Methods of the 2025-11-25 experimental tasks that the extension removed: -32601.
REMOVED_TASK_METHODS: Final = frozenset({"tasks/result", "tasks/list"})


def declares_tasks(client_capabilities: Mapping[str, Any]) -> bool:
    """Whether a request's own client capabilities declare the extension."""
    extensions = client_capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def tasks_required(what: str) -> ProtocolError:
    """-32021 for a request the server serves only to a client declaring the extension."""
    return ProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"Missing required client capability: {what} needs the {TASKS_EXTENSION} extension",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def iso8601(seconds: float) -> str:
    """A UTC time (seconds since the epoch) as ISO 8601 with milliseconds:
    ``2026-12-01T10:30:00.000Z``. Computed here (proleptic Gregorian calendar), so this
    module needs no clock-bearing library."""
    millis = round(seconds * 1000)
    days, millis = divmod(millis, 86_400_000)
    # Days since 1970-01-01 to a civil date (the era-based method of H. Hinnant).
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (month <= 2)
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{year:04d}-{month:02d}-{day:02d}T{hours:02d}:{minutes:02d}:{secs:02d}.{millis:03d}Z"


@attrs.frozen
class TaskState:
    """A task as the wire shows it: its status and, by status, its outcome or its questions."""

    task_id: str
    status: str
    #: Seconds since the epoch.
    created_at: float
    last_updated_at: float
    #: How long the task is kept (milliseconds); None: unlimited.
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    status_message: str | None = None
    #: ``completed``: the ``CallToolResult``, wire form.
    result: JSONObject | None = None
    #: ``failed``: the JSON-RPC error object.
    error: JSONObject | None = None
    #: ``input_required``: every outstanding input request, by key.
    input_requests: JSONObject | None = None

    def __attrs_post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"not a task status: {self.status!r}")

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


def _task_fields(task: TaskState) -> JSONObject:
    wire: JSONObject = {
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": iso8601(task.created_at),
        "lastUpdatedAt": iso8601(task.last_updated_at),
        "ttlMs": task.ttl_ms,
    }
    if task.poll_interval_ms is not None:
        wire["pollIntervalMs"] = task.poll_interval_ms
    if task.status_message is not None:
        wire["statusMessage"] = task.status_message
    return wire


def create_task_result(task: TaskState) -> JSONObject:
    """The flat ``CreateTaskResult`` (``Result & Task``): no outcome, no questions, no state."""
    return {"resultType": "task", **_task_fields(task)}


def detailed_task(task: TaskState) -> JSONObject:
    """A ``DetailedTask``, keyed on its status, as ``tasks/get`` (and ``notifications/tasks``)
    carry it; ``tasks/get`` adds ``resultType: "complete"``."""
    wire = _task_fields(task)
    if task.status == COMPLETED and task.result is not None:
        wire["result"] = dict(task.result)
    elif task.status == FAILED and task.error is not None:
        wire["error"] = dict(task.error)
    elif task.status == INPUT_REQUIRED:
        wire["inputRequests"] = dict(task.input_requests or {})
    return wire


def task_id_of(params: Mapping[str, Any]) -> str | None:
    value = params.get("taskId")
    return value if isinstance(value, str) and value else None
