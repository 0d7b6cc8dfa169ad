"""HttpOptions grouped by concern: the groups, and the flat keywords of earlier releases, which
still work for one release with a DeprecationWarning naming the new spelling."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from trio_mcp import Server
from trio_mcp.http import (
    HostRules,
    HttpOptions,
    LegacySse,
    Limits,
    MemorySessionStore,
    ScaleOut,
    WebSocketOptions,
)


def flat(**keywords: Any) -> HttpOptions:
    """``HttpOptions`` with keywords mypy no longer knows (the flat ones)."""
    build: Any = HttpOptions
    options: HttpOptions = build(**keywords)
    return options


def test_a_flat_keyword_warns_naming_its_new_spelling_and_lands_in_its_group() -> None:
    with pytest.warns(DeprecationWarning, match=r"limits=Limits\(max_sessions=5\)"):
        options = flat(max_sessions=5)
    assert options.limits == Limits(max_sessions=5)
    assert options == HttpOptions(limits=Limits(max_sessions=5))


def test_flat_keywords_of_one_group_join_the_group_given_beside_them() -> None:
    with pytest.warns(DeprecationWarning):
        options = flat(
            limits=Limits(max_body_bytes=10),
            max_sessions=5,
            cors_origins=["*"],
            node_id="n1",
            ws_ping_interval=2.0,
            sse_messages_path="/m/",
        )
    assert options.limits == Limits(max_body_bytes=10, max_sessions=5)
    assert options.hosts == HostRules(cors_origins=["*"])
    assert options.scale_out == ScaleOut(node_id="n1")
    assert options.websocket == WebSocketOptions(ping_interval=2.0)
    assert options.legacy_sse == LegacySse(messages_path="/m/")


def test_a_flat_path_of_none_turns_its_endpoint_off() -> None:
    with pytest.warns(DeprecationWarning) as warned:
        options = flat(ws_path=None, ws_max_message_bytes=10)
    assert "write HttpOptions(websocket=None)" in str(warned[0].message)
    assert options.websocket is None
    with pytest.warns(DeprecationWarning, match=r"legacy_sse=None"):
        assert flat(sse_path=None).legacy_sse is None


def test_reading_a_flat_name_warns_and_reads_its_group() -> None:
    options = HttpOptions(limits=Limits(max_sessions=7), websocket=None)
    reader: Any = options
    with pytest.warns(DeprecationWarning, match=r"HttpOptions\.limits\.max_sessions"):
        assert reader.max_sessions == 7
    with pytest.warns(DeprecationWarning):
        assert reader.ws_path is None
    with pytest.raises(AttributeError):
        _ = reader.no_such_setting


def test_a_keyword_that_belongs_nowhere_is_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match=r"max_session.*HttpOptions takes path"):
        flat(max_session=5)


def test_the_groups_are_frozen_values() -> None:
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Limits().max_sessions = 1  # type: ignore[misc]
    with pytest.raises(ValueError, match="node_id"):
        ScaleOut(node_id="not a node")


def test_the_fleet_is_built_from_the_scale_out_group_alone() -> None:
    """Only a store or a relay that workers share brings the scale-out code in; a node id alone
    tags session ids for a load balancer and needs none of it."""
    assert Server("t").http_app(HttpOptions(scale_out=ScaleOut(node_id="n1"))).fleet is None
    shared = ScaleOut(session_store=MemorySessionStore(), node_id="n1")
    assert Server("t").http_app(HttpOptions(scale_out=shared)).fleet is not None
    with pytest.raises(ValueError, match="needs a node_id"):
        Server("t").http_app(HttpOptions(scale_out=ScaleOut(session_store=MemorySessionStore())))
