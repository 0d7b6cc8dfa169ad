"""The method tables agree with what the server and the HTTP client actually do."""

from __future__ import annotations

from trio_mcp.protocol._methods import BUILTIN_METHODS, SAFE_TO_REPEAT, SERVER_REQUEST_CAPABILITY
from trio_mcp.server._connection import _HANDLERS


def test_the_server_answers_exactly_the_requests_of_the_capability_table() -> None:
    assert set(_HANDLERS) == set(SERVER_REQUEST_CAPABILITY)


def test_builtin_methods_cover_every_request_the_server_answers_itself() -> None:
    assert set(_HANDLERS) <= BUILTIN_METHODS
    assert "subscriptions/listen" in BUILTIN_METHODS
    assert {m for m in BUILTIN_METHODS if m.startswith("notifications/")} == {
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
    }


def test_only_requests_a_server_answers_may_be_repeated_and_never_a_tool_call() -> None:
    assert set(SERVER_REQUEST_CAPABILITY) >= SAFE_TO_REPEAT
    assert "tools/call" not in SAFE_TO_REPEAT and "initialize" not in SAFE_TO_REPEAT
