"""The OAuth client flow against a real hypercorn serving a small authorization server and a
protected trio_mcp server written here: what the conformance suite does not cover (the token
stores, refresh and rotation, the step-up bound, the bad-input refusals, the loopback
receiver, and that no token or secret is ever logged)."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import stat
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import attrs
import httpx
import orjson
import pytest
import trio
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    encode_dss_signature,
)

from trio_mcp import (
    DPoPKey,
    FileTokenStore,
    HttpTarget,
    MemoryTokenStore,
    OAuth,
    OAuthError,
    ProtocolError,
    Server,
    TokenSet,
    open_client,
)
from trio_mcp.client._grants import GrantRequest
from trio_mcp.client._redirect import LoopbackReceiver

from .._http import GUARD, serving_app, text_of

SECRET = "s3cr3t-client-secret-value"


def protected_server() -> Server:
    server = Server("protected", "1.0")

    @server.tool()
    def read() -> str:
        return "read ok"

    @server.tool()
    def write() -> str:
        return "write ok"

    return server


@attrs.define
class Realm:
    """An authorization server and the resource server it protects, on one origin."""

    base: str = ""
    prm: dict[str, Any] = attrs.Factory(dict)
    metadata: dict[str, Any] = attrs.Factory(dict)
    challenge_scope: str | None = "mcp:read"
    #: Answer the Protected Resource Metadata with this status instead.
    prm_status: int | None = None
    #: The scope each tool needs beyond a valid token.
    tool_scopes: dict[str, str] = attrs.Factory(dict)
    #: Each 403 asks for a scope never asked for before (a server step-up cannot satisfy).
    ever_new_scopes: bool = False
    auth_methods: list[str] = attrs.Factory(lambda: ["none"])
    expires_in: int | None = 3600
    issue_refresh: bool = True
    rotate_refresh: bool = True
    token_hang: bool = False
    token_error: str | None = None
    deny: bool = False
    #: The resource server's DPoP nonce: a proof without it is answered use_dpop_nonce.
    rs_nonce: str | None = None
    #: The authorization server's DPoP nonce: a token request without it is refused first.
    as_nonce: str | None = None
    proofs: list[dict[str, Any]] = attrs.Factory(list)
    seen: list[tuple[str, str, dict[str, str], dict[str, str]]] = attrs.Factory(list)
    access: dict[str, str] = attrs.Factory(dict)
    refresh: dict[str, str] = attrs.Factory(dict)
    codes: dict[str, tuple[str, str, str]] = attrs.Factory(dict)
    issued: list[str] = attrs.Factory(list)
    counter: int = 0

    def hits(self, method: str, path: str) -> list[dict[str, str]]:
        return [params for m, p, params, _ in self.seen if (m, p) == (method, path)]

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        value = f"{prefix}-{self.counter}-{os.urandom(6).hex()}"
        self.issued.append(value)
        return value

    def revoke_access(self) -> None:
        self.access.clear()


async def _body(receive: Any) -> bytes:
    chunks = b""
    while True:
        message = await receive()
        chunks += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return chunks


async def _reply(
    send: Any, status: int, body: Any = None, headers: dict[str, str] | None = None
) -> None:
    payload = orjson.dumps(body) if body is not None else b""
    head = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    if body is not None:
        head.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": payload})


def realm_app(realm: Realm, server: Server) -> Any:
    inner = server.http_app()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        body = await _body(receive)
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        form = {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        realm.seen.append((method, path, query if method == "GET" else form, headers))
        base = realm.base
        if path.startswith("/.well-known/oauth-protected-resource") and realm.prm_status:
            await _reply(send, realm.prm_status, {"error": "unavailable"})
        elif path == "/.well-known/oauth-protected-resource/mcp":
            prm = {"resource": f"{base}/mcp", "authorization_servers": [base]}
            await _reply(send, 200, {**prm, **realm.prm})
        elif path == "/.well-known/oauth-authorization-server":
            document = {
                "issuer": base,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token",
                "registration_endpoint": f"{base}/register",
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": realm.auth_methods,
                "authorization_response_iss_parameter_supported": True,
            }
            document.update(realm.metadata)
            await _reply(send, 200, {k: v for k, v in document.items() if v is not None})
        elif path == "/register" and method == "POST":
            asked = orjson.loads(body)
            client: dict[str, Any] = {"client_id": realm.fresh("client"), **asked}
            if asked.get("token_endpoint_auth_method") != "none":
                client["client_secret"] = SECRET
            await _reply(send, 201, client)
        elif path == "/authorize":
            target = query["redirect_uri"]
            answer: dict[str, str] = {"state": query.get("state", ""), "iss": base}
            if realm.deny:
                answer["error"] = "access_denied"
            else:
                code = realm.fresh("code")
                realm.codes[code] = (query["code_challenge"], query.get("scope", ""), target)
                answer["code"] = code
            location = f"{target}?{urlencode(answer)}"
            await _reply(send, 302, headers={"location": location})
        elif path == "/token" and method == "POST":
            await token(realm, send, form, headers)
        elif path == "/mcp":
            await resource(realm, inner, scope, body, headers, send)
        else:
            await _reply(send, 404, {"error": "not_found"})

    return app


async def token(realm: Realm, send: Any, form: dict[str, str], headers: dict[str, str]) -> None:
    if realm.token_hang:
        await trio.sleep_forever()
    if "dpop" in headers and realm.as_nonce is not None:
        claims = verify_proof(headers["dpop"], "POST", f"{realm.base}/token")
        if claims.get("nonce") != realm.as_nonce:
            realm.proofs.append(claims)
            await _reply(send, 400, {"error": "use_dpop_nonce"}, {"dpop-nonce": realm.as_nonce})
            return
    if realm.token_error is not None:
        # A careless server that echoes what it was sent.
        echo = f"refused {form.get('code') or form.get('refresh_token')}"
        await _reply(send, 400, {"error": realm.token_error, "error_description": echo})
        return
    if form.get("grant_type") == "authorization_code":
        challenge, scope, redirect = realm.codes.pop(form.get("code", ""), ("", "", ""))
        verifier = form.get("code_verifier", "")
        digest = hashlib.sha256(verifier.encode()).digest()
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != challenge or (
            form.get("redirect_uri") != redirect
        ):
            await _reply(send, 400, {"error": "invalid_grant"})
            return
    elif form.get("grant_type") == "client_credentials":
        scope = form.get("scope", "")
    elif form.get("grant_type") == "refresh_token":
        old = form.get("refresh_token", "")
        if old not in realm.refresh:
            await _reply(send, 400, {"error": "invalid_grant"})
            return
        scope = realm.refresh[old]
        if realm.rotate_refresh:
            del realm.refresh[old]
    else:
        await _reply(send, 400, {"error": "unsupported_grant_type"})
        return
    access = realm.fresh("access")
    realm.access[access] = scope
    kind = "Bearer"
    if "dpop" in headers:
        claims = verify_proof(headers["dpop"], "POST", f"{realm.base}/token")
        realm.proofs.append(claims)
        kind = "DPoP"
    answer: dict[str, Any] = {"access_token": access, "token_type": kind, "scope": scope}
    if realm.expires_in is not None:
        answer["expires_in"] = realm.expires_in
    if realm.issue_refresh and (realm.rotate_refresh or form["grant_type"] != "refresh_token"):
        refresh = realm.fresh("refresh")
        realm.refresh[refresh] = scope
        answer["refresh_token"] = refresh
    await _reply(send, 200, answer, {"cache-control": "no-store"})


async def resource(
    realm: Realm, inner: Any, scope: Any, body: bytes, headers: dict[str, str], send: Any
) -> None:
    prm_url = f"{realm.base}/.well-known/oauth-protected-resource/mcp"
    authorization = headers.get("authorization", "")
    scheme, _, presented = authorization.partition(" ")
    granted = realm.access.get(presented)
    if scheme == "DPoP" and granted is not None:
        claims = verify_proof(headers.get("dpop", ""), scope["method"], f"{realm.base}/mcp")
        realm.proofs.append(claims)
        assert claims["ath"] == b64url(hashlib.sha256(presented.encode()).digest())
        if realm.rs_nonce is not None and claims.get("nonce") != realm.rs_nonce:
            challenge = 'DPoP error="use_dpop_nonce", error_description="fresh nonce"'
            await _reply(
                send,
                401,
                {"error": "use_dpop_nonce"},
                {"www-authenticate": challenge, "dpop-nonce": realm.rs_nonce},
            )
            return
    elif scheme != "Bearer" or granted is None:
        challenge = f'Bearer resource_metadata="{prm_url}"'
        if realm.challenge_scope:
            challenge += f', scope="{realm.challenge_scope}"'
        await _reply(send, 401, {"error": "invalid_token"}, {"www-authenticate": challenge})
        return
    message = orjson.loads(body) if body else {}
    if isinstance(message, dict) and message.get("method") == "tools/call":
        needed = realm.tool_scopes.get(message["params"]["name"])
        if realm.ever_new_scopes:
            needed = realm.fresh("scope")
        if needed is not None and needed not in granted.split():
            challenge = (
                f'Bearer error="insufficient_scope", scope="{needed}", '
                f'resource_metadata="{prm_url}"'
            )
            await _reply(
                send, 403, {"error": "insufficient_scope"}, {"www-authenticate": challenge}
            )
            return
    sent = False

    async def replay() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await trio.sleep_forever()
        raise AssertionError  # pragma: no cover

    await inner(scope, replay, send)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify_proof(proof: str, method: str, url: str) -> dict[str, Any]:
    """The authorization and resource servers' side: the proof is signed by its own key and
    bound to this request."""
    head, body, signature = proof.split(".")
    header = orjson.loads(unb64url(head))
    assert header["typ"] == "dpop+jwt" and header["alg"] == "ES256"
    x, y = (int.from_bytes(unb64url(header["jwk"][c]), "big") for c in "xy")
    public = ec.EllipticCurvePublicNumbers(x, y, ec.SECP256R1()).public_key()
    raw = unb64url(signature)
    der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
    public.verify(der, f"{head}.{body}".encode(), ec.ECDSA(hashes.SHA256()))
    claims: dict[str, Any] = orjson.loads(unb64url(body))
    assert claims["htm"] == method and claims["htu"] == url
    return claims


@asynccontextmanager
async def protected(realm: Realm | None = None) -> AsyncIterator[tuple[Realm, str]]:
    realm = realm or Realm()
    with trio.fail_after(GUARD):
        async with serving_app(realm_app(realm, protected_server())) as url:
            realm.base = url.removesuffix("/mcp")
            yield realm, url


async def follow(url: str) -> str:
    """A headless browser: the authorization endpoint above redirects at once."""
    async with httpx.AsyncClient(follow_redirects=False) as http:
        response = await http.get(url)
    assert response.status_code == 302
    location: str = response.headers["location"]
    return location


def oauth(**options: Any) -> OAuth:
    options.setdefault("on_authorize", follow)
    options.setdefault("timeout", 5)
    return OAuth(**options)


# -- the flow --------------------------------------------------------------------------------------


async def test_authorizes_once_then_a_file_store_serves_the_next_run(tmp_path: Path) -> None:
    directory = tmp_path / "tokens"
    async with protected() as (realm, url):
        async with open_client(
            HttpTarget(url, auth=oauth(store=FileTokenStore(directory)))
        ) as client:
            assert text_of(await client.call_tool("read", {})) == "read ok"
        [asked] = realm.hits("GET", "/authorize")
        assert asked["code_challenge_method"] == "S256"
        assert asked["resource"] == url and asked["scope"] == "mcp:read"
        assert asked["state"] and asked["redirect_uri"].startswith("http://127.0.0.1")
        [exchanged] = realm.hits("POST", "/token")
        assert exchanged["resource"] == url and exchanged["code_verifier"]
        assert len(realm.hits("POST", "/register")) == 1

        # A new process: a new OAuth over the same directory needs no browser at all.
        async with open_client(
            HttpTarget(url, auth=oauth(store=FileTokenStore(directory)))
        ) as client:
            assert text_of(await client.call_tool("read", {})) == "read ok"
        assert len(realm.hits("GET", "/authorize")) == 1
        assert len(realm.hits("POST", "/register")) == 1

    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = sorted(p.name for p in directory.iterdir())
    assert len(files) == 2 and all(name.endswith(".json") for name in files)
    assert not any("127.0.0.1" in name for name in files)
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


async def test_the_file_store_replaces_files_whole_and_reads_damage_as_absent(
    tmp_path: Path,
) -> None:
    from trio_mcp import StoredTokens

    store = FileTokenStore(tmp_path / "t")
    first = StoredTokens("https://as.example.com", TokenSet("a1", refresh_token="r1"), "x")
    await store.set_tokens("https://mcp.example.com/mcp", first)
    assert await store.get_tokens("https://mcp.example.com/mcp") == first
    second = attrs.evolve(first, tokens=TokenSet("a2"))
    await store.set_tokens("https://mcp.example.com/mcp", second)
    assert await store.get_tokens("https://mcp.example.com/mcp") == second
    assert [p.name for p in (tmp_path / "t").iterdir() if p.name.startswith(".tmp")] == []
    [path] = (tmp_path / "t").iterdir()
    path.write_text("{not json")
    assert await store.get_tokens("https://mcp.example.com/mcp") is None
    await store.delete_tokens("https://mcp.example.com/mcp")
    await store.delete_tokens("https://mcp.example.com/mcp")  # absent: no error
    assert await store.get_client("https://as.example.com") is None


async def test_refresh_before_expiry_keeps_an_unrotated_refresh_token() -> None:
    now = [1_000_000.0]
    store = MemoryTokenStore()
    realm = Realm(rotate_refresh=False)
    async with protected(realm) as (realm, url):
        auth = oauth(store=store, clock=lambda: now[0])
        async with open_client(HttpTarget(url, auth=auth)) as client:
            await client.call_tool("read", {})
            before = await store.get_tokens(url)
            assert before is not None and before.tokens.refresh_token is not None
            now[0] += 3600  # the access token is about to expire
            await client.call_tool("read", {})
        refreshed = [h for h in realm.hits("POST", "/token") if h["grant_type"] == "refresh_token"]
        assert len(refreshed) == 1 and refreshed[0]["resource"] == url
        after = await store.get_tokens(url)
        assert after is not None
        assert after.tokens.access_token != before.tokens.access_token
        assert after.tokens.refresh_token == before.tokens.refresh_token
        assert len(realm.hits("GET", "/authorize")) == 1


async def test_a_token_the_server_rejects_is_refreshed_and_a_rotated_one_replaces_it() -> None:
    store = MemoryTokenStore()
    async with protected() as (realm, url):
        async with open_client(HttpTarget(url, auth=oauth(store=store))) as client:
            await client.call_tool("read", {})
            before = await store.get_tokens(url)
            realm.revoke_access()
            assert text_of(await client.call_tool("read", {})) == "read ok"
        after = await store.get_tokens(url)
        assert before is not None and after is not None
        assert after.tokens.refresh_token not in (None, before.tokens.refresh_token)
        assert len(realm.hits("GET", "/authorize")) == 1

        # A refused refresh token: the flow forgets it and authorizes again.
        realm.revoke_access()
        realm.refresh.clear()
        async with open_client(HttpTarget(url, auth=oauth(store=store))) as client:
            assert text_of(await client.call_tool("read", {})) == "read ok"
        assert len(realm.hits("GET", "/authorize")) == 2


async def test_step_up_asks_for_the_union_of_the_scopes() -> None:
    realm = Realm(tool_scopes={"write": "mcp:write"})
    async with (
        protected(realm) as (realm, url),
        open_client(HttpTarget(url, auth=oauth())) as client,
    ):
        assert text_of(await client.call_tool("read", {})) == "read ok"
        assert text_of(await client.call_tool("write", {})) == "write ok"
    scopes = [h.get("scope") for h in realm.hits("GET", "/authorize")]
    assert scopes == ["mcp:read", "mcp:read mcp:write"]


async def test_step_up_stops_after_three_authorizations_for_one_request() -> None:
    realm = Realm(ever_new_scopes=True)
    async with (
        protected(realm) as (realm, url),
        open_client(HttpTarget(url, auth=oauth())) as client,
    ):
        await client.list_tools()
        before = len(realm.hits("GET", "/authorize"))
        with pytest.raises(ProtocolError, match="403"):
            await client.call_tool("read", {})
        assert len(realm.hits("GET", "/authorize")) - before == 3


async def test_no_step_up_for_a_scope_already_asked_for() -> None:
    realm = Realm(tool_scopes={"write": "mcp:read"}, challenge_scope="mcp:read")
    async with (
        protected(realm) as (realm, url),
        open_client(HttpTarget(url, auth=oauth())) as client,
    ):
        await client.list_tools()
        # The server grants less than asked; a 403 for the same scope cannot be helped.
        for token_value in list(realm.access):
            realm.access[token_value] = ""
        with pytest.raises(ProtocolError, match="403"):
            await client.call_tool("write", {})
    assert len(realm.hits("GET", "/authorize")) == 1


# -- the plug-in points: another grant, DPoP ------------------------------------------------------


async def test_a_grant_replaces_the_interactive_step() -> None:
    asked: list[tuple[str, str | None]] = []

    async def client_credentials(request: GrantRequest) -> TokenSet:
        asked.append((request.resource, request.scope))
        response = await request.http.post(
            request.metadata.token_endpoint,
            data={"grant_type": "client_credentials", "scope": request.scope or ""},
        )
        return TokenSet.from_response(response.json(), now=0)

    async with protected() as (realm, url):
        auth = OAuth(grant=client_credentials, timeout=5)
        async with open_client(HttpTarget(url, auth=auth)) as client:
            assert text_of(await client.call_tool("read", {})) == "read ok"
    assert asked == [(url, "mcp:read")]
    assert realm.hits("GET", "/authorize") == [] and realm.hits("POST", "/register") == []


async def test_dpop_binds_the_tokens_and_takes_the_resource_servers_nonce() -> None:
    realm = Realm(rs_nonce="rs-nonce-1")
    async with protected(realm) as (realm, url):
        async with open_client(HttpTarget(url, auth=oauth(dpop=DPoPKey.generate()))) as client:
            assert text_of(await client.call_tool("read", {})) == "read ok"
            realm.rs_nonce = "rs-nonce-2"  # rotated: one more use_dpop_nonce, then accepted
            assert text_of(await client.call_tool("read", {})) == "read ok"
        mcp = [h[3] for h in realm.seen if h[1] == "/mcp" and h[0] == "POST"]
    assert all(h["authorization"].startswith("DPoP ") for h in mcp if "authorization" in h)
    at_token = [p for p in realm.proofs if p["htu"].endswith("/token")]
    at_resource = [p for p in realm.proofs if p["htu"].endswith("/mcp")]
    assert at_token and "ath" not in at_token[0]
    assert {p.get("nonce") for p in at_resource} >= {None, "rs-nonce-1", "rs-nonce-2"}
    assert len({p["jti"] for p in realm.proofs}) == len(realm.proofs)  # a fresh proof each time
    assert len(realm.hits("GET", "/authorize")) == 1


async def test_dpop_takes_the_authorization_servers_nonce_and_keeps_it() -> None:
    realm = Realm(as_nonce="as-nonce-1")
    auth = oauth(dpop=DPoPKey.generate())
    async with protected(realm) as (realm, url), open_client(HttpTarget(url, auth=auth)) as client:
        assert text_of(await client.call_tool("read", {})) == "read ok"
        realm.revoke_access()  # the next call refreshes, with the nonce it already has
        assert text_of(await client.call_tool("read", {})) == "read ok"
    at_token = [p.get("nonce") for p in realm.proofs if p["htu"].endswith("/token")]
    assert at_token == [None, "as-nonce-1", "as-nonce-1"]
    grants = [form["grant_type"] for _m, p, form, _h in realm.seen if p == "/token"]
    assert grants == ["authorization_code", "authorization_code", "refresh_token"]


# -- bad input -------------------------------------------------------------------------------------


async def connect_expecting(url: str, auth: OAuth) -> OAuthError:
    with pytest.raises(OAuthError) as caught:
        async with open_client(HttpTarget(url, auth=auth)) as client:
            await client.list_tools()
    return caught.value


async def test_a_wrong_state_is_refused_and_no_code_is_exchanged() -> None:
    async def tamper(url: str) -> str:
        landed = await follow(url)
        return landed.replace("state=", "state=x")

    async with protected() as (realm, url):
        error = await connect_expecting(url, oauth(on_authorize=tamper))
    assert error.step == "authorization" and "state" in str(error)
    assert realm.hits("POST", "/token") == []


async def test_a_refusal_at_the_authorization_server_carries_its_error_code() -> None:
    async with protected(Realm(deny=True)) as (_realm, url):
        error = await connect_expecting(url, oauth())
    assert (error.step, error.error) == ("authorization", "access_denied")


async def test_a_token_endpoint_that_hangs_times_out() -> None:
    async with protected(Realm(token_hang=True)) as (_realm, url):
        with trio.fail_after(GUARD):
            error = await connect_expecting(url, oauth(timeout=0.5))
    assert error.step == "token" and "did not answer" in str(error)


async def test_an_error_from_the_token_endpoint_is_named_and_carries_no_secret() -> None:
    async with protected(Realm(token_error="invalid_grant")) as (realm, url):
        error = await connect_expecting(url, oauth())
    assert (error.step, error.error) == ("token", "invalid_grant")
    code = realm.hits("POST", "/token")[0]["code"]
    assert code not in str(error) and "refused [redacted]" in str(error)


@pytest.mark.parametrize(
    ("metadata", "step"),
    [
        ({"token_endpoint": "http://tokens.example.com/token"}, "metadata"),
        ({"authorization_endpoint": "ftp://example.com/authorize"}, "metadata"),
        ({"code_challenge_methods_supported": None}, "metadata"),
        ({"code_challenge_methods_supported": ["plain"]}, "metadata"),
        ({"issuer": "https://attacker.example.com"}, "metadata"),
        ({"token_endpoint": 12}, "metadata"),
    ],
)
async def test_hostile_metadata_is_refused_before_anything_is_sent(
    metadata: dict[str, Any], step: str
) -> None:
    async with protected(Realm(metadata=metadata)) as (realm, url):
        error = await connect_expecting(url, oauth())
    assert error.step == step
    assert realm.hits("POST", "/register") == [] and realm.hits("GET", "/authorize") == []


@pytest.mark.parametrize(
    "prm",
    [
        {"resource": "https://evil.example.com/mcp"},
        {"authorization_servers": ["http://auth.example.com"]},
        {"authorization_servers": []},
        {"authorization_servers": "nope"},
    ],
)
async def test_hostile_resource_metadata_is_refused(prm: dict[str, Any]) -> None:
    async with protected(Realm(prm=prm)) as (realm, url):
        error = await connect_expecting(url, oauth())
    assert error.step == "discovery"
    assert realm.hits("GET", "/.well-known/oauth-authorization-server") == []


async def test_a_broken_resource_metadata_endpoint_is_not_taken_for_a_2025_03_26_server() -> None:
    async with protected(Realm(prm_status=503)) as (realm, url):
        error = await connect_expecting(url, oauth())
    assert error.step == "discovery" and "503" in str(error)
    assert realm.hits("GET", "/.well-known/oauth-authorization-server") == []


async def test_without_resource_metadata_the_server_origin_is_the_authorization_server() -> None:
    """The 2025-03-26 form: no PRM at all (404), metadata at the MCP server's root."""
    realm = Realm(prm_status=404)
    async with (
        protected(realm) as (realm, url),
        open_client(HttpTarget(url, auth=oauth())) as client,
    ):
        assert text_of(await client.call_tool("read", {})) == "read ok"
    [asked] = realm.hits("GET", "/authorize")
    assert asked["resource"] == url


async def test_no_token_or_secret_reaches_a_log_or_a_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="trio_mcp")
    realm = Realm(auth_methods=["client_secret_basic"])
    async with protected(realm) as (realm, url):
        async with open_client(HttpTarget(url, auth=oauth())) as client:
            await client.call_tool("read", {})
            realm.revoke_access()
            await client.call_tool("read", {})
        realm.token_error = "invalid_client"
        realm.revoke_access()
        realm.refresh.clear()
        error = await connect_expecting(url, oauth())
        basic = [h[3].get("authorization", "") for h in realm.seen if h[1] == "/token"]
    assert any(value.startswith("Basic ") for value in basic)
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("trio_mcp")]
    assert any("OAuth token" in line for line in ours) and any("refresh" in t for t in ours)
    text = "\n".join(ours) + str(error) + repr(error)
    for secret in [*realm.issued, SECRET]:
        if not secret.startswith("client-"):  # a client_id is not a secret
            assert secret not in text, secret


# -- the interactive driver ------------------------------------------------------------------------


def browser(opened: list[str]) -> Callable[[str], bool]:
    """What a browser does with the authorization URL: follow the redirects to the receiver."""

    def open_url(url: str) -> bool:
        opened.append(url)

        def visit() -> None:
            with httpx.Client(follow_redirects=True, timeout=5) as http:
                page = http.get(url)
                assert page.status_code == 200 and b"close this window" in page.content

        threading.Thread(target=visit, daemon=True).start()
        return True

    return open_url


async def test_the_default_driver_opens_the_browser_and_receives_the_redirect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import webbrowser

    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", browser(opened))
    auth = OAuth(timeout=5, authorize_timeout=10)
    async with protected() as (realm, url), open_client(HttpTarget(url, auth=auth)) as client:
        assert text_of(await client.call_tool("read", {})) == "read ok"
    [asked] = realm.hits("GET", "/authorize")
    redirect = urlsplit(asked["redirect_uri"])
    assert redirect.hostname == "127.0.0.1" and redirect.port and redirect.path == "/callback"
    assert opened and opened[0].startswith(f"{realm.base}/authorize?")


async def test_a_user_who_never_comes_back_ends_the_wait_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import webbrowser

    def never_returns(url: str) -> bool:
        threading.Event().wait(5)  # a browser that blocks and never redirects
        return True

    monkeypatch.setattr(webbrowser, "open", never_returns)
    async with protected() as (realm, url):
        with trio.fail_after(GUARD / 2):
            error = await connect_expecting(url, OAuth(timeout=5, authorize_timeout=0.5))
    assert error.step == "authorization" and "no redirect" in str(error)
    assert realm.hits("POST", "/token") == []


async def test_the_receiver_ignores_other_paths_and_gives_up_in_time() -> None:
    async with LoopbackReceiver("http://127.0.0.1/done") as receiver:
        base = receiver.redirect_uri.removesuffix("/done")
        async with trio.open_nursery() as nursery:

            async def visit() -> None:
                async with httpx.AsyncClient() as http:
                    assert (await http.get(f"{base}/favicon.ico")).status_code == 404
                    assert (await http.get(f"{base}/done?code=c&state=s")).status_code == 200

            nursery.start_soon(visit)
            landed = await receiver.wait(GUARD)
        assert landed == f"{base}/done?code=c&state=s"
        with pytest.raises(OAuthError, match="no redirect") as caught:
            await receiver.wait(0.2)
        assert caught.value.step == "authorization"


# -- token responses -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"access_token": ""},
        {"access_token": 5},
        {"access_token": "a", "token_type": "mac"},
        {"access_token": "a", "expires_in": "soon"},
        {"access_token": "a", "expires_in": -1},
        {"access_token": "a", "expires_in": True},
        {"access_token": "a", "refresh_token": 3},
        {"access_token": "a", "scope": ["a"]},
    ],
)
def test_a_malformed_token_response_is_refused(body: dict[str, Any]) -> None:
    with pytest.raises(OAuthError) as caught:
        TokenSet.from_response(body, now=0)
    assert caught.value.step == "token"


def test_a_token_response_is_read_and_its_tokens_kept_out_of_repr() -> None:
    tokens = TokenSet.from_response(
        {
            "access_token": "A-9f3",
            "token_type": "bearer",
            "expires_in": 60,
            "refresh_token": "R-7c1",
        },
        now=100,
    )
    assert (tokens.token_type, tokens.expires_at, tokens.refresh_token) == ("Bearer", 160, "R-7c1")
    assert "A-9f3" not in repr(tokens) and "R-7c1" not in repr(tokens)
    assert tokens.expired(161) and not tokens.expired(159)


# -- concurrency and failures after connecting -----------------------------------------------------


async def test_concurrent_requests_share_one_refresh() -> None:
    async with protected() as (realm, url), open_client(HttpTarget(url, auth=oauth())) as client:
        await client.call_tool("read", {})
        realm.revoke_access()
        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(client.call_tool, "read", {})
    grants = [h["grant_type"] for h in realm.hits("POST", "/token")]
    assert grants == ["authorization_code", "refresh_token"]


async def test_a_refused_step_up_fails_that_request_and_the_connection_goes_on() -> None:
    realm = Realm(tool_scopes={"write": "mcp:write"})
    async with (
        protected(realm) as (realm, url),
        open_client(HttpTarget(url, auth=oauth())) as client,
    ):
        await client.call_tool("read", {})
        realm.deny = True
        with pytest.raises(OAuthError) as caught:
            await client.call_tool("write", {})
        assert (caught.value.step, caught.value.error) == ("authorization", "access_denied")
        assert text_of(await client.call_tool("read", {})) == "read ok"
        realm.deny = False
        assert not (await client.call_tool("write", {})).is_error


async def test_an_expired_token_without_a_refresh_token_is_not_sent() -> None:
    now = [1_000_000.0]
    store = MemoryTokenStore()
    async with protected(Realm(issue_refresh=False)) as (realm, url):
        async with open_client(
            HttpTarget(url, auth=oauth(store=store, clock=lambda: now[0]))
        ) as client:
            await client.call_tool("read", {})
            sent = len(realm.hits("POST", "/mcp"))
            now[0] += 3600
            assert text_of(await client.call_tool("read", {})) == "read ok"
            # One 401 (no token sent), then the call with the new token: no stale token tried.
            assert len(realm.hits("POST", "/mcp")) - sent == 2
        assert len(realm.hits("GET", "/authorize")) == 2
        assert await store.get_tokens(url) is not None
