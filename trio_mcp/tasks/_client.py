"""The tasks extension (SEP-2663) on the client: a handle on one tool call's task.

A modern ``tools/call`` that declares the extension may be answered with a ``CreateTaskResult``
instead of its result. :class:`ToolTask` follows such a task: it polls ``tasks/get`` (at the
task's ``pollIntervalMs``, kept between a floor and a ceiling), answers its input requests
through the client's usual callbacks with ``tasks/update``, and cancels it with
``tasks/cancel``. ``Client.call_tool`` drives one to its end transparently (through
:class:`ClientTasks`, the client extension); ``Client.call_tool_task`` hands it to callers who
want the task itself.
"""

from __future__ import annotations

from typing import Any, Final

import trio

from ..client._extensions import ClientExtension, Fulfiller, Requester
from ..protocol._errors import MCPError, ProtocolError, RequestCancelled
from ..protocol._jsonrpc import JSONObject
from ..protocol._tasks import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    TASK_METHODS,
    TASKS_EXTENSION,
    TERMINAL,
)
from ..protocol._types import CallToolResult, result_from_wire

#: Polling never runs faster than this (seconds), whatever ``pollIntervalMs`` says.
POLL_FLOOR: Final = 0.05
#: Nor slower than this, so a long ``pollIntervalMs`` cannot leave a finished call waiting.
POLL_CEILING: Final = 5.0
#: The interval when the server suggests none.
DEFAULT_POLL: Final = 0.5
#: How long a ``tasks/cancel`` sent on the way out (the caller cancelled) may take.
CANCEL_BOUND: Final = 2.0


def poll_interval(task: JSONObject) -> float:
    """The seconds to wait before the next ``tasks/get``: the server's ``pollIntervalMs``,
    clamped to ``[POLL_FLOOR, POLL_CEILING]``."""
    millis = task.get("pollIntervalMs")
    if isinstance(millis, bool) or not isinstance(millis, int | float):
        return DEFAULT_POLL
    return min(POLL_CEILING, max(POLL_FLOOR, millis / 1000))


class ToolTask:
    """One tool call, as a task the server runs: get it from ``Client.call_tool_task``.

    ``task_id`` is None when the server answered the call at once (it may always do so, and a
    server that does not speak the extension always does); the handle is then ``completed``
    already and :meth:`result` returns that answer.

    ``status`` and ``input_requests`` are what the server last said; :meth:`refresh` asks
    again. Leaving :meth:`result` early (a cancelled scope) does not cancel the task: the
    handle's owner decides, with :meth:`cancel`.
    """

    def __init__(self, name: str, answer: JSONObject, send: Requester, fulfil: Fulfiller) -> None:
        self.name = name
        self._send = send
        self._fulfil = fulfil
        #: Input request keys already answered: keys are never reused, so never answer twice.
        self._answered: set[str] = set()
        self._final: JSONObject | None = None
        self.task_id: str | None = None
        self.status = COMPLETED
        self.status_message: str | None = None
        #: The outstanding questions of an ``input_required`` task, by key.
        self.input_requests: dict[str, Any] = {}
        #: The latest task as the wire showed it (a ``CreateTaskResult`` or ``tasks/get``).
        self.last: JSONObject = answer
        if answer.get("resultType") == "task":
            task_id = answer.get("taskId")
            if not isinstance(task_id, str) or not task_id:
                raise MCPError("the server sent a CreateTaskResult without a taskId")
            self.task_id = task_id
            self._update(answer)
        else:
            self._final = answer

    def __repr__(self) -> str:
        return f"<ToolTask {self.name!r} {self.task_id or '(answered at once)'} {self.status}>"

    @property
    def terminal(self) -> bool:
        """Whether the task is ``completed``, ``failed`` or ``cancelled`` (as last seen)."""
        return self.status in TERMINAL

    @property
    def poll_interval(self) -> float:
        """Seconds between two ``tasks/get``: the server's suggestion, floored and capped."""
        return poll_interval(self.last)

    def _update(self, task: JSONObject) -> None:
        status = task.get("status")
        if not isinstance(status, str):
            raise MCPError(f"the server sent a task without a status: {task!r}")
        self.last = task
        self.status = status
        message = task.get("statusMessage")
        self.status_message = message if isinstance(message, str) else None
        requests = task.get("inputRequests") if status == INPUT_REQUIRED else None
        self.input_requests = dict(requests) if isinstance(requests, dict) else {}

    async def refresh(self) -> str:
        """Ask the server for the task (``tasks/get``); return its status."""
        if self.task_id is None or self.terminal:
            await trio.lowlevel.checkpoint()
            return self.status
        self._update(await self._send("tasks/get", {"taskId": self.task_id}))
        return self.status

    async def answer(self, responses: JSONObject) -> None:
        """Answer input requests by key (``tasks/update``); a partial set is allowed, and keys
        already answered are not sent again, nor anything to a finished task."""
        fresh = {key: value for key, value in responses.items() if key not in self._answered}
        if self.task_id is None or self.terminal or not fresh:
            await trio.lowlevel.checkpoint()
            return
        await self._send("tasks/update", {"taskId": self.task_id, "inputResponses": fresh})
        self._answered.update(fresh)
        self.input_requests = {k: v for k, v in self.input_requests.items() if k not in fresh}

    async def cancel(self) -> None:
        """Ask the server to cancel the task (``tasks/cancel``). Cooperative: the task may
        still end ``completed``; :meth:`refresh` or :meth:`result` tell."""
        if self.task_id is None or self.terminal:
            await trio.lowlevel.checkpoint()
            return
        await self._send("tasks/cancel", {"taskId": self.task_id})

    async def cancel_shielded(self, bound: float = CANCEL_BOUND) -> None:
        """:meth:`cancel` from a cancelled scope: shielded, bounded, and best effort (an error
        is dropped, as the caller is on its way out with its own)."""
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + bound
            try:
                await self.cancel()
            except MCPError:
                pass

    async def result(self) -> CallToolResult:
        """Wait for the task's end and return the tool's result.

        Polls ``tasks/get``; each question an ``input_required`` task asks is answered through
        the client's callbacks (``on_elicit``, ``on_sample``, ``roots``) and ``tasks/update``.
        A ``failed`` task raises its JSON-RPC error as :class:`ProtocolError`; a task cancelled
        (by :meth:`cancel`, or by the server) raises :class:`RequestCancelled`.
        """
        while self._final is None and not self.terminal:
            pending = {k: v for k, v in self.input_requests.items() if k not in self._answered}
            if pending:
                await self.answer(await self._fulfil(pending))
                await trio.sleep(POLL_FLOOR)
            else:
                await trio.sleep(self.poll_interval)
            await self.refresh()
        return self._outcome()

    def _outcome(self) -> CallToolResult:
        if self._final is not None:
            return result_from_wire(self._final, CallToolResult)
        if self.status == COMPLETED:
            result = self.last.get("result")
            if not isinstance(result, dict):
                raise MCPError(f"the completed task {self.task_id} carries no result")
            return result_from_wire(result, CallToolResult)
        if self.status == FAILED:
            error = self.last.get("error")
            if not isinstance(error, dict) or not isinstance(error.get("code"), int):
                raise MCPError(f"the failed task {self.task_id} carries no error")
            message = error.get("message")
            if "data" in error:
                raise ProtocolError(error["code"], str(message), error["data"])
            raise ProtocolError(error["code"], str(message))
        assert self.status == CANCELLED, self.status
        raise RequestCancelled(None, f"the task {self.task_id} of {self.name} was cancelled")


class ClientTasks(ClientExtension):
    """The tasks extension on the client: ``tools/call`` and ``tasks/*`` declare it, a
    ``tools/call`` may be answered with a task, and ``call_tool`` follows that task to its end
    (leaving early, by a cancel or the deadline, cancels the task)."""

    name = TASKS_EXTENSION

    def declares(self, method: str) -> bool:
        return method == "tools/call" or method in TASK_METHODS

    def accepts(self, method: str, result_type: str) -> bool:
        return method == "tools/call" and result_type == "task"

    async def follow_tool_call(
        self, name: str, answer: JSONObject, send: Requester, fulfil: Fulfiller, deadline: float
    ) -> CallToolResult:
        task = ToolTask(name, answer, send, fulfil)
        with trio.CancelScope(deadline=deadline):
            try:
                return await task.result()
            except BaseException:
                if not task.terminal:
                    await task.cancel_shielded()
                raise
        raise trio.TooSlowError
