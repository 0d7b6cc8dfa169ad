"""Token endpoint requests, the grants a client runs without a user, and DPoP on the wire.

:func:`token_request` is the one place a token endpoint is called: every grant (the
interactive flow's ``authorization_code`` and ``refresh_token`` too) goes through it, so client
authentication (:class:`ClientAuth`), DPoP proofs with the authorization server's nonce
(RFC 9449 §5, §8), the time bound and the error mapping are written once. On top of it:

- :func:`client_credentials`: the machine-to-machine grant (RFC 6749 §4.4, SEP-1046);
- :func:`jwt_bearer`: a JWT as the grant (RFC 7523 §2.1): workload identity (SEP-1933) and the
  second leg of enterprise-managed authorization; one request, never retried on an error;
- :func:`exchange_for_id_jag`: the first leg of enterprise-managed authorization (SEP-990):
  RFC 8693 token exchange at the enterprise IdP for an Identity Assertion JWT Authorization
  Grant (ID-JAG) addressed to the MCP server's authorization server.

:class:`DPoPSession` holds a :class:`~trio_mcp.client._jose.DPoPKey` and the nonces servers gave
for it: per token endpoint for the authorization server, per origin for resource servers.

Every failure is an :class:`OAuthError` whose message names the step and quotes the server's
error code and (cleaned, bounded) description, never a token, an assertion or a secret.
"""

from __future__ import annotations

import base64
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol
from urllib.parse import quote_plus, urlsplit

import attrs
import httpx
import orjson
import trio

from ..protocol._oauth import ServerMetadata, parse_www_authenticate
from ._jose import DPoPKey, _htu, client_assertion
from ._oauth_errors import OAuthError
from ._tokens import TokenSet

logger = logging.getLogger("trio_mcp.client.oauth")

CLIENT_CREDENTIALS = "client_credentials"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

#: How long one token request may take, connection and whole answer included (seconds).
TOKEN_TIMEOUT = 30.0
#: The largest token endpoint answer read; a token response is a few kilobytes.
MAX_TOKEN_RESPONSE = 64 * 1024
#: The longest DPoP nonce kept (a server's nonce is a few dozen characters).
MAX_NONCE = 512
#: How much of a server's error_description an error message quotes.
MAX_DESCRIPTION = 200
#: RFC 6749 §5.2: an error code is printable ASCII without '"' and '\'.
_ERROR_CODE = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]{1,64}")
#: The form fields whose values are secrets: never quoted back in an error message.
_SECRET_FIELDS = (
    "client_secret",
    "client_assertion",
    "assertion",
    "subject_token",
    "actor_token",
    "refresh_token",
    "code",
    "code_verifier",
)

AuthMethod = Literal["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]


class DPoPSigner(Protocol):
    """What ``dpop=`` takes: a key that signs DPoP proofs (RFC 9449 §4)."""

    def proof(
        self,
        method: str,
        url: str,
        *,
        now: float,
        nonce: str | None = None,
        access_token: str | None = None,
    ) -> str: ...


@attrs.frozen
class GrantRequest:
    """What a :class:`Grant` is given: where to ask and for what."""

    http: httpx.AsyncClient
    metadata: ServerMetadata
    resource: str
    scope: str | None
    #: The DPoP key and its nonces (pass it on as a token request's ``dpop``), None without DPoP.
    dpop: DPoPSession | None
    #: The flow's wall clock (pass it on as a token request's ``now``).
    clock: Callable[[], float] = time.time


class Grant(Protocol):
    """What ``grant=`` takes: obtains tokens without the interactive authorization-code step
    (client credentials, a JWT bearer assertion, an ID-JAG exchange)."""

    async def __call__(self, request: GrantRequest) -> TokenSet: ...


def _form_encode(value: str) -> str:
    """application/x-www-form-urlencoded, as RFC 6749 §2.3.1 asks for Basic credentials."""
    return quote_plus(value, safe="")


@attrs.frozen
class ClientAuth:
    """How the client authenticates at a token endpoint (RFC 6749 §2.3, RFC 7523 §2.2).

    Build one with :meth:`none` (a public client: ``client_id`` in the form),
    :meth:`basic` (``client_secret_basic``; the ``client_id`` is in the form too),
    :meth:`post` (``client_secret_post``) or
    :meth:`private_key_jwt` (a signed assertion; its ``aud`` is ``audience`` if given, else
    the authorization server's issuer, else the token endpoint).
    """

    method: AuthMethod
    client_id: str
    secret: str | None = attrs.field(default=None, repr=False)
    key: str | dict[str, Any] | None = attrs.field(default=None, repr=False)
    alg: str | None = None
    audience: str | None = None

    def __attrs_post_init__(self) -> None:
        if not self.client_id:
            raise ValueError("a client_id is required")
        if self.method in ("client_secret_basic", "client_secret_post") and not self.secret:
            raise ValueError(f"{self.method} needs a client secret")
        if self.method == "private_key_jwt" and not self.key:
            raise ValueError("private_key_jwt needs a private key")

    @classmethod
    def none(cls, client_id: str) -> ClientAuth:
        return cls("none", client_id)

    @classmethod
    def basic(cls, client_id: str, secret: str) -> ClientAuth:
        return cls("client_secret_basic", client_id, secret)

    @classmethod
    def post(cls, client_id: str, secret: str) -> ClientAuth:
        return cls("client_secret_post", client_id, secret)

    @classmethod
    def private_key_jwt(
        cls,
        client_id: str,
        key: str | dict[str, Any],
        *,
        alg: str | None = None,
        audience: str | None = None,
    ) -> ClientAuth:
        return cls("private_key_jwt", client_id, key=key, alg=alg, audience=audience)

    def apply(
        self,
        form: dict[str, str],
        headers: dict[str, str],
        *,
        token_endpoint: str,
        now: float,
        issuer: str | None = None,
    ) -> None:
        """Add this authentication to one token request's ``form`` and ``headers``."""
        if self.method == "client_secret_basic":
            assert self.secret is not None
            pair = f"{_form_encode(self.client_id)}:{_form_encode(self.secret)}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        # Named in the form with every method, Basic included, which RFC 6749 §2.3.1 allows:
        # some servers (the official Python SDK's) read the client from the form even when it
        # authenticates by header.
        form["client_id"] = self.client_id
        if self.method == "client_secret_post":
            assert self.secret is not None
            form["client_secret"] = self.secret
        elif self.method == "private_key_jwt":
            assert self.key is not None
            audience = self.audience or issuer or token_endpoint
            form["client_assertion_type"] = CLIENT_ASSERTION_TYPE
            form["client_assertion"] = client_assertion(
                self.client_id, audience, self.key, alg=self.alg, now=now
            )


# -- challenges and DPoP ---------------------------------------------------------------------------


def _origin(url: httpx.URL | str) -> str:
    parts = urlsplit(str(url))
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


class DPoPSession:
    """A DPoP key and the nonces servers gave for it (RFC 9449 §8, §9).

    For a resource request, :meth:`sign` puts ``Authorization: DPoP <token>`` and a fresh proof
    (with ``ath`` and the origin's latest nonce) on the request; :meth:`learn` reads each
    response: it keeps a ``DPoP-Nonce`` the server sends, and returns True for a 401
    ``use_dpop_nonce`` challenge carrying one, when the caller should sign the request again
    and send it once more. Token requests take it as ``dpop=`` and keep the authorization
    server's nonce per token endpoint the same way.
    """

    def __init__(self, key: DPoPSigner | None = None) -> None:
        self.key: DPoPSigner = key if key is not None else DPoPKey.generate()
        self._token_nonces: dict[str, str] = {}
        self._resource_nonces: dict[str, str] = {}

    def token_proof(self, token_endpoint: str, *, now: float) -> str:
        """The proof for one token request (no ``ath``), with the endpoint's latest nonce."""
        nonce = self._token_nonces.get(_htu(token_endpoint))
        return self.key.proof("POST", token_endpoint, now=now, nonce=nonce)

    def learn_token_nonce(self, token_endpoint: str, nonce: str | None) -> None:
        if nonce:
            self._token_nonces[_htu(token_endpoint)] = nonce[:MAX_NONCE]

    def sign(self, request: httpx.Request, access_token: str, *, now: float | None = None) -> None:
        """Present ``access_token`` on ``request`` with the DPoP scheme and a fresh proof."""
        now = time.time() if now is None else now
        nonce = self._resource_nonces.get(_origin(request.url))
        request.headers["Authorization"] = f"DPoP {access_token}"
        request.headers["DPoP"] = self.key.proof(
            request.method, str(request.url), now=now, nonce=nonce, access_token=access_token
        )

    def learn(self, response: httpx.Response) -> bool:
        """Keep the response's ``DPoP-Nonce``; True if it is a ``use_dpop_nonce`` challenge
        (a 401 with the nonce to retry with)."""
        nonce = response.headers.get("DPoP-Nonce")
        if not nonce:
            return False
        self._resource_nonces[_origin(response.request.url)] = nonce[:MAX_NONCE]
        if response.status_code != 401:
            return False
        return any(
            challenge.scheme == "dpop" and challenge.error == "use_dpop_nonce"
            for challenge in parse_www_authenticate(response.headers.get_list("WWW-Authenticate"))
        )


# -- the token endpoint ----------------------------------------------------------------------------


def _clean(text: str, secrets: list[str]) -> str:
    """A server's text, fit to quote: secrets we sent removed, control characters dropped,
    bounded in length."""
    for secret in secrets:
        if len(secret) >= 8:
            text = text.replace(secret, "[redacted]")
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


async def _exchange(
    http: httpx.AsyncClient,
    url: str,
    form: dict[str, str],
    headers: dict[str, str],
    *,
    timeout: float,
    step: str,
) -> tuple[int, bytes, str | None]:
    """POST the form; the status, the body (bounded) and any DPoP-Nonce, within ``timeout``."""
    # The step and the endpoint only: never the form, which carries the secrets.
    logger.debug("OAuth %s: POST %s", step, urlsplit(url)._replace(query="").geturl())
    with trio.move_on_after(timeout):
        try:
            async with http.stream(
                "POST",
                url,
                data=form,
                headers=headers,
                timeout=httpx.Timeout(timeout),
                # Never the client's own auth (this is the authorization server), never a
                # redirect (a token request is not repeated elsewhere).
                auth=None,
                follow_redirects=False,
            ) as response:
                body = b""
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_TOKEN_RESPONSE:
                        raise OAuthError(
                            step, f"the answer of {url} exceeds {MAX_TOKEN_RESPONSE} bytes"
                        )
                return response.status_code, body, response.headers.get("DPoP-Nonce")
        except httpx.TimeoutException:
            pass
        except httpx.HTTPError as exc:
            raise OAuthError(step, f"could not reach {url} ({type(exc).__name__})") from None
    raise OAuthError(step, f"{url} did not answer within {timeout:g} s")


async def _post_token_form(
    http: httpx.AsyncClient,
    token_endpoint: str,
    form: dict[str, str],
    *,
    client_auth: ClientAuth,
    dpop: DPoPSession | None,
    issuer: str | None,
    timeout: float,
    step: str,
    now: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """One token request, the JSON object of its success; with DPoP, a fresh proof per attempt
    and one more attempt on a ``use_dpop_nonce`` answer that brings a nonce."""
    for attempt in (1, 2):
        at = now()
        body = dict(form)
        headers = {"Accept": "application/json"}
        client_auth.apply(body, headers, token_endpoint=token_endpoint, now=at, issuer=issuer)
        if dpop is not None:
            headers["DPoP"] = dpop.token_proof(token_endpoint, now=at)
        status, raw, nonce = await _exchange(
            http, token_endpoint, body, headers, timeout=timeout, step=step
        )
        if dpop is not None:
            dpop.learn_token_nonce(token_endpoint, nonce)
        answer = _json_object(raw)
        if status == 200:
            if answer is None:
                raise OAuthError(step, "the token endpoint answered 200 without a JSON object")
            return answer
        code = answer.get("error") if answer is not None else None
        if not isinstance(code, str) or not _ERROR_CODE.fullmatch(code):
            raise OAuthError(step, f"the token endpoint answered HTTP {status} with no error code")
        if code == "use_dpop_nonce" and dpop is not None and nonce and attempt == 1:
            continue
        assert answer is not None
        secrets = [body[name] for name in _SECRET_FIELDS if name in body]
        secrets += [headers.get("Authorization", "").removeprefix("Basic ")]
        description = answer.get("error_description")
        detail = f": {_clean(description, secrets)}" if isinstance(description, str) else ""
        raise OAuthError(step, f"the token endpoint refused ({code}){detail}", error=code)
    raise AssertionError("unreachable")  # pragma: no cover


def _session(dpop: DPoPSigner | DPoPSession | None) -> DPoPSession | None:
    return dpop if isinstance(dpop, DPoPSession) or dpop is None else DPoPSession(dpop)


async def token_request(
    http: httpx.AsyncClient,
    token_endpoint: str,
    form: dict[str, str],
    *,
    client_auth: ClientAuth,
    dpop: DPoPSigner | DPoPSession | None = None,
    issuer: str | None = None,
    timeout: float = TOKEN_TIMEOUT,
    step: str = "token",
    now: Callable[[], float] = time.time,
) -> TokenSet:
    """POST ``form`` (its ``grant_type`` and parameters) to the token endpoint, authenticated
    by ``client_auth``; the granted :class:`TokenSet`.

    With ``dpop``, each attempt carries a fresh proof, and a ``use_dpop_nonce`` answer is
    retried once with the nonce it brings, which is kept for the next request (pass the same
    :class:`DPoPSession` each time to keep it). ``issuer`` is the authorization server's, the
    audience of a ``private_key_jwt`` assertion. The whole request is bounded by ``timeout``;
    ``step`` names it in errors (``"token"``, ``"refresh"``); ``now`` is the wall clock.
    """
    session = _session(dpop)
    answer = await _post_token_form(
        http,
        token_endpoint,
        form,
        client_auth=client_auth,
        dpop=session,
        issuer=issuer,
        timeout=timeout,
        step=step,
        now=now,
    )
    try:
        tokens = TokenSet.from_response(answer, now=now())
    except OAuthError as exc:
        raise OAuthError(step, exc.message) from None
    if tokens.token_type == "DPoP" and session is None:
        raise OAuthError(step, "the authorization server issued a DPoP-bound token unasked")
    return tokens


def _grant_form(grant_type: str, scope: str | None, resource: str | None) -> dict[str, str]:
    form = {"grant_type": grant_type}
    if scope:
        form["scope"] = scope
    if resource:
        form["resource"] = resource
    return form


async def client_credentials(
    http: httpx.AsyncClient,
    token_endpoint: str,
    *,
    client_auth: ClientAuth,
    scope: str | None = None,
    resource: str | None = None,
    dpop: DPoPSigner | DPoPSession | None = None,
    issuer: str | None = None,
    now: Callable[[], float] = time.time,
) -> TokenSet:
    """The client credentials grant (RFC 6749 §4.4): a token for the client itself."""
    return await token_request(
        http,
        token_endpoint,
        _grant_form(CLIENT_CREDENTIALS, scope, resource),
        client_auth=client_auth,
        dpop=dpop,
        issuer=issuer,
        now=now,
    )


async def jwt_bearer(
    http: httpx.AsyncClient,
    token_endpoint: str,
    assertion: str,
    *,
    client_auth: ClientAuth,
    scope: str | None = None,
    resource: str | None = None,
    dpop: DPoPSigner | DPoPSession | None = None,
    issuer: str | None = None,
    now: Callable[[], float] = time.time,
) -> TokenSet:
    """The JWT bearer grant (RFC 7523 §2.1): ``assertion`` (a workload identity token, or an
    ID-JAG) is the grant. One request: an error is final (SEP-1933), never retried and never
    traded for another grant type."""
    form = _grant_form(JWT_BEARER, scope, resource)
    form["assertion"] = assertion
    return await token_request(
        http, token_endpoint, form, client_auth=client_auth, dpop=dpop, issuer=issuer, now=now
    )


async def exchange_for_id_jag(
    http: httpx.AsyncClient,
    idp_token_endpoint: str,
    subject_token: str,
    *,
    audience: str,
    resource: str,
    client_auth: ClientAuth,
    scope: str | None = None,
    subject_token_type: str = ID_TOKEN,
) -> str:
    """RFC 8693 token exchange at the enterprise IdP (SEP-990): the user's identity token for
    an ID-JAG addressed to ``audience`` (the MCP server's authorization server issuer) for
    ``resource`` (the MCP server); the ID-JAG itself, to use with :func:`jwt_bearer`."""
    form = _grant_form(TOKEN_EXCHANGE, scope, resource)
    form |= {
        "requested_token_type": ID_JAG,
        "audience": audience,
        "subject_token": subject_token,
        "subject_token_type": subject_token_type,
    }
    answer = await _post_token_form(
        http,
        idp_token_endpoint,
        form,
        client_auth=client_auth,
        dpop=None,
        issuer=None,
        timeout=TOKEN_TIMEOUT,
        step="token-exchange",
    )
    if answer.get("issued_token_type") != ID_JAG:
        raise OAuthError("token-exchange", "the IdP did not issue an ID-JAG (issued_token_type)")
    grant = answer.get("access_token")
    if not isinstance(grant, str) or not grant:
        raise OAuthError("token-exchange", "the IdP's answer has no access_token string")
    return grant


# -- the grants, for OAuth(grant=...) --------------------------------------------------------------

#: A credential given as a value, or as a function that returns the current one (a workload
#: token file that is rotated, a user's identity token that is refreshed).
Credential = str | Callable[[], str | Awaitable[str]]


async def _current(credential: Credential) -> str:
    if isinstance(credential, str):
        return credential
    value = credential()
    return value if isinstance(value, str) else await value


@attrs.frozen
class ClientCredentials:
    """The client credentials grant (SEP-1046), as ``OAuth(grant=...)``: the client
    authenticates as itself, with a secret (``ClientAuth.basic`` / ``ClientAuth.post``) or a
    key (``ClientAuth.private_key_jwt``). ``scope`` overrides the one the flow chose."""

    client_auth: ClientAuth
    scope: str | None = None

    async def __call__(self, request: GrantRequest) -> TokenSet:
        return await client_credentials(
            request.http,
            request.metadata.token_endpoint,
            client_auth=self.client_auth,
            scope=self.scope or request.scope,
            resource=request.resource,
            dpop=request.dpop,
            issuer=request.metadata.issuer,
            now=request.clock,
        )


class WorkloadIdentity:
    """Workload identity federation (SEP-1933), as ``OAuth(grant=...)``: the workload's JWT
    (from its platform: a Kubernetes service account token, a cloud identity token) is the
    grant, through the JWT bearer grant. ``assertion`` is the token, or a function returning
    the current one; the client is public (``client_id``) or authenticated (``client_auth``).

    A refused assertion raises :class:`OAuthError` and is never sent again: a later request
    that needs a token raises the same error without asking, until the assertion changes (a
    function that returns a rotated one: a new grant).
    """

    def __init__(
        self,
        assertion: Credential,
        *,
        client_id: str | None = None,
        client_auth: ClientAuth | None = None,
        scope: str | None = None,
    ) -> None:
        if client_auth is None:
            if client_id is None:
                raise ValueError("give client_id (a public client) or client_auth")
            client_auth = ClientAuth.none(client_id)
        self.client_auth = client_auth
        self.scope = scope
        self._assertion = assertion
        self._refused: dict[str, OAuthError] = {}

    def __repr__(self) -> str:
        return f"WorkloadIdentity(client_id={self.client_auth.client_id!r})"

    async def __call__(self, request: GrantRequest) -> TokenSet:
        current = await _current(self._assertion)
        was = self._refused.get(current)
        if was is not None:
            raise OAuthError(was.step, was.message, error=was.error)
        try:
            return await jwt_bearer(
                request.http,
                request.metadata.token_endpoint,
                current,
                client_auth=self.client_auth,
                scope=self.scope or request.scope,
                resource=request.resource,
                dpop=request.dpop,
                issuer=request.metadata.issuer,
                now=request.clock,
            )
        except OAuthError as exc:
            self._refused = {current: exc}  # only the latest: a rotated one replaces it
            raise


@attrs.frozen
class EnterpriseManaged:
    """Enterprise-managed authorization (SEP-990), as ``OAuth(grant=...)``: the user's
    identity token from the enterprise IdP (``id_token``, or a function returning the current
    one) is exchanged at ``idp_token_endpoint`` (authenticated by ``idp_client_auth``) for an
    ID-JAG addressed to the MCP server's authorization server, which grants the access token
    for it (the client authenticated by ``client_auth``)."""

    idp_token_endpoint: str
    id_token: Credential = attrs.field(repr=False)
    idp_client_auth: ClientAuth
    client_auth: ClientAuth
    scope: str | None = None

    async def __call__(self, request: GrantRequest) -> TokenSet:
        scope = self.scope or request.scope
        id_jag = await exchange_for_id_jag(
            request.http,
            self.idp_token_endpoint,
            await _current(self.id_token),
            audience=request.metadata.issuer,
            resource=request.resource,
            client_auth=self.idp_client_auth,
            scope=scope,
        )
        return await jwt_bearer(
            request.http,
            request.metadata.token_endpoint,
            id_jag,
            client_auth=self.client_auth,
            scope=scope,
            resource=request.resource,
            dpop=request.dpop,
            issuer=request.metadata.issuer,
            now=request.clock,
        )
