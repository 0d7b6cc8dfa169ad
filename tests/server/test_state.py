"""The connection state machine on its own: every transition, legal and illegal, with no I/O."""

from __future__ import annotations

import pytest

from trio_mcp import ProtocolError
from trio_mcp.protocol import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND
from trio_mcp.protocol._types import LOGGING_LEVELS, ClientCapabilities, Implementation
from trio_mcp.protocol._versions import Era
from trio_mcp.server._state import ConnectionState

INFO = Implementation(name="c", version="1")
CAPS = ClientCapabilities(roots={"listChanged": True})


def initialized(requested: str = "2025-06-18") -> ConnectionState:
    state = ConnectionState("2025-11-25")
    state.initialize(requested, INFO, CAPS, {"tools": {"listChanged": True}})
    return state


def modern() -> ConnectionState:
    state = ConnectionState("2025-11-25")
    state.lock_modern()
    return state


def refused(error: pytest.ExceptionInfo[ProtocolError], code: int, text: str) -> bool:
    return error.value.code == code and text in error.value.message


def test_a_new_connection_is_in_no_era_and_knows_nothing_of_the_client() -> None:
    state = ConnectionState("2025-03-26")
    assert state.era is None
    assert not state.initialized and not state.modern_locked
    assert state.protocol_version == "2025-03-26"
    assert state.client_info is None
    assert state.client_capabilities == ClientCapabilities()
    assert state.announced == {}
    assert state.back_channel
    assert state.log_level is None
    state.check_handshake_request("tools/list")
    state.check_handshake_request("initialize")
    state.check_modern_request()
    state.check_initialize()


def test_initialize_fixes_what_the_handshake_negotiated() -> None:
    state = ConnectionState("2025-11-25")
    announced = {"tools": {"listChanged": True}}
    assert state.initialize("2025-06-18", INFO, CAPS, announced) == "2025-06-18"
    assert state.era is Era.HANDSHAKE and state.initialized and not state.modern_locked
    assert state.protocol_version == "2025-06-18"
    assert state.client_info == INFO
    assert state.client_capabilities == CAPS
    assert state.announced == announced


@pytest.mark.parametrize("requested", ["2026-07-28", "1999-01-01", ""])
def test_initialize_counter_offers_the_offered_version(requested: str) -> None:
    state = ConnectionState("2024-11-05")
    assert state.initialize(requested, INFO, CAPS, {}) == "2024-11-05"
    assert state.protocol_version == "2024-11-05"


def test_a_second_initialize_is_refused_and_changes_nothing() -> None:
    state = initialized("2025-06-18")
    with pytest.raises(ProtocolError) as check:
        state.check_initialize()
    assert refused(check, INVALID_REQUEST, "Server already initialized")
    other = Implementation(name="other", version="2")
    with pytest.raises(ProtocolError) as error:
        state.initialize("2024-11-05", other, ClientCapabilities(), {})
    assert refused(error, INVALID_REQUEST, "Server already initialized")
    assert state.protocol_version == "2025-06-18"
    assert state.client_info == INFO and state.client_capabilities == CAPS
    with pytest.raises(ProtocolError):
        state.skip_handshake()


def test_a_handshake_connection_refuses_modern_requests_and_the_modern_lock() -> None:
    state = initialized()
    state.check_handshake_request("tools/list")
    with pytest.raises(ProtocolError) as check:
        state.check_modern_request()
    assert refused(check, INVALID_REQUEST, "already negotiated the legacy lifecycle")
    with pytest.raises(ProtocolError) as lock:
        state.lock_modern()
    assert refused(lock, INVALID_REQUEST, "already negotiated the legacy lifecycle")
    assert state.era is Era.HANDSHAKE


def test_the_modern_lock_holds_and_may_be_taken_again() -> None:
    state = modern()
    assert state.era is Era.MODERN and state.modern_locked and not state.initialized
    state.lock_modern()  # every later modern request that succeeds takes it again
    state.check_modern_request()
    assert state.era is Era.MODERN


def test_a_modern_connection_refuses_the_handshake_and_plain_requests() -> None:
    state = modern()
    with pytest.raises(ProtocolError) as plain:
        state.check_handshake_request("tools/list")
    assert refused(plain, INVALID_PARAMS, "speaks the modern protocol")
    with pytest.raises(ProtocolError) as routed:
        state.check_handshake_request("initialize")
    assert refused(routed, METHOD_NOT_FOUND, "Method not found")
    assert routed.value.data == "initialize"
    with pytest.raises(ProtocolError) as check:
        state.check_initialize()
    assert refused(check, METHOD_NOT_FOUND, "Method not found")
    with pytest.raises(ProtocolError) as handshake:
        state.initialize("2025-11-25", INFO, CAPS, {})
    assert refused(handshake, METHOD_NOT_FOUND, "Method not found")
    with pytest.raises(ProtocolError):
        state.skip_handshake()
    assert state.era is Era.MODERN
    assert state.client_info is None and state.announced == {}


def test_skipping_the_handshake_runs_at_the_offered_version_knowing_no_client() -> None:
    state = ConnectionState("2025-06-18")
    state.skip_handshake()
    assert state.initialized and state.protocol_version == "2025-06-18"
    assert state.client_info is None and state.client_capabilities == ClientCapabilities()
    assert state.announced == {}
    with pytest.raises(ProtocolError) as error:
        state.check_modern_request()
    assert refused(error, INVALID_REQUEST, "already negotiated the legacy lifecycle")


def test_the_back_channel_can_only_be_refused() -> None:
    state = ConnectionState("2025-11-25")
    state.refuse_back_channel()
    assert not state.back_channel
    state.initialize("2025-11-25", INFO, CAPS, {})
    state.refuse_back_channel()
    assert not state.back_channel


def test_every_level_is_wanted_until_the_client_sets_one() -> None:
    state = ConnectionState("2025-11-25")
    assert all(state.wants_log(level) for level in LOGGING_LEVELS)


@pytest.mark.parametrize("level", LOGGING_LEVELS)
def test_set_log_level_keeps_that_level_and_the_ones_above(level: str) -> None:
    state = initialized()
    state.set_log_level(level)
    assert state.log_level == level
    at = LOGGING_LEVELS.index(level)
    assert [state.wants_log(other) for other in LOGGING_LEVELS] == [
        i >= at for i in range(len(LOGGING_LEVELS))
    ]


@pytest.mark.parametrize("level", ["verbose", "", None, 3, ["info"]])
def test_an_unknown_log_level_is_refused_and_changes_nothing(level: object) -> None:
    state = initialized()
    state.set_log_level("error")
    with pytest.raises(ProtocolError) as error:
        state.set_log_level(level)
    assert refused(error, INVALID_PARAMS, "level must be one of")
    assert state.log_level == "error"
