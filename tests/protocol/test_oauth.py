"""The sans-IO half of the OAuth client: challenges, well-known URLs, metadata validation, the
URL rules against SSRF, PKCE, scopes and the redirect checks. No event loop, no network."""

from __future__ import annotations

from typing import Any

import pytest

from trio_mcp.protocol._oauth import (
    OAuthInvalid,
    as_metadata_urls,
    authorization_url,
    bearer_challenge,
    canonical_resource,
    check_url,
    choose_scope,
    parse_redirect,
    parse_resource_metadata,
    parse_server_metadata,
    parse_www_authenticate,
    pkce_challenge,
    pkce_verifier,
    prm_urls,
    resource_matches,
    scope_union,
)

REMOTE = "https://mcp.example.com/mcp"
LOCAL = "http://127.0.0.1:8000/mcp"
ISSUER = "https://auth.example.com"


def metadata(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "issuer": ISSUER,
        "authorization_endpoint": f"{ISSUER}/authorize",
        "token_endpoint": f"{ISSUER}/token",
        "registration_endpoint": f"{ISSUER}/register",
        "code_challenge_methods_supported": ["S256"],
    }
    body.update(overrides)
    return {k: v for k, v in body.items() if v is not None}


# -- WWW-Authenticate ------------------------------------------------------------------------------


def test_a_challenge_gives_its_parameters_quoted_or_not_with_escapes_undone() -> None:
    [challenge] = parse_www_authenticate(
        [
            'Bearer error="insufficient_scope", scope="a b", '
            'resource_metadata="https://x/.well-known/oauth-protected-resource", '
            r'error_description="say \"please\"", realm=mcp'
        ]
    )
    assert challenge.scheme == "bearer"
    assert challenge.error == "insufficient_scope"
    assert challenge.scope == "a b"
    assert challenge.resource_metadata == "https://x/.well-known/oauth-protected-resource"
    assert challenge.params["error_description"] == 'say "please"'
    assert challenge.params["realm"] == "mcp"


def test_the_bearer_challenge_is_found_among_others_and_across_header_values() -> None:
    negotiate, bearer = parse_www_authenticate(["Negotiate a1B2==, Bearer scope=x"])
    assert (negotiate.scheme, bearer.scheme, bearer.scope) == ("negotiate", "bearer", "x")
    values = ['Basic realm="x"', 'Bearer scope="mcp:read"']
    assert bearer_challenge(values) is not None
    assert bearer_challenge(values).scope == "mcp:read"  # type: ignore[union-attr]
    assert bearer_challenge(['Basic realm="x"']) is None


@pytest.mark.parametrize("value", ["", "   ", '"', "Bearer =", 'Bearer a="unterminated', "\x00"])
def test_an_unreadable_challenge_yields_nothing_more_and_never_raises(value: str) -> None:
    for challenge in parse_www_authenticate([value]):
        assert challenge.scope is None


def test_a_huge_challenge_is_bounded() -> None:
    challenges = parse_www_authenticate(["Bearer a=b, " * 100_000])
    assert len(challenges) <= 100
    assert all(len(c.params) < 100_000 for c in challenges)


# -- well-known URLs -------------------------------------------------------------------------------


def test_prm_urls_go_header_first_then_path_based_then_root() -> None:
    header = "https://mcp.example.com/custom/prm.json"
    assert prm_urls(REMOTE, header) == [
        header,
        "https://mcp.example.com/.well-known/oauth-protected-resource/mcp",
        "https://mcp.example.com/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("https://mcp.example.com", None) == [
        "https://mcp.example.com/.well-known/oauth-protected-resource"
    ]


@pytest.mark.parametrize(
    "header",
    [
        "https://elsewhere.example.com/.well-known/oauth-protected-resource",  # another origin
        "http://mcp.example.com/.well-known/oauth-protected-resource",  # http, not loopback
        "http://127.0.0.1/.well-known/oauth-protected-resource",  # this machine
        "file:///etc/passwd",
    ],
)
def test_a_resource_metadata_url_elsewhere_is_refused(header: str) -> None:
    with pytest.raises(OAuthInvalid) as caught:
        prm_urls(REMOTE, header)
    assert caught.value.step == "discovery"


def test_authorization_server_metadata_urls_in_the_spec_order() -> None:
    assert as_metadata_urls("https://auth.example.com/tenant1") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert as_metadata_urls("https://auth.example.com") == [
        "https://auth.example.com/.well-known/oauth-authorization-server",
        "https://auth.example.com/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(
    ("url", "server", "ok"),
    [
        ("https://auth.example.com/token", REMOTE, True),
        ("http://auth.example.com/token", REMOTE, False),
        ("http://127.0.0.1:9000/token", REMOTE, False),
        ("https://localhost/token", REMOTE, False),
        ("http://127.0.0.1:9000/token", LOCAL, True),
        ("http://localhost:9000/token", LOCAL, True),
        ("http://[::1]:9000/token", LOCAL, True),
        ("https://user:pw@auth.example.com/token", REMOTE, False),
        ("https://auth.example.com/token#x", REMOTE, False),
        ("https://auth.example.com:99999/token", REMOTE, False),
        ("javascript:alert(1)", REMOTE, False),
        ("", REMOTE, False),
        (42, REMOTE, False),
    ],
)
def test_the_url_rules(url: Any, server: str, ok: bool) -> None:
    if ok:
        assert check_url(url, step="metadata", what="x", server_url=server) == url
    else:
        with pytest.raises(OAuthInvalid):
            check_url(url, step="metadata", what="x", server_url=server)


def test_an_error_message_shows_no_query_and_no_credentials() -> None:
    with pytest.raises(OAuthInvalid) as caught:
        check_url(
            "http://evil.example.com/t?secret=abc", step="metadata", what="x", server_url=REMOTE
        )
    assert "secret" not in str(caught.value) and "abc" not in str(caught.value)


# -- documents -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "server", "ok"),
    [
        ("https://mcp.example.com/mcp", REMOTE, True),
        ("https://MCP.example.com:443/mcp", REMOTE, True),
        ("https://mcp.example.com", REMOTE, True),  # the root form
        ("https://mcp.example.com/", REMOTE, True),
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp/v2", True),
        ("https://mcp.example.com/mc", REMOTE, False),  # not at a segment boundary
        ("https://mcp.example.com/mcp2", REMOTE, False),
        ("https://mcp.example.com/other", REMOTE, False),
        ("https://evil.example.com/mcp", REMOTE, False),
        ("http://mcp.example.com/mcp", REMOTE, False),
        ("https://mcp.example.com:8443/mcp", REMOTE, False),
    ],
)
def test_which_prm_resource_names_the_server(resource: str, server: str, ok: bool) -> None:
    assert resource_matches(resource, server) is ok


def test_prm_validation() -> None:
    good = {"resource": REMOTE, "authorization_servers": [ISSUER], "scopes_supported": ["a"]}
    parsed = parse_resource_metadata(good, server_url=REMOTE)
    assert parsed.resource == REMOTE and parsed.authorization_servers == (ISSUER,)
    assert parsed.scopes_supported == ("a",)
    bad: list[Any] = [
        [],
        {"resource": REMOTE},
        {"resource": REMOTE, "authorization_servers": []},
        {"resource": REMOTE, "authorization_servers": "https://auth.example.com"},
        {"resource": REMOTE, "authorization_servers": [1]},
        {"resource": REMOTE, "authorization_servers": ["http://auth.example.com"]},
        {"resource": REMOTE, "authorization_servers": [ISSUER] * 1000},
        {"resource": REMOTE, "authorization_servers": [ISSUER], "scopes_supported": "a b"},
        {"resource": 7, "authorization_servers": [ISSUER]},
    ]
    for body in bad:
        with pytest.raises(OAuthInvalid) as caught:
            parse_resource_metadata(body, server_url=REMOTE)
        assert caught.value.step == "discovery"
    with pytest.raises(OAuthInvalid) as caught:
        parse_resource_metadata(
            {"resource": "https://evil.example.com/mcp", "authorization_servers": [ISSUER]},
            server_url=REMOTE,
        )
    assert caught.value.error == "resource_mismatch"


def test_the_metadata_issuer_must_be_the_exact_string() -> None:
    parsed = parse_server_metadata(metadata(), issuer=ISSUER, server_url=REMOTE)
    assert parsed.token_endpoint == f"{ISSUER}/token"
    for other in (ISSUER + "/", "https://AUTH.example.com", "https://attacker.example.com"):
        with pytest.raises(OAuthInvalid) as caught:
            parse_server_metadata(metadata(issuer=other), issuer=ISSUER, server_url=REMOTE)
        assert caught.value.step == "metadata"


@pytest.mark.parametrize("methods", [None, [], ["plain"], "S256"])
def test_no_s256_means_no_authorization(methods: Any) -> None:
    oidc = metadata(code_challenge_methods_supported=methods, jwks_uri=f"{ISSUER}/jwks")
    with pytest.raises(OAuthInvalid, match=r"PKCE|code_challenge_methods_supported"):
        parse_server_metadata(oidc, issuer=ISSUER, server_url=REMOTE)


@pytest.mark.parametrize(
    "overrides",
    [
        {"token_endpoint": "http://auth.example.com/token"},
        {"token_endpoint": "http://169.254.169.254/latest"},
        {"authorization_endpoint": "https://127.0.0.1/authorize"},
        {"registration_endpoint": "http://10.0.0.1/register"},
        {"token_endpoint": None},
        {"token_endpoint": ["https://auth.example.com/token"]},
        {"scopes_supported": {"a": 1}},
    ],
)
def test_hostile_or_malformed_metadata_is_refused(overrides: dict[str, Any]) -> None:
    with pytest.raises(OAuthInvalid) as caught:
        parse_server_metadata(metadata(**overrides), issuer=ISSUER, server_url=REMOTE)
    assert caught.value.step == "metadata"


def test_a_grant_without_a_browser_needs_no_authorization_endpoint_and_no_pkce() -> None:
    bare = metadata(authorization_endpoint=None, code_challenge_methods_supported=None)
    parsed = parse_server_metadata(bare, issuer=ISSUER, server_url=REMOTE, authorization_code=False)
    assert parsed.authorization_endpoint == "" and parsed.token_endpoint == f"{ISSUER}/token"
    with pytest.raises(OAuthInvalid):
        parse_server_metadata(bare, issuer=ISSUER, server_url=REMOTE)


def test_endpoints_on_another_https_origin_are_allowed() -> None:
    parsed = parse_server_metadata(
        metadata(token_endpoint="https://tokens.example.net/token"),
        issuer=ISSUER,
        server_url=REMOTE,
    )
    assert parsed.token_endpoint == "https://tokens.example.net/token"


# -- PKCE, scopes, resource ------------------------------------------------------------------------


def test_pkce_s256_matches_rfc_7636_appendix_b() -> None:
    verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    assert pkce_challenge(verifier) == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    fresh = pkce_verifier()
    assert 43 <= len(fresh) <= 128 and fresh != pkce_verifier()


def test_the_canonical_resource() -> None:
    assert canonical_resource("HTTPS://MCP.Example.com:443/mcp#frag") == REMOTE
    assert canonical_resource("https://mcp.example.com/") == "https://mcp.example.com"
    assert canonical_resource("http://127.0.0.1:8000/mcp") == LOCAL
    assert canonical_resource("https://mcp.example.com/mcp/") == "https://mcp.example.com/mcp/"


def test_scope_choice() -> None:
    assert choose_scope("a", ["b", "c"], None) == "a"
    assert choose_scope(None, ["b", "c"], None) == "b c"
    assert choose_scope(None, None, None) is None
    assert choose_scope(None, None, ["x"]) is None
    assert choose_scope("a", None, ["a", "offline_access"]) == "a offline_access"
    assert choose_scope(None, None, ["offline_access"]) == "offline_access"
    assert choose_scope("a", None, ["a", "offline_access"], offline=False) == "a"
    assert scope_union("a b", "b c", None) == "a b c"
    assert scope_union(None, "") is None


def test_the_authorization_url_keeps_the_endpoint_query_and_omits_absent_values() -> None:
    url = authorization_url(
        "https://auth.example.com/authorize?tenant=t1", {"a": "1 2", "scope": None}
    )
    assert url == "https://auth.example.com/authorize?tenant=t1&a=1+2"


# -- the redirect ----------------------------------------------------------------------------------


def redirect(**query: str) -> str:
    from urllib.parse import urlencode

    return "http://127.0.0.1:5000/callback?" + urlencode(query)


def check(url: str, *, required: bool = False) -> str:
    return parse_redirect(url, state="s1", issuer=ISSUER, iss_required=required)


def test_a_good_redirect_gives_the_code() -> None:
    assert check(redirect(code="c", state="s1", iss=ISSUER), required=True) == "c"
    assert check(redirect(code="c", state="s1")) == "c"  # iss not advertised, not sent


@pytest.mark.parametrize(
    ("query", "required", "what"),
    [
        ({"code": "c", "state": "s2", "iss": ISSUER}, False, "state"),
        ({"code": "c", "iss": ISSUER}, False, "state"),
        ({"code": "c", "state": "s1"}, True, "no iss"),
        ({"code": "c", "state": "s1", "iss": "https://evil.example.com"}, True, "iss"),
        ({"code": "c", "state": "s1", "iss": "https://evil.example.com"}, False, "iss"),
        ({"code": "c", "state": "s1", "iss": ISSUER + "/"}, True, "iss"),
        ({"code": "c", "state": "s1", "iss": "https://AUTH.example.com"}, True, "iss"),
        ({"state": "s1", "iss": ISSUER}, False, "no authorization code"),
    ],
)
def test_a_bad_redirect_is_refused(query: dict[str, str], required: bool, what: str) -> None:
    with pytest.raises(OAuthInvalid, match=what) as caught:
        check(redirect(**query), required=required)
    assert caught.value.step == "authorization"


def test_an_error_redirect_is_believed_only_with_the_right_state_and_iss() -> None:
    with pytest.raises(OAuthInvalid) as caught:
        check(redirect(error="access_denied", state="s1", iss=ISSUER))
    assert caught.value.error == "access_denied"
    with pytest.raises(OAuthInvalid) as caught:
        check(redirect(error="access_denied", state="s1", iss="https://evil.example.com"))
    assert caught.value.error is None and "iss" in str(caught.value)


def test_a_repeated_parameter_is_refused() -> None:
    with pytest.raises(OAuthInvalid, match="more than once"):
        check("http://127.0.0.1/callback?code=a&code=b&state=s1")
