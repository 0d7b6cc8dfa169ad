"""Multi round-trip requests (2026-07-28): input a handler needs, asked for by ending the request.

In the modern era a server never sends requests. A handler's ``await ctx.elicit(...)`` instead
ends the request with an ``InputRequiredResult``; the client fulfils it and retries with
``inputResponses`` and the ``requestState`` it was given, and on the retry the handler runs again
and the same ``await`` returns the answer. The state is encrypted and bound to the request (its
method, target and arguments), so a client can neither read nor forge it, use it for another
tool or other arguments, or keep it forever.

Answers that come without a state (``inputResponses`` on a first request) are ignored, except
for an opening question whose asker opted in with ``answer_ahead=True``: data the client could
equally have passed as an argument, never a confirmation. Every other question is asked, with a
sealed state, before its answer counts.
"""

from __future__ import annotations

import time
from typing import Any

import attrs

from ..protocol._envelope import Envelope
from ..protocol._request_state import StateSealer, state_digest

#: Methods whose result may be an InputRequiredResult.
INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})


class InputRequired(Exception):
    """Raised by a context method to end a modern request with an InputRequiredResult.

    It carries every question of the round, by key: one, or several asked together. Control
    flow, not an error: it is no :class:`MCPError`, so a handler that catches those around
    ``await ctx.elicit(...)`` (a ``CapabilityMissing``, say) does not swallow the question.
    """

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__(f"input required: {', '.join(requests)}")
        self.requests = requests


class StartTask(Exception):
    """Raised by ``ctx.start_task()`` to end a request's run with a ``CreateTaskResult``: the
    task then runs the handler again, with the input gathered so far. Control flow, like
    :class:`InputRequired`."""


@attrs.define(eq=False)
class ModernRequest:
    """A modern request as its handler sees it: its envelope, and the input gathered so far."""

    envelope: Envelope
    #: Answers to input requests, from earlier rounds and this retry, by key.
    answers: dict[str, Any] = attrs.field(factory=dict)
    #: The handler's own data, carried (sealed) from round to round.
    data: dict[str, Any] = attrs.field(factory=dict)
    asked: int = 0
    #: Keys the handler has asked under in this run: one key, one question.
    claimed: set[str] = attrs.field(factory=set)
    #: A request without a state may already carry answers (``inputResponses``). One counts
    #: only for an opening question (the opening questions asked together included: the ones
    #: its first InputRequiredResult would ask) whose asker opted in (``answer_ahead=True``);
    #: every other question is asked with a sealed state, so no confirmation is ever skipped.
    unsolicited: dict[str, Any] = attrs.field(factory=dict)
    opening: bool = True
    together: bool = False
    #: Tasks (SEP-2663): the handler runs as a task's work; or, before the task exists, it may
    #: become one at ``await ctx.start_task()`` (its earlier questions are multi round-trips).
    in_task: bool = False
    may_start_task: bool = False
    #: The retry's sealed state, once opened: its digest (what a single-use claim is named
    #: by) and how long it had left to live (seconds), or None without a state.
    state_digest: str | None = None
    state_life: float = 0.0

    @property
    def protocol_version(self) -> str:
        return self.envelope.protocol_version

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self.envelope.client_capabilities

    @property
    def client_info(self) -> dict[str, Any] | None:
        return self.envelope.client_info

    @property
    def log_level(self) -> str | None:
        return self.envelope.log_level

    def next_key(self, method: str) -> str:
        """Keys follow the order of the handler's questions, so a rerun asks the same ones."""
        self.asked += 1
        return f"{method.split('/')[0]}-{self.asked}"

    def claim(self, key: str) -> None:
        """Refuse a key asked twice in one run: the second question would get the first's answer."""
        if key in self.claimed:
            raise ValueError(f"the input key {key!r} is already used by another question")
        self.claimed.add(key)

    def answer(self, key: str, *, ahead: bool = False) -> dict[str, Any] | None:
        """The answer to the question asked under ``key``, if the client gave one. An answer
        sent without a state counts only with ``ahead`` (the asker opted in), and only for an
        opening question."""
        answer = self.answers.get(key)
        if answer is None and ahead and self.opening:
            answer = self.unsolicited.get(key)
            if isinstance(answer, dict):
                self.answers[key] = answer  # sealed into the next state, if there is one
        if not self.together:
            self.opening = False
        return answer if isinstance(answer, dict) else None


def target_of(method: str, params: dict[str, Any]) -> str:
    value = params.get("uri") if method == "resources/read" else params.get("name")
    return value if isinstance(value, str) else ""


def arguments_of(method: str, params: dict[str, Any]) -> object:
    """What a state's argument digest covers: ``arguments`` (absent counts as ``{}``); a
    resource has none, its uri (the target) is all there is."""
    return None if method == "resources/read" else params.get("arguments")


class MalformedInput(ValueError):
    """A retry's ``inputResponses`` are not answers at all (answered with -32602)."""


def gather(
    request: ModernRequest,
    method: str,
    params: dict[str, Any],
    sealer: StateSealer,
    *,
    subject: str = "",
    audience: str = "",
) -> bool:
    """Fill ``request`` from a retry's sealed state and input responses.

    Returns False when a state was sent but is not one of ours for this very request (tampered,
    expired, sealed for another method, target, arguments, ``subject`` (the principal) or
    ``audience`` (the server)).
    Responses are taken only for keys the state says were asked; extra ones are ignored. Without
    a state, responses can answer only an opening question asked with ``answer_ahead=True``
    (see ``ModernRequest.unsolicited``).
    """
    responses = params.get("inputResponses")
    if responses is not None and (
        not isinstance(responses, dict) or not all(isinstance(v, dict) for v in responses.values())
    ):
        raise MalformedInput("inputResponses must be an object of result objects")
    token = params.get("requestState")
    if token is None:
        if isinstance(responses, dict):
            request.unsolicited = dict(responses)
        return True
    # Wall-clock time: the retry may reach another worker, which must agree on expiry.
    now = time.time()
    opened = sealer.open_with_expiry(
        method,
        target_of(method, params),
        arguments_of(method, params),
        token,
        now=now,
        subject=subject,
        audience=audience,
    )
    if opened is None:
        return False
    payload, expiry = opened
    assert isinstance(token, str)  # it opened
    request.state_digest = state_digest(token)
    request.state_life = max(expiry - now, 0.0)
    answers = payload.get("answers")
    request.answers = dict(answers) if isinstance(answers, dict) else {}
    data = payload.get("data")
    request.data = dict(data) if isinstance(data, dict) else {}
    asked = payload.get("asked")
    if isinstance(asked, list) and isinstance(responses, dict):
        for key in asked:
            if isinstance(key, str) and key in responses:
                request.answers[key] = responses[key]
    return True


def input_required_result(
    request: ModernRequest,
    exc: InputRequired,
    method: str,
    params: dict[str, Any],
    sealer: StateSealer,
    *,
    subject: str = "",
    audience: str = "",
) -> dict[str, Any]:
    """The InputRequiredResult that asks for ``exc``'s input and remembers everything else,
    sealed for this request (``subject``, the principal it serves, and ``audience``, the
    server)."""
    payload = {"answers": request.answers, "data": request.data, "asked": list(exc.requests)}
    state = sealer.seal(
        method,
        target_of(method, params),
        arguments_of(method, params),
        payload,
        now=time.time(),
        subject=subject,
        audience=audience,
    )
    return {
        "resultType": "input_required",
        "inputRequests": dict(exc.requests),
        "requestState": state,
    }
