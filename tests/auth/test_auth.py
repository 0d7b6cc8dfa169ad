"""``Auth``, the server's authorization policy, and the pieces around it: principals, static
tokens, the scope hierarchy, the audience and expiry checks, reading a bearer credential, what
the metadata lists, and what scopes one request needs."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from trio_mcp import (
    Auth,
    InvalidToken,
    Principal,
    Server,
    StaticTokenVerifier,
    TokenVerifier,
    VerifierUnavailable,
)
from trio_mcp.protocol._bearer import BadCredential
from trio_mcp.server._principal import check_scopes, every_entry_scopes, needed_scopes

RESOURCE = "https://mcp.example.com/mcp"
ALICE = Principal("alice", "client-1", frozenset({"read"}), issuer="https://issuer.example")


def auth(**options: Any) -> Auth:
    return Auth(StaticTokenVerifier({"alice-token": ALICE}), RESOURCE, **options)


# -- principals and tokens -----------------------------------------------------------------------


def test_a_principals_identity_is_issuer_subject_and_client_and_nothing_else() -> None:
    assert ALICE.identity == '["https://issuer.example","alice","client-1"]'
    refreshed = Principal(
        "alice", "client-1", frozenset({"read", "write"}), issuer="https://issuer.example"
    )
    assert refreshed.identity == ALICE.identity  # scopes and expiry may change with a refresh
    others = [
        Principal("alice", "client-2", issuer="https://issuer.example"),
        Principal("alice", "client-1", issuer="https://other.example"),
        Principal("bob", "client-1", issuer="https://issuer.example"),
        # Each piece is quoted: no subject can pose as another issuer's, in the old form's
        # separator or in the new one's.
        Principal("issuer.example\x1falice", "client-1", issuer="https:/"),
        Principal('issuer.example","alice', "client-1", issuer="https:/"),
        # An absent piece is not an empty one.
        Principal("alice", "client-1", issuer=""),
    ]
    assert len({ALICE.identity, *(p.identity for p in others)}) == 7
    assert Principal(None).identity == "[null,null,null]"
    assert "claims" not in repr(Principal("a", claims={"secret": "x"}))


def test_identities_whose_pieces_hold_the_old_separator_stay_apart() -> None:
    """The measured collision: sub "alice<US>app" + client "web" was sub "alice" + client
    "app<US>web" under the U+001F-joined form."""
    first = Principal("alice\x1fapp", "web", issuer="https://issuer.example")
    second = Principal("alice", "app\x1fweb", issuer="https://issuer.example")
    assert "\x1f".join(("https://issuer.example", "alice\x1fapp", "web")) == "\x1f".join(
        ("https://issuer.example", "alice", "app\x1fweb")
    )
    assert first.identity != second.identity
    # No identity in the new form is one in the old (no raw control character survives).
    for principal in (first, second, ALICE, Principal(None), Principal("\ud800")):
        assert principal.identity.isascii() and principal.identity.isprintable()
        assert json.loads(principal.identity) == [
            principal.issuer,
            principal.subject,
            principal.client_id,
        ]


async def test_static_tokens_verify_to_their_principal_and_never_quote_a_token() -> None:
    verifier = StaticTokenVerifier(
        {"alice-token": Principal("alice", audience=("https://elsewhere.example",))}
    )
    assert isinstance(verifier, TokenVerifier)
    found = await verifier.verify("alice-token")
    assert found.subject == "alice"
    assert found.audience is None  # this server's own tokens: no audience to check
    with pytest.raises(InvalidToken) as caught:
        await verifier.verify("mallory-token")
    assert caught.value.description == "unknown access token"
    assert "mallory-token" not in str(caught.value)


# -- the scope hierarchy ------------------------------------------------------------------------


def test_granted_follows_implied_scopes_transitively_and_survives_cycles() -> None:
    policy = auth(
        implied_scopes={"admin": ["write"], "write": "read list", "list": ["admin"]},
    )
    assert policy.granted(Principal("a", scopes=frozenset({"admin"}))) == {
        "admin",
        "write",
        "read",
        "list",
    }
    assert policy.granted(Principal("a", scopes=frozenset({"read"}))) == {"read"}
    assert policy.granted(Principal("a")) == frozenset()


def test_implied_scopes_given_as_a_string_are_split_not_spelled() -> None:
    policy = auth(implied_scopes={"mcp:admin": "mcp:tools mcp:read"})
    assert policy.implied_scopes == {"mcp:admin": {"mcp:tools", "mcp:read"}}
    assert policy.granted(Principal("a", scopes=frozenset({"mcp:admin"}))) == {
        "mcp:admin",
        "mcp:tools",
        "mcp:read",
    }


def test_missing_names_what_the_principal_lacks_counting_the_hierarchy() -> None:
    policy = auth(implied_scopes={"admin": ["read"]})
    admin = Principal("a", scopes=frozenset({"admin"}))
    assert policy.missing(admin, {"read"}) == frozenset()
    assert policy.missing(admin, ["read", "write", "admin"]) == {"write"}
    assert policy.missing(ALICE, {"read", "admin"}) == {"admin"}
    assert policy.missing(ALICE, ()) == frozenset()
    # No principal at all holds nothing.
    assert policy.missing(None, {"read", "write"}) == {"read", "write"}


# -- audience and expiry ------------------------------------------------------------------------


def test_accept_takes_a_token_issued_for_this_resource_in_any_canonical_spelling() -> None:
    policy = auth()
    for audience in [
        (RESOURCE,),
        ("HTTPS://MCP.example.com:443/mcp",),
        ("https://other.example", RESOURCE),
    ]:
        principal = Principal("a", audience=audience)
        assert policy.accept(principal) is principal
    assert policy.accept(Principal("a", audience=None)).subject == "a"


def test_accept_refuses_a_token_for_another_resource() -> None:
    policy = auth()
    for audience in [
        ("https://mcp.example.com/other",),
        ("https://evil.example/mcp",),
        ("not a url:99999999",),
        (),
    ]:
        with pytest.raises(InvalidToken, match="issued for another resource"):
            policy.accept(Principal("a", audience=audience))


def test_turning_the_audience_check_off_accepts_any_audience_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="trio_mcp.auth"):
        auth()
    assert caplog.records == []
    with caplog.at_level(logging.WARNING, logger="trio_mcp.auth"):
        policy = auth(check_audience=False)
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert RESOURCE in record.getMessage()
    assert "NOT checked" in record.getMessage()
    assert policy.accept(Principal("a", audience=("https://evil.example",))).subject == "a"


def test_accept_refuses_an_expired_token_by_the_policys_clock() -> None:
    now = [1000.0]
    policy = auth(clock=lambda: now[0])
    principal = Principal("a", expires_at=1000.5)
    assert policy.accept(principal) is principal
    now[0] = 1000.5
    with pytest.raises(InvalidToken, match="expired"):
        policy.accept(principal)
    assert policy.accept(Principal("a", expires_at=None)).subject == "a"


# -- authenticate ---------------------------------------------------------------------------------


async def test_authenticate_reads_verifies_and_accepts_the_authorization_header() -> None:
    now = [0.0]
    tokens = {
        "alice-token": ALICE,
        "late-token": Principal("late", expires_at=10.0),
    }
    policy = Auth(StaticTokenVerifier(tokens), RESOURCE, clock=lambda: now[0])
    assert await policy.authenticate(["Bearer alice-token"]) == ALICE
    assert await policy.authenticate(["bearer   alice-token "]) == ALICE
    assert (await policy.authenticate(["Bearer late-token"])).subject == "late"
    now[0] = 10.0
    with pytest.raises(InvalidToken, match="expired"):
        await policy.authenticate(["Bearer late-token"])
    with pytest.raises(InvalidToken, match="unknown"):
        await policy.authenticate(["Bearer mallory-token"])


@pytest.mark.parametrize(
    ("values", "missing"),
    [
        ([], True),
        (["Basic YWxpY2U6cHc="], True),
        (["Bearer alice-token", "Bearer alice-token"], False),
        (["Bearer " + "a" * 9000], False),
        (["Bearer alice token"], False),
    ],
)
async def test_authenticate_refuses_a_header_that_is_not_one_bearer_token(
    values: list[str], missing: bool
) -> None:
    with pytest.raises(BadCredential) as caught:
        await auth().authenticate(values)
    assert caught.value.missing is missing
    assert "alice" not in str(caught.value)


async def test_authenticate_bounds_the_header_by_the_policy() -> None:
    policy = auth(max_header_bytes=16)
    with pytest.raises(BadCredential, match="over the limit of 16 bytes"):
        await policy.authenticate(["Bearer alice-token"])


async def test_a_verifier_that_cannot_check_now_says_so_through_authenticate() -> None:
    class Down:
        async def verify(self, token: str) -> Principal:
            raise VerifierUnavailable("the authorization server is unreachable")

    with pytest.raises(VerifierUnavailable):
        await Auth(Down(), RESOURCE).authenticate(["Bearer x"])


# -- scopes: validation and what the metadata lists ---------------------------------------------


def test_check_scopes_splits_a_string_and_refuses_what_is_not_a_scope() -> None:
    assert check_scopes(None) == frozenset()
    assert check_scopes("") == frozenset()
    assert check_scopes("a  b\tc") == {"a", "b", "c"}
    assert check_scopes(["mcp:tools", "mcp:tools", "https://x.example/scope"]) == {
        "mcp:tools",
        "https://x.example/scope",
    }
    for bad in [[""], ['a"b'], ["a\\b"], ["a b"], ["new\nline"], ["é\x00"]]:
        with pytest.raises(ValueError, match="is not a scope"):
            check_scopes(bad, "what")
    with pytest.raises(TypeError, match="a scope is a string"):
        check_scopes([b"bytes"], "what")  # type: ignore[list-item]


def test_the_policy_validates_its_own_scopes() -> None:
    assert auth(required_scopes="mcp:use mcp:tools").required_scopes == {"mcp:use", "mcp:tools"}
    with pytest.raises(ValueError, match="required_scopes"):
        auth(required_scopes=['bad"scope'])
    with pytest.raises(ValueError, match="implied_scopes"):
        auth(implied_scopes={"bad scope": ["x"]})
    with pytest.raises(ValueError, match="implied_scopes"):
        auth(implied_scopes={"admin": ['bad"']})
    with pytest.raises(ValueError, match="scopes_supported"):
        auth(scopes_supported=["ok", ""])


def test_supported_lists_the_given_scopes_in_order_else_every_scope_used_sorted() -> None:
    assert auth(scopes_supported="b a b").supported([frozenset({"z"})]) == ["b", "a"]
    assert auth(scopes_supported=[]).supported([frozenset({"z"})]) == []
    policy = auth(required_scopes="mcp:use")
    assert policy.supported([frozenset({"b", "a"}), frozenset(), frozenset({"a"})]) == [
        "a",
        "b",
        "mcp:use",
    ]


# -- what one request needs -----------------------------------------------------------------------


def scoped() -> Server:
    server = Server("scoped")

    @server.tool(scopes="t")
    def tool() -> str:
        return ""

    @server.tool()
    def free() -> str:
        return ""

    @server.prompt(scopes="p")
    def prompt() -> str:
        return ""

    @server.resource("file:///r", scopes="r")
    def resource() -> str:
        return ""

    # Registered first, and matches the other template's URI template taken as a URI.
    @server.resource("file:///docs/{+rest}")
    def anything(rest: str) -> str:
        return ""

    @server.resource("file:///docs/{name}", scopes="d")
    def doc(name: str) -> str:
        return ""

    return server


@pytest.mark.parametrize(
    ("method", "params", "needed"),
    [
        ("tools/call", {"name": "tool"}, {"t"}),
        ("tools/call", {"name": "free"}, set()),
        ("tools/call", {"name": "unknown"}, set()),
        ("tools/call", {"name": 5}, set()),
        ("tools/list", {}, set()),
        ("prompts/get", {"name": "prompt"}, {"p"}),
        ("resources/read", {"uri": "file:///r"}, {"r"}),
        ("resources/subscribe", {"uri": "file:///r"}, {"r"}),
        ("resources/unsubscribe", {"uri": "file:///r"}, set()),
        # The first template that matches, as resources/read picks it.
        ("resources/read", {"uri": "file:///docs/x/y"}, set()),
        ("resources/read", {"uri": None}, set()),
        (
            "completion/complete",
            {"ref": {"type": "ref/prompt", "name": "prompt"}, "argument": {}},
            {"p"},
        ),
        (
            "completion/complete",
            {"ref": {"type": "ref/resource", "uri": "file:///docs/{name}"}, "argument": {}},
            {"d"},
        ),
        (
            "completion/complete",
            {"ref": {"type": "ref/resource", "uri": "file:///r"}, "argument": {}},
            {"r"},
        ),
        ("completion/complete", {"ref": "prompt"}, set()),
    ],
)
def test_needed_scopes_are_the_scopes_of_the_entry_a_request_reaches(
    method: str, params: dict[str, Any], needed: set[str]
) -> None:
    assert needed_scopes(scoped(), method, params) == needed


def test_every_entry_scopes_covers_tools_prompts_resources_and_templates() -> None:
    found = every_entry_scopes(scoped())
    assert sorted(sorted(s) for s in found) == [[], [], ["d"], ["p"], ["r"], ["t"]]
    assert needed_scopes(scoped(), "tools/call", None) == frozenset()
