"""The MCP Apps wire values: a UI resource's metadata and a tool's link, written and read."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp.apps import APP_MIME_TYPE, AppMeta, Csp, Permissions, ToolUi, declares_apps
from trio_mcp.apps._meta import check_ui_uri, is_app_mime_type


def test_resource_metadata_is_written_in_the_seps_field_names_and_read_back() -> None:
    meta = AppMeta(
        csp=Csp(
            connect_domains=["https://api.example.com", "wss://live.example.com"],
            resource_domains=["https://*.cdn.example"],
            frame_domains=["https://player.example"],
            base_uri_domains=["https://base.example"],
        ),
        permissions=Permissions(camera=True, clipboard_write=True),
        domain="abc123.apps.example",
        prefers_border=False,
    )
    wire = meta.to_wire()
    assert wire == {
        "csp": {
            "connectDomains": ["https://api.example.com", "wss://live.example.com"],
            "resourceDomains": ["https://*.cdn.example"],
            "frameDomains": ["https://player.example"],
            "baseUriDomains": ["https://base.example"],
        },
        "permissions": {"camera": {}, "clipboardWrite": {}},
        "domain": "abc123.apps.example",
        "prefersBorder": False,
    }
    assert AppMeta.from_wire(wire) == meta


def test_empty_metadata_says_nothing_but_what_was_given() -> None:
    assert AppMeta().to_wire() == {}
    assert AppMeta(csp=Csp()).to_wire() == {"csp": {}}


@pytest.mark.parametrize(
    "origin",
    [
        "https://a.example; script-src *",  # would add a directive to the host's policy
        "https://a.example 'unsafe-eval'",
        "https://a.example,https://b.example",
        "",
    ],
)
def test_an_origin_that_could_change_the_hosts_policy_is_refused(origin: str) -> None:
    with pytest.raises(ValueError, match="is not an origin"):
        Csp(connect_domains=[origin])


def test_one_string_where_a_list_of_origins_belongs_is_refused() -> None:
    with pytest.raises(ValueError, match="not one string"):
        Csp(connect_domains="https://api.example.com")


@pytest.mark.parametrize(
    ("wire", "reason"),
    [
        ("csp", "_meta.ui must be an object"),
        ({"csp": []}, "csp must be an object"),
        ({"csp": {"connectDomains": "https://x"}}, "connectDomains must be a list"),
        ({"permissions": {"camera": True}}, "permissions.camera must be an object"),
        ({"domain": "a b"}, "is not a domain"),
        ({"prefersBorder": "yes"}, "prefersBorder must be a boolean"),
    ],
)
def test_malformed_resource_metadata_is_refused_naming_the_field(wire: Any, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        AppMeta.from_wire(wire)


def test_a_tools_link_reads_the_ui_object_and_the_older_flat_key() -> None:
    ui = ToolUi.of({"ui": {"resourceUri": "ui://s/v", "visibility": ["app"]}})
    assert ui == ToolUi("ui://s/v", ("app",))
    assert not ui.for_model and ui.for_app
    assert ToolUi.of({"ui/resourceUri": "ui://s/old"}) == ToolUi("ui://s/old")
    assert ToolUi.of({"other": 1}) is None and ToolUi.of(None) is None
    # The default visibility is both.
    assert ToolUi.of({"ui": {"resourceUri": "ui://s/v"}}) == ToolUi("ui://s/v", ("model", "app"))


@pytest.mark.parametrize(
    ("uri", "visibility", "reason"),
    [
        ("https://x/app.html", ["model"], "not a UI resource URI"),
        ("ui://", ["model"], "not a UI resource URI"),
        ("ui://s/{id}", ["model"], "not a template"),
        ("ui://s/v", [], "non-empty list"),
        ("ui://s/v", ["user"], "non-empty list"),
        ("ui://s/v", "model", "visibility is a list"),
    ],
)
def test_a_link_a_server_declares_is_checked(uri: str, visibility: Any, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        ToolUi.declare(uri, visibility)


def test_the_apps_mime_type_is_recognised_whatever_its_case_and_spacing() -> None:
    assert is_app_mime_type(APP_MIME_TYPE)
    assert is_app_mime_type("Text/HTML; profile=mcp-app")
    assert not is_app_mime_type("text/html")
    assert not is_app_mime_type("text/plain;profile=mcp-app")
    assert not is_app_mime_type(None)


def test_a_client_renders_apps_only_if_it_declares_the_apps_mime_type() -> None:
    def caps(settings: Any) -> dict[str, Any]:
        return {"extensions": {"io.modelcontextprotocol/ui": settings}}

    assert declares_apps(caps({"mimeTypes": [APP_MIME_TYPE]}))
    assert not declares_apps(caps({}))
    assert not declares_apps(caps({"mimeTypes": ["text/html"]}))
    assert not declares_apps({})
    assert not declares_apps(None)


def test_a_ui_uri_is_checked() -> None:
    assert check_ui_uri("ui://s/v") == "ui://s/v"
    with pytest.raises(ValueError):
        check_ui_uri(42)
