"""``Context``: what a handler can know and do about the request it is serving.

A handler asks for it by annotating a parameter with ``Context``. Everything it starts (progress,
log messages, nested requests to the client) belongs to the request: a nested request runs in the
handler's own task and cancel scope, so cancelling the request cancels it and the client is told.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Iterable, Sequence
from typing import Any, Protocol, TypeVar, overload

import attrs
import trio

from .._engine import Engine, InFlight
from .._exception_groups import collapse_exception_groups
from ..protocol._errors import InvalidAnswer, MCPError, ProtocolError, RequestCancelled
from ..protocol._jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY, JSONObject, RequestId
from ..protocol._methods import CLIENT_REQUEST_CAPABILITY
from ..protocol._types import (
    LOGGING_LEVELS,
    ClientCapabilities,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    Implementation,
    ListRootsResult,
    Root,
    SamplingMessage,
    TextContent,
    from_wire,
    result_from_wire,
    to_wire,
)
from ._input import INPUT_METHODS, InputRequired, ModernRequest, StartTask
from ._principal import Principal
from ._schema import ArgumentsError, elicitation_schema
from ._session_state import SessionState, session_state_of
from ._state import ConnectionState

T = TypeVar("T")


@attrs.frozen
class Elicited(ElicitResult):
    """The user's answer to ``ctx.elicit``: the wire's :class:`ElicitResult` (``content`` is
    the dict the client sent) plus ``data``, the accepted answer checked and converted: an
    instance of the class asked for (the content dict for a JSON Schema), ``None`` unless
    ``action`` is ``"accept"``."""

    data: Any = None


#: Why a modern request cannot change its session's visibility.
_NO_SESSION = (
    "per-session visibility needs a session, and a modern (2026-07-28) request has none: use "
    "server.enable / server.disable, or scopes, instead"
)

A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")


def _lenient(value: Any, cls: type[T]) -> T | None:
    if not isinstance(value, dict):
        return None
    try:
        return from_wire(value, cls)
    except ValueError:
        return None


class CapabilityMissing(MCPError):
    """The client did not declare the capability a nested request needs."""


class NestedRequestError(ProtocolError):
    """The client answered a nested request (sampling, elicitation, roots) with an error.

    It is about the nested request, not the one being served: left uncaught it fails a tool
    (``isError``) or any other request (-32603), instead of being relayed as that request's error.
    """


class ConnectionView(Protocol):
    """What a :class:`Context` reads of the connection its request came in on: the lifecycle
    state and the engine, and the way its notifications go (``notify``: through the engine,
    or, on a connection with none, its own way). A ``ServerConnection`` is one; typing against
    this keeps the connection's module, which builds contexts, from being imported back."""

    @property
    def state(self) -> ConnectionState: ...
    @property
    def session(self) -> Engine: ...
    @property
    def principal(self) -> Principal | None: ...
    @property
    def lifespan_state(self) -> Any: ...
    async def notify(
        self,
        method: str,
        params: JSONObject | None = None,
        *,
        related_request_id: RequestId | None = None,
    ) -> None: ...


class Context:
    """The request being served, as its handler sees it."""

    # Held by every request in flight whose handler takes one: two slots, no more (the
    # per-request state, which few use, is the record's, made on first use).
    __slots__ = ("_connection", "_record")

    def __init__(self, record: InFlight, connection: ConnectionView) -> None:
        self._record = record
        self._connection = connection

    # -- what the request is -------------------------------------------------------------------

    @property
    def request_id(self) -> RequestId:
        return self._record.id

    @property
    def method(self) -> str:
        return self._record.method

    @property
    def params(self) -> dict[str, Any]:
        return self._record.params

    @property
    def meta(self) -> dict[str, Any]:
        meta = self._record.params.get("_meta")
        return meta if isinstance(meta, dict) else {}

    @property
    def auth(self) -> Principal | None:
        """Who the caller is, by their access token (None on a server without authorization):
        subject, client id, scopes and claims."""
        principal = self._record.principal
        return principal if principal is not None else self._connection.principal

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled this request (its response will be suppressed)."""
        return self._record.cancel_requested

    @property
    def cancel_reason(self) -> str | None:
        return self._record.cancel_reason

    def raise_if_cancelled(self) -> None:
        """For cooperative code: end the request now if the client cancelled it."""
        if self._record.cancel_requested:
            raise RequestCancelled(self._record.id, self._record.cancel_reason)

    @property
    def client_info(self) -> Implementation | None:
        envelope = self._record.envelope
        if envelope is not None:
            return _lenient(envelope.client_info, Implementation)
        return self._connection.state.client_info

    @property
    def client_capabilities(self) -> ClientCapabilities:
        """In the modern era, what this request declared; never inferred from earlier ones."""
        envelope = self._record.envelope
        if envelope is not None:
            return _lenient(envelope.client_capabilities, ClientCapabilities) or (
                ClientCapabilities()
            )
        return self._connection.state.client_capabilities

    @property
    def protocol_version(self) -> str:
        envelope = self._record.envelope
        if envelope is not None:
            return str(envelope.protocol_version)
        return self._connection.state.protocol_version

    @property
    def modern(self) -> bool:
        """True for a request of the modern era (it carried its own protocol version)."""
        return self._record.envelope is not None

    def _wants_log(self, level: str) -> bool:
        envelope = self._record.envelope
        if envelope is None:
            return self._connection.state.wants_log(level)
        # Modern: only when this request asked, at the level it asked for.
        asked = envelope.log_level
        if asked not in LOGGING_LEVELS:
            return False
        return LOGGING_LEVELS.index(level) >= LOGGING_LEVELS.index(asked)

    @property
    def lifespan(self) -> Any:
        """The state the server's lifespan yielded (``Server(lifespan=...)``), shared by every
        request of the process; None when the server has none. Typed ``Any`` so that an
        annotation narrows it (``pool: Pool = ctx.lifespan``); :meth:`lifespan_as` checks."""
        return self._connection.lifespan_state

    def lifespan_as(self, cls: type[T]) -> T:
        """``ctx.lifespan``, checked to be a ``cls`` (``TypeError`` otherwise) and typed so."""
        state = self._connection.lifespan_state
        if not isinstance(state, cls):
            raise TypeError(f"the lifespan state is a {type(state).__name__}, not a {cls.__name__}")
        return state

    @property
    def connection(self) -> ConnectionView:
        """The connection's lifecycle state and engine (low-level: see ``trio_mcp.lowlevel``)."""
        return self._connection

    def enable_components(
        self,
        *,
        names: Iterable[str] | str | None = None,
        tags: Iterable[str] | str | None = None,
        components: Iterable[str] | str | None = None,
        only: bool = False,
    ) -> None:
        """Show components to this session only, by name or tag, as ``server.enable`` does
        for every client (its rules come after the server's); its client is told the lists
        changed. A session is a handshake-era connection: a modern request has none, so
        there this raises ``RuntimeError`` (use ``server.enable``, or scopes, instead)."""
        from ._visibility import change_session

        if self.modern:
            raise RuntimeError(_NO_SESSION)
        change_session(self._connection, True, names, tags, components, only)

    def disable_components(
        self,
        *,
        names: Iterable[str] | str | None = None,
        tags: Iterable[str] | str | None = None,
        components: Iterable[str] | str | None = None,
    ) -> None:
        """Hide components from this session only, by name or tag: left out of its lists and
        refused as unknown; its client is told the lists changed. Handshake era only, as
        :meth:`enable_components`."""
        from ._visibility import change_session

        if self.modern:
            raise RuntimeError(_NO_SESSION)
        change_session(self._connection, False, names, tags, components, False)

    def _served_request(self) -> tuple[InFlight, ConnectionView]:
        """The record and connection behind this context, for tools that answer as another
        method of the same request would (``prompts_as_tools``, ``resources_as_tools``)."""
        return self._record, self._connection

    # -- notifications about this request ------------------------------------------------------

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the client asked for progress on this request
        (never from a task: the tasks extension has no channel for it)."""
        token = self._record.progress_token
        if token is None or self._record.finished or self.in_task:
            await trio.lowlevel.checkpoint()
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self._connection.notify(
            "notifications/progress", params, related_request_id=self._record.id
        )

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` at ``level``, honouring the client's ``setLevel``
        (never from a task: the tasks extension has no channel for it)."""
        if level not in LOGGING_LEVELS:
            raise ValueError(f"unknown logging level {level!r}; use one of {LOGGING_LEVELS}")
        if self._record.finished or self.in_task or not self._wants_log(level):
            await trio.lowlevel.checkpoint()
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self._connection.notify(
            "notifications/message", params, related_request_id=self._record.id
        )

    async def debug(self, data: Any, logger: str | None = None) -> None:
        await self.log("debug", data, logger)

    async def info(self, data: Any, logger: str | None = None) -> None:
        await self.log("info", data, logger)

    async def warning(self, data: Any, logger: str | None = None) -> None:
        await self.log("warning", data, logger)

    async def error(self, data: Any, logger: str | None = None) -> None:
        await self.log("error", data, logger)

    # -- nested requests to the client ---------------------------------------------------------

    def _require(self, capability: str, mode: str | None = None) -> None:
        modern = self._record.envelope
        if modern is None and not self._connection.state.back_channel:
            raise CapabilityMissing(
                "this connection cannot carry requests to the client (stateless HTTP)"
            )
        caps = (
            modern.client_capabilities
            if modern is not None
            else to_wire(self._connection.state.client_capabilities)
        )
        value = caps.get(capability) if isinstance(caps, dict) else None
        if not isinstance(value, dict):
            if modern is not None:
                raise ProtocolError(
                    MISSING_REQUIRED_CLIENT_CAPABILITY,
                    "Missing required client capability",
                    {"requiredCapabilities": {capability: {mode: {}} if mode else {}}},
                )
            raise CapabilityMissing(f"the client did not declare the {capability!r} capability")
        # Elicitation: ``{}`` means form mode only (as before 2025-11-25); modes are listed.
        if mode == "url" and "url" not in value:
            raise CapabilityMissing("the client did not declare URL-mode elicitation")
        if mode == "form" and value and "form" not in value:
            raise CapabilityMissing("the client did not declare form-mode elicitation")

    async def _nested(
        self,
        method: str,
        params: dict[str, Any],
        key: str | None = None,
        answer_ahead: bool = False,
    ) -> dict[str, Any]:
        modern = self._record.envelope
        if modern is not None:
            return await self._input(modern, method, params, key, answer_ahead)
        session = self._connection.session
        try:
            if session.observer is None:
                return await session.request(method, params, related_request_id=self._record.id)
            # A CLIENT span of the server's, child of the request that asks.
            with session.observer.sending(method, params) as call:
                request_id = session.new_request_id()
                call.sent(request_id)
                return await session.request(
                    method,
                    call.params,
                    related_request_id=self._record.id,
                    request_id=request_id,
                )
        except ProtocolError as exc:
            raise NestedRequestError.from_error(exc.error) from None

    async def _input(
        self,
        modern: ModernRequest,
        method: str,
        params: dict[str, Any],
        key: str | None,
        answer_ahead: bool,
    ) -> dict[str, Any]:
        """Modern era: the answer gathered for this question, or end the request to ask it."""
        if self.method not in INPUT_METHODS:
            raise CapabilityMissing(
                f"in the modern era only {', '.join(sorted(INPUT_METHODS))} can ask for input"
            )
        await trio.lowlevel.checkpoint()
        if key is None:
            key = modern.next_key(method)
        modern.claim(key)
        answer = modern.answer(key, ahead=answer_ahead)
        if answer is not None:
            return answer
        raise InputRequired({key: {"method": method, "params": params}})

    @overload
    async def ask_together(self, first: Awaitable[A], second: Awaitable[B], /) -> tuple[A, B]: ...
    @overload
    async def ask_together(
        self, first: Awaitable[A], second: Awaitable[B], third: Awaitable[C], /
    ) -> tuple[A, B, C]: ...
    @overload
    async def ask_together(self, *questions: Awaitable[T]) -> tuple[T, ...]: ...

    async def ask_together(self, *questions: Awaitable[Any]) -> tuple[Any, ...]:
        """Ask several questions at once and return their answers in order.

        Pass the calls unawaited: ``await ctx.ask_together(ctx.elicit(...), ctx.sample(...))``.
        In the modern era they end the request with one InputRequiredResult, so the client
        answers them all in one round trip instead of one each; in the handshake era they are
        sent to the client concurrently. Each question keeps its own ``key`` and
        ``answer_ahead``.
        """
        modern = self._record.envelope
        if modern is None:
            answers: list[Any] = [None] * len(questions)

            async def ask(index: int, question: Awaitable[Any]) -> None:
                answers[index] = await question

            with collapse_exception_groups():
                async with trio.open_nursery() as nursery:
                    for index, question in enumerate(questions):
                        nursery.start_soon(ask, index, question)
            return tuple(answers)
        gathered: list[Any] = []
        unanswered: dict[str, dict[str, Any]] = {}
        remaining = iter(questions)
        modern.together = True  # one round: an opening batch is answerable as a whole
        try:
            for question in remaining:
                try:
                    gathered.append(await question)
                except InputRequired as exc:
                    unanswered.update(exc.requests)
                    gathered.append(None)
        finally:
            modern.together = False
            modern.opening = False
            for question in remaining:  # left behind by an error: never to be awaited
                if inspect.iscoroutine(question):
                    question.close()
        if unanswered:
            raise InputRequired(unanswered)
        return tuple(gathered)

    @property
    def state(self) -> dict[str, Any]:
        """Data of the handler's own, kept from round to round of a modern multi round-trip
        request (sealed in its ``requestState``); a plain per-request dict otherwise."""
        modern = self._record.envelope
        if modern is not None:
            data: dict[str, Any] = modern.data
            return data
        return self._record.local_state

    @property
    def session_state(self) -> SessionState:
        """What this request's session keeps across requests: async ``get``/``set``/``delete``
        of JSON values, bounded, in the server's ``session_state_store``. Handshake era: the
        session's (dropped when it ends). Modern era: the principal's under the handle the
        client sends in ``_meta["trio-mcp/state"]``; without one, ``SessionStateError``."""
        auth = self.auth
        return session_state_of(
            self._connection,
            modern=self.modern,
            meta=self.meta,
            principal=auth.identity if auth is not None else None,
        )

    @property
    def in_task(self) -> bool:
        """True while the handler runs as a task's work (SEP-2663)."""
        modern = self._record.envelope
        return modern is not None and bool(modern.in_task)

    async def start_task(self) -> None:
        """Become a task here (a tool registered with ``task=..., input_first=True``).

        The questions the handler asked before this call were multi round-trips of the request
        itself; here the request ends with a ``CreateTaskResult`` and the task runs the handler
        again, where the same questions return the answers already given and this call
        returns. Where no task is to be made (a request without the extension, a handshake-era
        request, or already in the task), it returns at once.
        """
        await trio.lowlevel.checkpoint()
        modern = self._record.envelope
        if modern is not None and modern.may_start_task and not modern.in_task:
            raise StartTask()

    async def elicit(
        self,
        message: str,
        schema: dict[str, Any] | type[Any],
        *,
        key: str | None = None,
        answer_ahead: bool = False,
    ) -> Elicited:
        """Ask the user for structured input (form mode).

        ``schema`` is a flat JSON Schema object, or a class (attrs, dataclass, TypedDict,
        pydantic model) whose schema is derived. Accepted content is checked against the
        schema, so a handler never sees content the client was not asked for; the answer's
        ``data`` is then an instance of the class (for a dict schema, the content dict).
        ``key`` names the question in a modern InputRequiredResult (by default questions are
        numbered in the order asked).

        ``answer_ahead=True`` lets a modern client answer this question in its first request,
        without being asked (``inputResponses`` with no ``requestState``), if it is the opening
        question. Only for data the client could equally have passed as an argument, never
        for a confirmation: by default such an answer is ignored and the question is asked.
        """
        self._require("elicitation", "form")
        requested, check_answer = elicitation_schema(schema)
        params = to_wire(ElicitRequestFormParams(message=message, requested_schema=requested))
        raw = await self._nested("elicitation/create", params, key, answer_ahead)
        result = result_from_wire(raw, ElicitResult)
        data: Any = None
        if result.action == "accept":
            try:
                data = check_answer(result.content or {})
            except ArgumentsError as exc:
                raise InvalidAnswer(f"the client's elicitation answer is invalid: {exc}") from None
        return Elicited(
            action=result.action,
            content=result.content,
            meta=result.meta,
            extra=result.extra,
            data=data,
        )

    async def elicit_url(
        self, message: str, url: str, elicitation_id: str, *, key: str | None = None
    ) -> ElicitResult:
        """Ask the user to visit ``url`` (URL-mode elicitation, 2025-11-25)."""
        self._require("elicitation", "url")
        params = to_wire(
            ElicitRequestURLParams(message=message, url=url, elicitation_id=elicitation_id)
        )
        raw = await self._nested("elicitation/create", params, key)
        return result_from_wire(raw, ElicitResult)

    async def sample(
        self,
        messages: str | Sequence[SamplingMessage | str | dict[str, Any]],
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: list[str] | None = None,
        key: str | None = None,
        answer_ahead: bool = False,
        **extra: Any,
    ) -> CreateMessageResult:
        """Ask the client's model for a completion (``sampling/createMessage``); ``key`` and
        ``answer_ahead`` as for :meth:`elicit`.

        ``messages`` is one user message as a string, or a sequence of ``SamplingMessage``,
        strings (user messages) and dicts in the wire shape (``{"role": "user", "content":
        {"type": "text", "text": "..."}}``).
        """
        self._require("sampling")
        if isinstance(messages, str):
            messages = [messages]
        request = CreateMessageRequestParams(
            messages=[_sampling_message(index, m) for index, m in enumerate(messages)],
            max_tokens=max_tokens,
            system_prompt=system_prompt,
            temperature=temperature,
            stop_sequences=stop_sequences,
        )
        params = to_wire(request)
        params.update(extra)
        raw = await self._nested("sampling/createMessage", params, key, answer_ahead)
        return result_from_wire(raw, CreateMessageResult)

    async def list_roots(self, *, key: str | None = None, answer_ahead: bool = False) -> list[Root]:
        """The client's roots (``roots/list``); ``key`` and ``answer_ahead`` as for
        :meth:`elicit`."""
        self._require("roots")
        raw = await self._nested("roots/list", {}, key, answer_ahead)
        return list(result_from_wire(raw, ListRootsResult).roots)

    async def ask_client(
        self, method: str, params: dict[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        """Ask the client a question given in its wire form, as this request's own nested
        request, and return the client's answer as it came.

        For a handler that relays another server's question (a proxy forwards its upstream's
        ``elicitation/create``, ``sampling/createMessage`` and ``roots/list`` this way); a
        handler asking its own question uses :meth:`elicit`, :meth:`sample` or
        :meth:`list_roots`, which build the params and check the answer. It is checked and
        asked as they are: a client that did not declare the method's capability (for an
        elicitation, the ``mode`` in ``params``) raises :class:`CapabilityMissing` (in the
        modern era, the request fails with -32021); in the modern era the request ends with an
        InputRequiredResult and its retry brings the answer; ``key`` as for :meth:`elicit`.
        """
        capability = CLIENT_REQUEST_CAPABILITY.get(method)
        if capability is None:
            raise ValueError(f"{method!r} is not a request a server may send a client")
        mode = params.get("mode", "form") if capability == "elicitation" else None
        self._require(capability, mode)
        return await self._nested(method, params, key)


def _sampling_message(index: int, message: object) -> SamplingMessage:
    """One message for :meth:`Context.sample`, from any of the forms it accepts."""
    if isinstance(message, SamplingMessage):
        return message
    if isinstance(message, str):
        return SamplingMessage(role="user", content=TextContent(message))
    if isinstance(message, dict):
        try:
            return from_wire(message, SamplingMessage)
        except ValueError as exc:
            raise TypeError(
                f"ctx.sample: message {index} is not a sampling message in the wire shape "
                f"({{'role': ..., 'content': {{'type': 'text', 'text': ...}}}}): {exc}"
            ) from None
    raise TypeError(
        f"ctx.sample: message {index} is of type {type(message).__name__}; expected a "
        "SamplingMessage, a str or a dict in the wire shape"
    )
