"""The tasks extension (SEP-2663) as a server extension: its methods, its ``tools/call`` hook,
the task ids a ``subscriptions/listen`` watches, its nursery and its bus events.

What a task is and how it runs is :class:`TaskManager`'s; this is how a server reaches it,
through the seam every extension uses (``Extension``), so the core names none of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from .._engine import InFlight
from .._exception_groups import single_error
from ..protocol._envelope import read_envelope
from ..protocol._errors import ProtocolError
from ..protocol._jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, JSONObject
from ..protocol._tasks import (
    REMOVED_TASK_METHODS,
    TASKS_EXTENSION,
    TaskState,
    create_task_result,
    declares_tasks,
    detailed_task,
    task_id_of,
    tasks_required,
)
from ..server._bus import BusEvent
from ..server._connection import MethodHandler, ServerConnection, subject_of
from ..server._extensions import Extension, ExtensionHost, ToolCall, ToolCallHook
from ..server._input import ModernRequest, StartTask
from ..server._registry import ToolEntry
from ._manager import (
    DEFAULT_INPUT_TIMEOUT,
    DEFAULT_MAX_PER_PRINCIPAL,
    DEFAULT_MAX_RUNNING,
    DEFAULT_TASK_TTL_MS,
    TaskManager,
)
from ._store import TaskStore

#: A task's state changed on some worker (params: ``taskId``); the others read it again from
#: the shared task store (waking or cancelling its work if it runs there).
TASK_CHANGED = "task_changed"


def _invalid(message: str) -> ProtocolError:
    return ProtocolError(INVALID_PARAMS, message)


def _task_id(record: InFlight) -> str:
    task_id = task_id_of(record.params)
    if task_id is None:
        raise _invalid(f"Invalid params: {record.method} needs a string 'taskId'")
    return task_id


class TasksExtension(Extension):
    """Tasks for a server: a tool registered with ``task=True`` (or ``"required"``) called by a
    request declaring ``io.modelcontextprotocol/tasks`` becomes a task; ``tasks/get``,
    ``tasks/update`` and ``tasks/cancel`` answer about it. ``Server(task_store=...,
    task_ttl_ms=..., max_tasks=..., max_tasks_per_principal=..., task_input_timeout=...)``
    installs one; :attr:`manager` is ``server.tasks``."""

    name = TASKS_EXTENSION
    #: A task id unknown here may be a mount's (a child server's, a proxy's upstream's).
    forwarded = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})

    def __init__(
        self,
        store: TaskStore | None = None,
        *,
        ttl_ms: int | None = DEFAULT_TASK_TTL_MS,
        max_running: int = DEFAULT_MAX_RUNNING,
        max_per_principal: int | None = DEFAULT_MAX_PER_PRINCIPAL,
        input_timeout: float | None = DEFAULT_INPUT_TIMEOUT,
    ) -> None:
        self.manager = TaskManager(
            store,
            ttl_ms=ttl_ms,
            max_running=max_running,
            max_per_principal=max_per_principal,
            input_timeout=input_timeout,
        )
        self._host: ExtensionHost | None = None
        self._routes: dict[str, MethodHandler] = {
            "tasks/get": self._get,
            "tasks/update": self._update,
            "tasks/cancel": self._cancel,
        }

    def attach(self, host: ExtensionHost) -> None:
        self._host = host
        self.manager.on_change = self._changed
        self.manager.on_publish = self._publish

    def capability(self, host: ExtensionHost) -> JSONObject | None:
        # Announced while a task-capable tool is registered.
        return {} if any(e.options.get("task") for e in host.tools.values()) else None

    def route(self, method: str, client_capabilities: Mapping[str, Any]) -> MethodHandler | None:
        if method in REMOVED_TASK_METHODS:
            raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)
        handler = self._routes.get(method)
        if handler is not None and not declares_tasks(client_capabilities):
            raise tasks_required(method)
        return handler

    def tool_call(
        self, entry: ToolEntry, client_capabilities: Mapping[str, Any]
    ) -> ToolCallHook | None:
        mode = entry.options.get("task", False)
        if not mode:
            return None
        if declares_tasks(client_capabilities):
            input_first = bool(entry.options.get("input_first", False))

            async def as_task(
                conn: ServerConnection, record: InFlight, owner: str, call: ToolCall
            ) -> JSONObject:
                return await self._call_as_task(conn, record, owner, call, input_first)

            return as_task
        if mode == "required":
            name = entry.tool.name

            async def refuse(
                conn: ServerConnection, record: InFlight, owner: str, call: ToolCall
            ) -> JSONObject:
                # Here, past authorization: who may not call the tool does not learn its kind.
                raise tasks_required(f"the tool {name!r}")

            return refuse
        return None

    async def watch(
        self, conn: ServerConnection, record: InFlight, wanted: JSONObject
    ) -> tuple[JSONObject, frozenset[str]] | None:
        """The tasks a listen asks to hear of that it may: only for a request declaring the
        extension (-32021 otherwise), and only the principal's own tasks (others, and unknown
        ids, are left out of what is honoured). None: the listen asked for none."""
        task_ids = wanted.get("taskIds")
        if task_ids is None:
            await trio.lowlevel.checkpoint()
            return None
        if not declares_tasks(read_envelope(record.params).client_capabilities):
            raise tasks_required("subscriptions/listen with taskIds")
        if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
            raise _invalid("Invalid params: notifications.taskIds must be an array of strings")
        owner = subject_of(conn, record)
        watched = set()
        for task_id in task_ids:
            try:
                await self.manager.get(task_id, owner=owner)
            except ProtocolError:
                continue
            watched.add(task_id)
        return {"taskIds": sorted(watched)}, frozenset(watched)

    def hosting(self) -> AbstractAsyncContextManager[None]:
        return self.manager.hosting()

    def on_bus_event(self, event: BusEvent) -> bool:
        task_id = event.params.get("taskId")
        if event.kind != TASK_CHANGED or not isinstance(task_id, str):
            return False
        self.manager.heard(task_id)
        return True

    # -- the manager's news --------------------------------------------------------------------

    def _changed(self, task: TaskState) -> None:
        """A task's new state, to this process's listeners watching it."""
        if self._host is None:
            return
        params = detailed_task(task)
        for connection in list(self._host.connections):
            connection.send_watched(self.name, task.task_id, "notifications/tasks", params)

    def _publish(self, task_id: str) -> None:
        """A task this process changed, for the other workers (they read it again)."""
        if self._host is not None:
            event = BusEvent(TASK_CHANGED, {"taskId": task_id})
            self._host.notifier.notify(event, here=False)

    # -- tools/call as a task ------------------------------------------------------------------

    async def _call_as_task(
        self,
        conn: ServerConnection,
        record: InFlight,
        owner: str,
        call: ToolCall,
        input_first: bool,
    ) -> JSONObject:
        """A task-capable tool, for a request that declared the tasks extension: a
        ``CreateTaskResult`` once the task is stored, its work running in the server's nursery.

        With ``input_first``, the handler first runs in the request itself: its questions are
        multi round-trips (an InputRequiredResult ends this run), and at ``ctx.start_task()``
        the task is made and runs the handler again with the answers gathered. A handler that
        returns without starting a task answers at once (the immediate-result shortcut).
        """
        incoming: ModernRequest = record.envelope
        if input_first:
            incoming.may_start_task = True
            try:
                return await call(conn, record)
            except Exception as exc:
                if not isinstance(single_error(exc), StartTask):
                    raise

        # The request as it is now: through a mount, its params name the tool as this server
        # knows it only while the parent hands it on.
        request = record.request

        async def attempt(answers: Mapping[str, Any], data: Mapping[str, Any]) -> JSONObject:
            rerun = ModernRequest(
                incoming.envelope,
                answers=dict(answers),
                data=dict(data),
                opening=False,
                in_task=True,
            )
            task_record = InFlight(
                request=request,
                session=record.session,
                envelope=rerun,
                principal=record.principal,
            )
            return await call(conn, task_record)

        # The creation is shielded from the request's own cancel, and checked after: a client
        # that went away (or cancelled) before the CreateTaskResult reached it never learns the
        # task's id, so nobody could read or cancel that task; it is cancelled here instead.
        with trio.CancelScope(shield=True):
            state = await self.manager.create(
                attempt, owner=owner, answers=incoming.answers, data=incoming.data
            )
            if record.cancel_requested or record.scope.cancel_called:
                await self.manager.cancel(state.task_id, owner=owner)
        await trio.lowlevel.checkpoint()
        return create_task_result(state)

    # -- the tasks/* methods -------------------------------------------------------------------

    async def _get(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        state = await self.manager.get(_task_id(record), owner=subject_of(conn, record))
        return detailed_task(state)

    async def _update(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        task_id = _task_id(record)
        responses = record.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise _invalid("Invalid params: tasks/update needs an 'inputResponses' object")
        await self.manager.update(task_id, responses, owner=subject_of(conn, record))
        return {}

    async def _cancel(self, conn: ServerConnection, record: InFlight) -> JSONObject:
        await self.manager.cancel(_task_id(record), owner=subject_of(conn, record))
        return {}
