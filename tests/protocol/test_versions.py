"""Protocol versions, eras and handshake negotiation (seed-behaviors (e) 1-3, 13-15)."""

from __future__ import annotations

import pytest

from trio_mcp.protocol._versions import (
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    check_pin,
    filter_initialize_result,
    is_at_least,
    negotiate,
)

FULL_RESULT = {
    "protocolVersion": "x",
    "capabilities": {},
    "instructions": "use me",
    "serverInfo": {
        "name": "s",
        "version": "1",
        "title": "S",
        "websiteUrl": "https://example.invalid",
        "description": "d",
        "icons": [{"src": "data:,"}],
    },
}


def test_is_at_least_uses_list_order() -> None:
    assert is_at_least("2025-06-18", "2025-03-26")
    assert not is_at_least("2024-11-05", "2025-03-26")
    assert is_at_least("2026-07-28", "2025-11-25")


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_handshake_versions_are_echoed(version: str) -> None:
    assert negotiate(version) == version
    assert negotiate(version, "2025-06-18") == version


@pytest.mark.parametrize("asked", ["2026-07-28", "1999-01-01", "", 5, None])
def test_counter_offer(asked: object) -> None:
    assert negotiate(asked) == LATEST_HANDSHAKE_VERSION == "2025-11-25"
    assert negotiate(asked, "2025-03-26") == "2025-03-26"


def test_pin_rules() -> None:
    assert check_pin(None) == "2025-11-25"
    assert check_pin("2024-11-05") == "2024-11-05"
    with pytest.raises(ValueError, match="modern protocol version and cannot be pinned") as info:
        check_pin("2026-07-28")
    assert "Remove the setting" in str(info.value)
    with pytest.raises(ValueError, match="must be one of 2025-11-25, 2025-06-18"):
        check_pin("2030-01-01")


def test_initialize_result_fields_follow_the_version() -> None:
    latest = filter_initialize_result(FULL_RESULT, "2025-11-25")
    assert latest == FULL_RESULT
    june = filter_initialize_result(FULL_RESULT, "2025-06-18")
    assert set(june["serverInfo"]) == {"name", "version", "title", "websiteUrl"}
    assert june["instructions"] == "use me"
    march = filter_initialize_result(FULL_RESULT, "2025-03-26")
    assert set(march["serverInfo"]) == {"name", "version"}
    assert "instructions" in march
    oldest = filter_initialize_result(FULL_RESULT, "2024-11-05")
    assert "instructions" not in oldest
    assert set(oldest["serverInfo"]) == {"name", "version"}
