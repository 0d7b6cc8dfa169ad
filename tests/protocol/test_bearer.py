"""The resource server's side of bearer tokens, sans-IO: reading ``Authorization`` (RFC 6750
§2.1), refusing a token in the query (§2.3), writing the ``WWW-Authenticate`` challenge (§3,
RFC 9728 §5.1), and the Protected Resource Metadata with its well-known paths (RFC 9728)."""

from __future__ import annotations

import pytest

from trio_mcp.protocol._bearer import (
    INSUFFICIENT_SCOPE,
    INVALID_TOKEN,
    MAX_AUTHORIZATION_BYTES,
    MAX_DESCRIPTION,
    BadCredential,
    format_challenge,
    metadata_paths,
    read_bearer,
    resource_metadata,
    token_in_query,
)
from trio_mcp.protocol._oauth import parse_www_authenticate

TOKEN = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln-_~+/=="

# -- reading the credential ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER {TOKEN}", f"  Bearer   {TOKEN}  "],
)
def test_a_bearer_credential_is_read_in_any_case_of_the_scheme(value: str) -> None:
    assert read_bearer([value]) == TOKEN


@pytest.mark.parametrize(
    "values",
    [[], ["Basic dXNlcjpwYXNz"], ["Negotiate abc"], ["Bearer"], ["Bearer   "]],
)
def test_no_token_at_all_is_missing_which_asks_for_one(values: list[str]) -> None:
    with pytest.raises(BadCredential) as caught:
        read_bearer(values)
    assert caught.value.missing


def test_two_headers_are_a_bad_request_and_never_quoted() -> None:
    with pytest.raises(BadCredential) as caught:
        read_bearer([f"Bearer {TOKEN}", "Bearer other-token"])
    assert not caught.value.missing
    assert "more than one" in caught.value.message
    assert TOKEN not in str(caught.value) and "other-token" not in str(caught.value)


def test_an_oversized_header_is_refused_by_its_length_and_never_quoted() -> None:
    big = "A" * MAX_AUTHORIZATION_BYTES
    with pytest.raises(BadCredential) as caught:
        read_bearer([f"Bearer {big}"])
    assert not caught.value.missing
    assert str(MAX_AUTHORIZATION_BYTES) in caught.value.message
    assert big not in str(caught.value)
    # The limit is the caller's, and a header at the limit is read.
    at_limit = "Bearer " + "A" * (100 - len("Bearer "))
    assert read_bearer([at_limit], max_bytes=100) == "A" * 93
    with pytest.raises(BadCredential):
        read_bearer([at_limit + "A"], max_bytes=100)


@pytest.mark.parametrize(
    "credential",
    ["tok en", "tok,en", 'tok"en', "tok=en", "=token", "tök", "tok\ten", "a;b"],
)
def test_a_credential_outside_the_b64token_grammar_is_a_bad_request(credential: str) -> None:
    with pytest.raises(BadCredential) as caught:
        read_bearer([f"Bearer {credential}"])
    assert not caught.value.missing
    assert credential not in caught.value.message


def test_a_token_in_the_query_is_found_however_it_is_encoded() -> None:
    assert token_in_query(b"access_token=abc")
    assert token_in_query(b"a=1&access_token=abc&b=2")
    assert token_in_query(b"access_token")  # no value: still the parameter
    assert token_in_query(b"access%5Ftoken=abc")
    assert token_in_query(b"access%5ftoken=abc")
    assert token_in_query(b"%61ccess_token=abc")
    assert not token_in_query(b"")
    assert not token_in_query(b"token=abc&x_access_token=1")
    assert not token_in_query(b"q=access_token")  # a value, not the name
    assert not token_in_query(b"access_token2=abc")


# -- the challenge ---------------------------------------------------------------------------------


def test_a_challenge_names_its_parameters_in_a_stable_order() -> None:
    value = format_challenge(
        error=INSUFFICIENT_SCOPE,
        description="needs more",
        scope=["b", "a", "b"],
        resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
    )
    assert value == (
        'Bearer error="insufficient_scope", error_description="needs more", scope="a b", '
        'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"'
    )
    assert format_challenge() == "Bearer"
    assert format_challenge(realm="mcp") == 'Bearer realm="mcp"'


@pytest.mark.parametrize(
    "hostile",
    [
        'x", scope="admin", error="none',
        'back\\slash\\", resource_metadata="https://evil.example',
        "line\r\nSet-Cookie: a=b",
        "tab\tand\x00nul\x7fdel",
        "caf\u00e9 \u65e5\u672c \U0001f600",
    ],
)
def test_a_hostile_description_cannot_add_or_change_a_parameter(hostile: str) -> None:
    value = format_challenge(
        error=INVALID_TOKEN,
        description=hostile,
        scope=["mcp:tools"],
        resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource",
    )
    # One header line of printable ASCII, which every server can send.
    assert value.isascii() and value.isprintable()
    [challenge] = parse_www_authenticate([value])
    assert challenge.scheme == "bearer"
    assert set(challenge.params) == {"error", "error_description", "scope", "resource_metadata"}
    assert challenge.error == "invalid_token"
    assert challenge.scope == "mcp:tools"
    assert challenge.resource_metadata == (
        "https://mcp.example.com/.well-known/oauth-protected-resource"
    )
    # RFC 6750 §3: the description holds neither a quote nor a backslash.
    described = challenge.params["error_description"]
    assert '"' not in described and "\\" not in described
    assert "\r" not in described and "\n" not in described


def test_a_description_keeps_its_readable_text() -> None:
    [challenge] = parse_www_authenticate(
        [format_challenge(error=INVALID_TOKEN, description='the "kid" is unknown; C:\\keys')]
    )
    assert challenge.params["error_description"] == "the 'kid' is unknown; C:/keys"
    [accented] = parse_www_authenticate([format_challenge(description="caf\u00e9\nnext")])
    assert accented.params["error_description"] == "caf?next"


def test_a_long_description_is_cut() -> None:
    value = format_challenge(error=INVALID_TOKEN, description="x" * 10_000)
    [challenge] = parse_www_authenticate([value])
    described = challenge.params["error_description"]
    assert len(described) == MAX_DESCRIPTION
    assert described.endswith("...")


# -- the metadata ----------------------------------------------------------------------------------


def test_the_well_known_paths_are_path_based_then_root() -> None:
    root = "/.well-known/oauth-protected-resource"
    assert metadata_paths("/mcp") == (root + "/mcp", root)
    assert metadata_paths("/api/v1/mcp/") == (root + "/api/v1/mcp", root)
    assert metadata_paths("") == (root, root)
    assert metadata_paths("/") == (root, root)


def test_the_metadata_document() -> None:
    document = resource_metadata(
        "https://mcp.example.com/mcp",
        authorization_servers=["https://auth.example.com"],
        scopes_supported=["mcp:tools", "offline_access", "mcp:admin"],
        resource_name="Example",
        resource_documentation="https://mcp.example.com/docs",
    )
    assert document == {
        "resource": "https://mcp.example.com/mcp",
        "authorization_servers": ["https://auth.example.com"],
        # offline_access is the authorization server's, never this resource's.
        "scopes_supported": ["mcp:tools", "mcp:admin"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Example",
        "resource_documentation": "https://mcp.example.com/docs",
    }


def test_the_metadata_document_leaves_out_what_is_not_given() -> None:
    document = resource_metadata("https://mcp.example.com/mcp", extra={"resource": "ignored"})
    assert document == {
        "resource": "https://mcp.example.com/mcp",
        "bearer_methods_supported": ["header"],
    }
