"""JWTVerifier against real keys: oidc-provider's tokens and JWKS, and an issuer of the test's
own (a real hypercorn serving its metadata and key set) for the header and claim rules that
oidc-provider never breaks.

Clocks are the verifier's own (``clock=``), moved by the tests: the provider signs with the
real time, the verifier is told another. JWKS fetches are counted on the wire, through an
event hook of the real httpx client the verifier is given, or at the test's own issuer.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx
import orjson
import pytest
import trio
from joserfc import jws
from joserfc.jwk import ECKey, KeySet, RSAKey

from trio_mcp import Auth, InvalidToken, JWTVerifier, Principal, VerifierUnavailable

from .._http import serving_app
from .._ports import free_port
from ._oidc import BOB, USERNAME, OidcProvider, oidc_provider
from ._tokens import (
    Clock,
    b64,
    claims_of,
    counting_client,
    header_of,
    hmac_signed,
    with_header,
)

#: A hang guard for each test, never a performance assertion.
GUARD = 60
#: Resource indicators only: nothing is served there.
RESOURCE = "http://127.0.0.1:8001/mcp"
OTHER_RESOURCE = "http://127.0.0.1:8002/mcp"


@pytest.fixture
async def op() -> AsyncIterator[OidcProvider]:
    async with oidc_provider() as provider:
        yield provider


async def refused(verifier: JWTVerifier, token: str) -> str:
    with pytest.raises(InvalidToken) as caught:
        await verifier.verify(token)
    assert token not in str(caught.value)
    return caught.value.description


def no_token_logged(caplog: pytest.LogCaptureFixture, *tokens: str) -> None:
    for token in tokens:
        for part in token.split("."):
            if len(part) > 16:
                assert part not in caplog.text


# -- real tokens from oidc-provider ---------------------------------------------------------------


async def test_a_real_token_gives_its_principal(op: OidcProvider) -> None:
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE, "mcp:tools mcp:admin")
        bobs = await op.token(RESOURCE, "mcp:tools", user=BOB)
        verifier = JWTVerifier(op.issuer)
        principal = await verifier.verify(token)
        bob = await verifier.verify(bobs)
    claims = claims_of(token)
    assert header_of(token)["typ"] == "at+jwt"
    assert principal == Principal(
        subject=USERNAME,
        client_id=op.client_id,
        scopes=frozenset({"mcp:tools", "mcp:admin"}),
        claims=claims,
        issuer=op.issuer,
        expires_at=float(claims["exp"]),
        audience=(RESOURCE,),
    )
    assert principal.claims == claims
    assert (bob.subject, bob.scopes) == (BOB, frozenset({"mcp:tools"}))
    assert bob.identity != principal.identity
    assert Auth(verifier, resource=RESOURCE).accept(principal) is principal


async def test_the_keys_are_found_through_the_metadata_whose_issuer_must_match(
    op: OidcProvider,
) -> None:
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        async with counting_client() as (http, seen):
            assert (await JWTVerifier(op.issuer, http_client=http).verify(token)).subject
            assert seen == {"/.well-known/openid-configuration": 1, "/jwks": 1}
            # The same issuer written with a trailing slash is another issuer (RFC 8414 §3.3
            # compares exactly): the metadata names the one without, so no key is trusted.
            with pytest.raises(VerifierUnavailable, match="names another issuer"):
                await JWTVerifier(op.issuer + "/", http_client=http).verify(token)
            assert seen["/jwks"] == 1


async def test_key_rotation_one_refetch_for_the_new_key_and_the_old_key_still_verifies(
    op: OidcProvider,
) -> None:
    clock = Clock()
    with trio.fail_after(GUARD):
        old = await op.token(RESOURCE)
        async with counting_client() as (http, seen):
            verifier = JWTVerifier(op.issuer, http_client=http, clock=clock)
            assert (await verifier.verify(old)).subject == USERNAME
            assert seen["/jwks"] == 1

            kid = await op.rotate_keys()
            new = await op.token(RESOURCE)
            assert header_of(new)["kid"] == kid != header_of(old)["kid"]
            # Within the refresh interval of the last fetch, an unknown kid is not fetched for.
            assert "does not publish" in await refused(verifier, new)
            assert seen["/jwks"] == 1

            clock.advance(verifier.min_refresh_interval)
            assert (await verifier.verify(new)).subject == USERNAME
            assert seen["/jwks"] == 2
            # The old key is still published, so in the refetched set: no fetch for it.
            assert (await verifier.verify(old)).subject == USERNAME
            assert (await verifier.verify(new)).subject == USERNAME
            assert seen["/jwks"] == 2


async def test_the_key_set_is_fetched_again_after_its_ttl(op: OidcProvider) -> None:
    clock = Clock()
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        async with counting_client() as (http, seen):
            verifier = JWTVerifier(op.issuer, http_client=http, clock=clock, cache_ttl=100)
            await verifier.verify(token)
            clock.advance(99)
            await verifier.verify(token)
            assert seen["/jwks"] == 1
            clock.advance(1)
            await verifier.verify(token)
            assert seen["/jwks"] == 2


async def test_an_expired_token_is_refused_past_the_leeway(op: OidcProvider) -> None:
    clock = Clock()
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        verifier = JWTVerifier(op.issuer, clock=clock, leeway=30)
        expires = claims_of(token)["exp"]
        clock.now = expires + 29
        assert (await verifier.verify(token)).expires_at == expires
        clock.now = expires + 30
        assert await refused(verifier, token) == "the access token expired"


async def test_a_token_not_valid_yet_is_refused_past_the_leeway(op: OidcProvider) -> None:
    clock = Clock()
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        verifier = JWTVerifier(op.issuer, clock=clock, leeway=30)
        issued = claims_of(token)["iat"]
        clock.now = issued - 30
        assert (await verifier.verify(token)).subject == USERNAME
        clock.now = issued - 31
        assert "was issued in the future" in await refused(verifier, token)


async def test_a_token_of_another_issuer_is_refused_though_its_signature_is_good() -> None:
    with trio.fail_after(GUARD):
        async with oidc_provider() as a, oidc_provider() as b:
            token = await b.token(RESOURCE)
            # A's name, B's keys: the signature verifies, the issuer does not match.
            crossed = JWTVerifier(a.issuer, jwks_uri=b.jwks_uri)
            assert "issued by another authorization server" in await refused(crossed, token)
            # A's name and keys: B's key has the same kid as A's, and does not verify.
            assert "signature does not verify" in await refused(JWTVerifier(a.issuer), token)
            assert (await JWTVerifier(b.issuer).verify(token)).issuer == b.issuer


async def test_alg_none_is_refused_before_any_key_is_fetched(op: OidcProvider) -> None:
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        async with counting_client() as (http, seen):
            verifier = JWTVerifier(op.issuer, http_client=http)
            unsigned = with_header(token, alg="none").rsplit(".", 1)[0] + "."
            assert await refused(verifier, unsigned) == "the access token is not signed (alg none)"
            signed = with_header(token, alg="none")
            assert await refused(verifier, signed) == "the access token is not signed (alg none)"
            for alg in ("None", "NONE", ""):
                unsigned = with_header(token, alg=alg).rsplit(".", 1)[0] + "."
                assert "algorithm this server does not accept" in await refused(verifier, unsigned)
            assert not seen
    with pytest.raises(ValueError, match="never accepted"):
        JWTVerifier(op.issuer, algorithms=("ES256", "none"))


async def test_hmac_signed_with_the_public_key_is_refused(op: OidcProvider) -> None:
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        async with httpx.AsyncClient() as http:
            published = (await http.get(op.jwks_uri)).json()
        keys = KeySet.import_key_set(published)
        secrets_tried: list[bytes] = []
        for key in keys.keys:
            assert isinstance(key, ECKey | RSAKey)
            secrets_tried.append(key.as_pem(private=False))
            secrets_tried.append(json.dumps(key.as_dict(private=False)).encode())
        async with counting_client() as (http, seen):
            verifier = JWTVerifier(op.issuer, http_client=http)
            for secret in secrets_tried:
                for alg in ("HS256", "HS384"):
                    forged = hmac_signed(token, secret, alg)
                    assert "algorithm this server does not accept" in await refused(
                        verifier, forged
                    )
            assert not seen
    for alg in ("HS256", "HS384", "HS512"):
        with pytest.raises(ValueError, match="never accepted"):
            JWTVerifier(op.issuer, algorithms=(alg,))


async def test_an_unknown_kid_flood_costs_one_fetch_per_interval(op: OidcProvider) -> None:
    clock = Clock()
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        async with counting_client() as (http, seen):
            verifier = JWTVerifier(op.issuer, http_client=http, clock=clock)
            await verifier.verify(token)
            assert seen["/jwks"] == 1

            async def flood(count: int = 50) -> list[str]:
                descriptions: list[str] = []

                async def one() -> None:
                    descriptions.append(
                        await refused(verifier, with_header(token, kid=secrets.token_hex(8)))
                    )

                async with trio.open_nursery() as nursery:
                    for _ in range(count):
                        nursery.start_soon(one)
                return descriptions

            # Past the interval: the first unknown kid fetches, the 49 beside it share that fetch.
            clock.advance(verifier.min_refresh_interval)
            assert set(await flood()) == {
                "the token is signed with a key the issuer does not publish"
            }
            assert seen["/jwks"] == 2
            # Within the interval: no fetch at all.
            clock.advance(verifier.min_refresh_interval / 2)
            await flood()
            assert seen["/jwks"] == 2
            clock.advance(verifier.min_refresh_interval / 2)
            await flood()
            assert seen["/jwks"] == 3
            assert (await verifier.verify(token)).subject == USERNAME
            assert seen["/jwks"] == 3
            assert seen["/.well-known/openid-configuration"] == 1


async def test_unreachable_or_broken_keys_are_unavailable_never_invalid(
    op: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    closed = f"http://127.0.0.1:{free_port()}"
    with trio.fail_after(GUARD):
        token = await op.token(RESOURCE)
        cases = [
            (JWTVerifier(op.issuer, jwks_uri=closed + "/jwks"), "could not be fetched"),
            (JWTVerifier(closed), "could not be fetched"),
            (JWTVerifier(op.issuer, jwks_uri=op.issuer + "/no-such-keys"), "HTTP 404"),
            (JWTVerifier(op.issuer, jwks_uri=op.metadata_url), "not a JSON object with keys"),
            (JWTVerifier(op.issuer, jwks_uri=op.jwks_uri, max_response_bytes=64), "larger than"),
        ]
        for verifier, message in cases:
            with pytest.raises(VerifierUnavailable, match=message) as caught:
                await verifier.verify(token)
            assert token not in str(caught.value)
    no_token_logged(caplog, token)


async def test_a_token_for_another_resource_is_refused_by_the_audience_check(
    op: OidcProvider,
) -> None:
    with trio.fail_after(GUARD):
        ours = await op.token(RESOURCE)
        theirs = await op.token(OTHER_RESOURCE)
        auth = Auth(JWTVerifier(op.issuer), resource=RESOURCE)
        assert (await auth.authenticate([f"Bearer {ours}"])).audience == (RESOURCE,)
        # The verifier vouches for the signature; the audience is the policy's to check.
        assert (await auth.verifier.verify(theirs)).audience == (OTHER_RESOURCE,)
        with pytest.raises(InvalidToken, match="issued for another resource"):
            await auth.authenticate([f"Bearer {theirs}"])


async def test_an_opaque_token_is_not_a_jwt() -> None:
    with trio.fail_after(GUARD):
        async with oidc_provider(access_token_format="opaque") as op:
            token = await op.token(RESOURCE)
            assert await refused(JWTVerifier(op.issuer), token) == "the access token is not a JWT"


# -- tokens of the test's own issuer ---------------------------------------------------------------


@attrs.define
class OwnIssuer:
    """An issuer of the test's own: its metadata and key set served by a real hypercorn, the
    private keys kept here to sign whatever the test needs."""

    url: str = ""
    keys: list[ECKey] = attrs.Factory(list)
    #: Requests seen, by path.
    seen: Counter[str] = attrs.Factory(Counter)
    #: While set, the key set answers 500.
    broken: bool = False

    def sign(
        self,
        claims: dict[str, Any] | None = None,
        *,
        header: dict[str, Any] | None = None,
        key: ECKey | None = None,
        **changes: Any,
    ) -> str:
        key = key or self.keys[0]
        now = int(time.time())
        base = {
            "iss": self.url,
            "sub": "carol",
            "client_id": "own-client",
            "aud": RESOURCE,
            "scope": "mcp:tools",
            "iat": now,
            "exp": now + 300,
        }
        claims = {**base, **(claims or {}), **changes}
        claims = {name: value for name, value in claims.items() if value is not None}
        full = {"alg": "ES256", "typ": "at+jwt", "kid": key.kid, **(header or {})}
        full = {name: value for name, value in full.items() if value is not None}
        # Signed by hand: joserfc's encoder would refuse the headers some tests need (crit).
        signing_input = f"{b64(orjson.dumps(full))}.{b64(orjson.dumps(claims))}"
        signature = jws.JWSRegistry.algorithms["ES256"].sign(signing_input.encode(), key)
        return f"{signing_input}.{b64(signature)}"

    async def app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                event = await receive()
                if event["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        path = scope["path"]
        self.seen[path] += 1
        body: Any = {"error": "not found"}
        status = 404
        if path == "/.well-known/openid-configuration":
            status, body = 200, {"issuer": self.url, "jwks_uri": self.url + "/jwks"}
        elif path == "/jwks" and not self.broken:
            status, body = 200, {"keys": [key.as_dict(private=False) for key in self.keys]}
        elif path == "/jwks":
            status, body = 500, {"error": "broken"}
        data = orjson.dumps(body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": data})


def ec_key(kid: str) -> ECKey:
    return ECKey.generate_key("P-256", parameters={"kid": kid, "alg": "ES256", "use": "sig"})


@asynccontextmanager
async def own_issuer() -> AsyncIterator[OwnIssuer]:
    issuer = OwnIssuer(keys=[ec_key("own-1")])
    async with serving_app(issuer.app) as url:
        issuer.url = url.removesuffix("/mcp")
        yield issuer


@pytest.fixture
async def own() -> AsyncIterator[OwnIssuer]:
    async with own_issuer() as issuer:
        yield issuer


REFUSED: dict[str, tuple[Callable[[OwnIssuer], str], str]] = {
    "typ dpop+jwt": (
        lambda o: o.sign(header={"typ": "dpop+jwt"}),
        "the token is not an access token (its typ is not at+jwt)",
    ),
    "typ of an id token": (lambda o: o.sign(header={"typ": "id_token+jwt"}), "not an access token"),
    "crit": (
        lambda o: o.sign(header={"crit": ["exp"]}),
        "the token's header has critical extensions (crit) this server does not support",
    ),
    "no exp": (lambda o: o.sign(exp=None), "the access token has no expiry time (exp)"),
    "exp not a number": (lambda o: o.sign(exp="tomorrow"), "no expiry time (exp)"),
    "nbf in the future": (
        lambda o: o.sign(nbf=int(time.time()) + 120),
        "the access token is not valid yet (check this server's clock if that is wrong)",
    ),
    "nbf not a number": (
        lambda o: o.sign(nbf="soon"),
        "the access token's nbf claim is not a time",
    ),
    "iat in the future": (
        lambda o: o.sign(iat=int(time.time()) + 120),
        "the access token was issued in the future (check this server's clock if that is wrong)",
    ),
    "no subject, no client": (
        lambda o: o.sign(sub=None, client_id=None),
        "the access token names no subject (sub) and no client",
    ),
    "bound to a key": (lambda o: o.sign(cnf={"jkt": "abc"}), "bound to a key (cnf"),
    "iss with a trailing slash": (
        lambda o: o.sign(iss=o.url + "/"),
        "the access token was issued by another authorization server",
    ),
    "no iss": (lambda o: o.sign(iss=None), "issued by another authorization server"),
    "unknown kid": (
        lambda o: o.sign(header={"kid": "nobody"}, key=ec_key("nobody")),
        "the token is signed with a key the issuer does not publish",
    ),
    # The header carries the signer's own key and claims the issuer's kid: the key the header
    # offers is never read.
    "its own key in jwk": (
        lambda o: o.sign(header={"jwk": (k := ec_key("own-1")).as_dict(private=False)}, key=k),
        "the token's signature does not verify with the issuer's keys",
    ),
    "scope not a string": (
        lambda o: o.sign(scope=5),
        "the access token's scope claim is not a list of scopes",
    ),
    "aud not a string": (lambda o: o.sign(aud=5), "audience (aud) is not a resource"),
    "encrypted": (lambda o: "a.b.c.d.e", "the access token is encrypted (JWE)"),
    "garbage": (lambda o: "not-a-token", "the access token is not a JWT"),
    "garbage in three parts": (
        lambda o: "abc.def.ghi",
        "the access token is not a well-formed JWT",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
async def test_a_token_breaking_a_rule_is_refused_saying_why(own: OwnIssuer, case: str) -> None:
    make, message = REFUSED[case]
    token = make(own)
    with trio.fail_after(GUARD):
        description = await refused(JWTVerifier(own.url), token)
    assert message in description


async def test_a_jku_pointing_elsewhere_is_never_fetched(own: OwnIssuer) -> None:
    attacker = ec_key("attacker")
    token = own.sign(
        header={"jku": own.url + "/attacker-jwks", "x5u": own.url + "/attacker-cert"},
        key=attacker,
    )
    with trio.fail_after(GUARD):
        description = await refused(JWTVerifier(own.url), token)
    assert description == "the token is signed with a key the issuer does not publish"
    assert own.seen["/attacker-jwks"] == own.seen["/attacker-cert"] == 0
    assert own.seen["/jwks"] == 1


ACCEPTED: dict[str, tuple[Callable[[OwnIssuer], str], dict[str, Any]]] = {
    "typ JWT": (lambda o: o.sign(header={"typ": "JWT"}), {}),
    "typ application/at+jwt": (lambda o: o.sign(header={"typ": "application/at+jwt"}), {}),
    "no typ": (lambda o: o.sign(header={"typ": None}), {}),
    "no kid": (lambda o: o.sign(header={"kid": None}), {}),
    "scp list and azp": (
        lambda o: o.sign(scope=None, scp=["a", "b"], client_id=None, azp="the-azp"),
        {"scopes": frozenset({"a", "b"}), "client_id": "the-azp"},
    ),
    "aud list": (
        lambda o: o.sign(aud=[OTHER_RESOURCE, RESOURCE]),
        {"audience": (OTHER_RESOURCE, RESOURCE)},
    ),
    "no aud": (lambda o: o.sign(aud=None), {"audience": ()}),
    "a client, no subject": (
        lambda o: o.sign(sub=None),
        {"subject": None, "client_id": "own-client"},
    ),
    "no scope": (lambda o: o.sign(scope=None), {"scopes": frozenset()}),
    "other header parameters": (lambda o: o.sign(header={"x-vendor": "yes"}), {}),
}


@pytest.mark.parametrize("case", list(ACCEPTED))
async def test_a_token_within_the_rules_is_accepted(own: OwnIssuer, case: str) -> None:
    make, expected = ACCEPTED[case]
    with trio.fail_after(GUARD):
        principal = await JWTVerifier(own.url).verify(make(own))
    defaults = {
        "subject": "carol",
        "client_id": "own-client",
        "scopes": frozenset({"mcp:tools"}),
        "issuer": own.url,
        "audience": (RESOURCE,),
    }
    for name, value in (defaults | expected).items():
        assert getattr(principal, name) == value, name


async def test_an_audience_missing_is_refused_by_the_policy(own: OwnIssuer) -> None:
    auth = Auth(JWTVerifier(own.url), resource=RESOURCE)
    with trio.fail_after(GUARD):
        with pytest.raises(InvalidToken, match="issued for another resource"):
            await auth.authenticate([f"Bearer {own.sign(aud=None)}"])
        assert (await auth.authenticate([f"Bearer {own.sign()}"])).subject == "carol"


async def test_keys_unreachable_later_are_unavailable_for_a_new_kid_and_after_the_ttl(
    own: OwnIssuer,
) -> None:
    clock = Clock()
    verifier = JWTVerifier(own.url, clock=clock, cache_ttl=600)
    lasting = int(clock.now) + 3600
    known = own.sign(exp=lasting)
    with trio.fail_after(GUARD):
        await verifier.verify(known)
        own.broken = True
        own.keys.append(ec_key("own-2"))
        rotated = own.sign(key=own.keys[1], exp=lasting)
        clock.advance(verifier.min_refresh_interval)
        # The new kid may be a key the issuer published since: unknown, not invalid.
        with pytest.raises(VerifierUnavailable, match="HTTP 500"):
            await verifier.verify(rotated)
        assert own.seen["/jwks"] == 2
        # The cached keys still verify what they know, with no fetch.
        assert (await verifier.verify(known)).subject == "carol"
        # Within the interval, no fetch, and still unavailable, not invalid.
        with pytest.raises(VerifierUnavailable):
            await verifier.verify(rotated)
        assert own.seen["/jwks"] == 2
        clock.advance(600)
        with pytest.raises(VerifierUnavailable, match="HTTP 500"):
            await verifier.verify(known)
        own.broken = False
        assert (await verifier.verify(rotated)).subject == "carol"
        assert (await verifier.verify(known)).subject == "carol"


async def test_concurrent_verifications_share_one_fetch(own: OwnIssuer) -> None:
    verifier = JWTVerifier(own.url)
    tokens = [own.sign(sub=f"user-{n}") for n in range(20)]
    subjects: list[str | None] = []

    async def one(token: str) -> None:
        subjects.append((await verifier.verify(token)).subject)

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            for token in tokens:
                nursery.start_soon(one, token)
    assert sorted(subjects, key=str) == sorted((f"user-{n}" for n in range(20)), key=str)
    assert own.seen["/.well-known/openid-configuration"] == own.seen["/jwks"] == 1


def test_the_allow_list_takes_only_known_asymmetric_algorithms() -> None:
    with pytest.raises(ValueError, match="at least one"):
        JWTVerifier("https://issuer.example", algorithms=())
    with pytest.raises(ValueError, match="not a JWS algorithm"):
        JWTVerifier("https://issuer.example", algorithms=("ES257",))
    assert JWTVerifier("https://issuer.example", algorithms=["ES256"]).algorithms == ("ES256",)


async def test_an_algorithm_off_the_allow_list_is_refused(own: OwnIssuer) -> None:
    token = own.sign()
    with trio.fail_after(GUARD):
        verifier = JWTVerifier(own.url, algorithms=("RS256",))
        assert "algorithm this server does not accept" in await refused(verifier, token)
        assert not own.seen


async def test_no_refusal_logs_the_token(own: OwnIssuer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    not_claims = jws.serialize_compact({"alg": "ES256", "kid": "own-1"}, b"[1, 2]", own.keys[0])
    tokens = [not_claims, *(make(own) for make, _ in REFUSED.values())]
    verifier = JWTVerifier(own.url)
    with trio.fail_after(GUARD):
        assert await refused(verifier, not_claims) == "the token's payload is not a JSON claim set"
        for token in tokens:
            await refused(verifier, token)
    assert "JWT access token refused" in caplog.text
    no_token_logged(caplog, *tokens)
