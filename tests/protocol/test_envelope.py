"""The modern envelope, result stamping and discover, without an event loop."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp.protocol import ProtocolError
from trio_mcp.protocol._envelope import (
    CLIENT_CAPABILITIES_KEY,
    PROTOCOL_VERSION_KEY,
    SERVER_INFO_KEY,
    CacheHints,
    discover_result,
    has_envelope,
    make_envelope,
    read_envelope,
    stamp_result,
)


def enveloped(version: Any = "2026-07-28", **extra: Any) -> dict[str, Any]:
    return {"_meta": {PROTOCOL_VERSION_KEY: version, CLIENT_CAPABILITIES_KEY: {}, **extra}}


def test_only_the_version_key_makes_a_request_modern() -> None:
    assert has_envelope(enveloped())
    assert not has_envelope({"_meta": {"progressToken": 1, "traceparent": "x"}})
    assert not has_envelope(None)
    assert not has_envelope({"_meta": "nope"})


def test_reading_an_envelope() -> None:
    env = read_envelope(
        enveloped(**{"io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"}})
    )
    assert env.protocol_version == "2026-07-28"
    assert env.client_capabilities == {}
    assert env.client_info == {"name": "c", "version": "1"}
    assert env.log_level is None
    assert read_envelope(
        {"_meta": make_envelope("2026-07-28", {"elicitation": {}})}
    ).client_capabilities == {"elicitation": {}}


def test_an_unknown_version_is_minus_32022_with_both_lists() -> None:
    with pytest.raises(ProtocolError) as info:
        read_envelope(enveloped("2027-01-01"))
    assert info.value.code == -32022
    assert info.value.message == "Unsupported protocol version"
    assert info.value.data == {"supported": ["2026-07-28"], "requested": "2027-01-01"}


@pytest.mark.parametrize(
    ("params", "key"),
    [
        ({"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28"}}, CLIENT_CAPABILITIES_KEY),
        (
            {"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: []}},
            CLIENT_CAPABILITIES_KEY,
        ),
        ({"_meta": {PROTOCOL_VERSION_KEY: 5, CLIENT_CAPABILITIES_KEY: {}}}, PROTOCOL_VERSION_KEY),
        ({}, PROTOCOL_VERSION_KEY),
        (None, PROTOCOL_VERSION_KEY),
    ],
)
def test_a_missing_key_is_invalid_params_naming_it(params: Any, key: str) -> None:
    with pytest.raises(ProtocolError) as info:
        read_envelope(params)
    assert info.value.code == -32602
    assert key in info.value.message


def test_modern_results_get_result_type_and_server_info() -> None:
    hints = CacheHints()
    result = stamp_result(
        {"tools": []},
        "tools/list",
        modern=True,
        hints=hints,
        server_info={"name": "s", "version": "1"},
    )
    assert result == {
        "tools": [],
        "resultType": "complete",
        "_meta": {SERVER_INFO_KEY: {"name": "s", "version": "1"}},
        "ttlMs": 0,
        "cacheScope": "private",
    }
    kept = stamp_result({"resultType": "input_required"}, "tools/call", modern=True, hints=hints)
    assert kept == {"resultType": "input_required"}
    call = stamp_result({"content": []}, "tools/call", modern=True, hints=hints)
    assert "ttlMs" not in call and call["resultType"] == "complete"
    # Input-required results of a cacheable method carry no hints.
    pending = stamp_result(
        {"resultType": "input_required"}, "resources/read", modern=True, hints=hints
    )
    assert "ttlMs" not in pending


def test_configured_hints_win_and_a_handlers_own_hints_win_over_them() -> None:
    hints = CacheHints.configure(ttl_ms=5000)
    assert stamp_result({}, "tools/list", modern=True, hints=hints)["ttlMs"] == 5000
    own = stamp_result({"ttlMs": 60000}, "resources/read", modern=True, hints=hints)
    assert own["ttlMs"] == 60000 and own["cacheScope"] == "private"


def test_handshake_results_get_hints_only_when_configured() -> None:
    assert stamp_result({"tools": []}, "tools/list", modern=False, hints=CacheHints()) == {
        "tools": []
    }
    configured = stamp_result(
        {"tools": [], "nextCursor": "c"},
        "tools/list",
        modern=False,
        hints=CacheHints.configure(ttl_ms=5000),
    )
    assert configured == {"tools": [], "nextCursor": "c", "ttlMs": 5000, "cacheScope": "private"}
    scoped = stamp_result(
        {"contents": []},
        "resources/read",
        modern=False,
        hints=CacheHints.configure(cache_scope="private"),
    )
    assert scoped == {"contents": [], "ttlMs": 0, "cacheScope": "private"}
    assert "resultType" not in configured
    assert stamp_result({}, "ping", modern=False, hints=CacheHints.configure(ttl_ms=1)) == {}


@pytest.mark.parametrize(
    ("ttl", "scope"), [(-1, None), (1.5, None), (True, None), (None, "internal")]
)
def test_invalid_hint_settings(ttl: Any, scope: Any) -> None:
    with pytest.raises(ValueError):
        CacheHints.configure(ttl_ms=ttl, cache_scope=scope)


def test_discover_result_shape() -> None:
    result = discover_result(
        capabilities={
            "tools": {"listChanged": True},
            "resources": {"listChanged": True, "subscribe": True},
            "logging": {},
        },
        server_info={"name": "my_server", "version": "1.0.0"},
        instructions=None,
        hints=CacheHints(),
    )
    assert result == {
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}, "resources": {}, "logging": {}},
        "_meta": {SERVER_INFO_KEY: {"name": "my_server", "version": "1.0.0"}},
        "ttlMs": 0,
        "cacheScope": "private",
        "resultType": "complete",
    }
    assert "serverInfo" not in result
    listened = discover_result(
        capabilities={"tools": {"listChanged": True}},
        server_info={"name": "s", "version": "1"},
        instructions="hi",
        hints=CacheHints.configure(ttl_ms=3_600_000, cache_scope="public"),
        listen=True,
    )
    assert listened["capabilities"] == {"tools": {"listChanged": True}}
    assert listened["instructions"] == "hi"
    assert (listened["ttlMs"], listened["cacheScope"]) == (3_600_000, "public")
