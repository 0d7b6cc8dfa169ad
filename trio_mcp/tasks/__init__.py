"""The tasks extension (SEP-2663, ``io.modelcontextprotocol/tasks``), in a room of its own.

Its client half: :class:`ClientTasks` (what a client gains: requests that declare the
extension, a ``tools/call`` answered with a task followed to its end) and :class:`ToolTask`
(``Client.call_tool_task``'s handle on one task); every client has it unless
``open_client(tasks=False)``.

The server half: :class:`TasksExtension` (what a server gains: the ``tasks/*`` methods, the
task-augmented ``tools/call``, ``notifications/tasks``), :class:`TaskManager` (creating and
running tasks) and the store protocol with its in-memory store. Every ``Server`` installs the
extension (``Server(task_store=..., task_ttl_ms=..., max_tasks=...)`` configures it); the Redis
store is :mod:`trio_mcp.redis`'s. Its wire is :mod:`trio_mcp.protocol`'s.
"""

from ._client import ClientTasks, ToolTask
from ._extension import TasksExtension
from ._manager import TaskManager
from ._store import (
    CountingTaskStore,
    HostedTaskStore,
    MemoryTaskStore,
    TaskRecord,
    TaskStore,
    TaskStoreUnavailable,
    answered,
)

__all__ = [
    "ClientTasks",
    "CountingTaskStore",
    "HostedTaskStore",
    "MemoryTaskStore",
    "TaskManager",
    "TaskRecord",
    "TaskStore",
    "TaskStoreUnavailable",
    "TasksExtension",
    "ToolTask",
    "answered",
]
