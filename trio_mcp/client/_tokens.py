"""Tokens and client registrations, and where they are kept between runs.

A :class:`TokenStore` holds two kinds of record: the tokens for one MCP server (keyed by the
server's resource URI, with the issuer that granted them, so tokens never cross authorization
servers) and the registration of this client at one authorization server (keyed by issuer:
MCP requires registration state per authorization server). :class:`MemoryTokenStore` lasts as
long as the process; :class:`FileTokenStore` survives restarts: one JSON file per server and
one per issuer, written atomically, readable by the user alone.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import attrs
import trio

from ._oauth_errors import OAuthError

_TOKEN_TYPES = {"bearer": "Bearer", "dpop": "DPoP"}


@attrs.frozen
class TokenSet:
    """What a token endpoint granted. ``repr`` hides the tokens themselves."""

    access_token: str = attrs.field(repr=False)
    token_type: str = "Bearer"  #: "Bearer" or "DPoP", as the authorization server said
    expires_at: float | None = None  #: wall-clock seconds (time.time()); None: unknown
    refresh_token: str | None = attrs.field(default=None, repr=False)
    scope: str | None = None  #: as granted, space-separated

    @classmethod
    def from_response(cls, body: dict[str, Any], *, now: float) -> TokenSet:
        """Validate a token endpoint's success body (RFC 6749 §5.1)."""
        if not isinstance(body, dict):
            raise OAuthError("token", "the token response is not a JSON object")
        access = body.get("access_token")
        if not isinstance(access, str) or not access or len(access) > 16384:
            raise OAuthError("token", "the token response has no access_token")
        kind = body.get("token_type", "Bearer")
        if not isinstance(kind, str) or kind.lower() not in _TOKEN_TYPES:
            raise OAuthError("token", "the token response has an unknown token_type")
        expires_in = body.get("expires_in")
        expires_at: float | None = None
        if expires_in is not None:
            if (
                isinstance(expires_in, bool)
                or not isinstance(expires_in, int | float)
                or not math.isfinite(expires_in)
                or expires_in < 0
            ):
                raise OAuthError("token", "the token response has an invalid expires_in")
            expires_at = now + float(expires_in)
        refresh = body.get("refresh_token")
        if refresh is not None and (not isinstance(refresh, str) or not refresh):
            raise OAuthError("token", "the token response has an invalid refresh_token")
        scope = body.get("scope")
        if scope is not None and not isinstance(scope, str):
            raise OAuthError("token", "the token response has an invalid scope")
        return cls(access, _TOKEN_TYPES[kind.lower()], expires_at, refresh, scope or None)

    def expired(self, now: float, *, margin: float = 0.0) -> bool:
        return self.expires_at is not None and now + margin >= self.expires_at

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> TokenSet:
        if not isinstance(data, dict) or not isinstance(data.get("access_token"), str):
            raise OAuthError("store", "a stored token set is damaged")
        return cls(
            data["access_token"],
            str(data.get("token_type") or "Bearer"),
            _float_or_none(data.get("expires_at")),
            _str_or_none(data.get("refresh_token")),
            _str_or_none(data.get("scope")),
        )


@attrs.frozen
class StoredTokens:
    """The tokens for one server, with the issuer that granted them and the scope asked for."""

    issuer: str
    tokens: TokenSet
    requested_scope: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "issuer": self.issuer,
            "tokens": self.tokens.to_json(),
            "requested_scope": self.requested_scope,
        }

    @classmethod
    def from_json(cls, data: Any) -> StoredTokens:
        if not isinstance(data, dict) or not isinstance(data.get("issuer"), str):
            raise OAuthError("store", "a stored token record is damaged")
        return cls(
            data["issuer"],
            TokenSet.from_json(data.get("tokens")),
            _str_or_none(data.get("requested_scope")),
        )


@attrs.frozen
class ClientRegistration:
    """This client at one authorization server: pre-registered, a Client ID Metadata
    Document URL, or the answer of dynamic registration (RFC 7591)."""

    client_id: str
    client_secret: str | None = attrs.field(default=None, repr=False)
    #: "none", "client_secret_basic" or "client_secret_post"; None: choose from the metadata.
    token_endpoint_auth_method: str | None = None
    redirect_uris: tuple[str, ...] = ()
    #: Wall-clock seconds after which the secret is no longer valid (0 or None: never).
    client_secret_expires_at: float | None = None

    def to_json(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["redirect_uris"] = list(self.redirect_uris)
        return data

    @classmethod
    def from_json(cls, data: Any) -> ClientRegistration:
        if not isinstance(data, dict) or not isinstance(data.get("client_id"), str):
            raise OAuthError("store", "a stored client registration is damaged")
        uris = data.get("redirect_uris") or ()
        return cls(
            data["client_id"],
            _str_or_none(data.get("client_secret")),
            _str_or_none(data.get("token_endpoint_auth_method")),
            tuple(u for u in uris if isinstance(u, str)) if isinstance(uris, list) else (),
            _float_or_none(data.get("client_secret_expires_at")),
        )


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


@runtime_checkable
class TokenStore(Protocol):
    """Where :class:`~trio_mcp.client.OAuth` keeps tokens (per server resource) and client
    registrations (per issuer). Every method is async, so a store may use a keyring, a
    database or a remote service."""

    async def get_tokens(self, resource: str) -> StoredTokens | None: ...
    async def set_tokens(self, resource: str, tokens: StoredTokens) -> None: ...
    async def delete_tokens(self, resource: str) -> None: ...
    async def get_client(self, issuer: str) -> ClientRegistration | None: ...
    async def set_client(self, issuer: str, client: ClientRegistration) -> None: ...
    async def delete_client(self, issuer: str) -> None: ...


class MemoryTokenStore:
    """A :class:`TokenStore` in this process's memory: gone when the process ends."""

    def __init__(self) -> None:
        self._tokens: dict[str, StoredTokens] = {}
        self._clients: dict[str, ClientRegistration] = {}

    async def get_tokens(self, resource: str) -> StoredTokens | None:
        await trio.lowlevel.checkpoint()
        return self._tokens.get(resource)

    async def set_tokens(self, resource: str, tokens: StoredTokens) -> None:
        await trio.lowlevel.checkpoint()
        self._tokens[resource] = tokens

    async def delete_tokens(self, resource: str) -> None:
        await trio.lowlevel.checkpoint()
        self._tokens.pop(resource, None)

    async def get_client(self, issuer: str) -> ClientRegistration | None:
        await trio.lowlevel.checkpoint()
        return self._clients.get(issuer)

    async def set_client(self, issuer: str, client: ClientRegistration) -> None:
        await trio.lowlevel.checkpoint()
        self._clients[issuer] = client

    async def delete_client(self, issuer: str) -> None:
        await trio.lowlevel.checkpoint()
        self._clients.pop(issuer, None)


class FileTokenStore:
    """A :class:`TokenStore` in ``directory``: ``server-<digest>.json`` per server resource and
    ``client-<digest>.json`` per issuer (the digest is of the key, so no URL reaches a file
    name). The directory is made with mode 0700 and each file written with mode 0600, to a
    temporary file first and then renamed over the old one, so a crash never leaves half a
    file. A damaged file reads as absent (the flow then authorizes afresh)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    def _path(self, kind: str, key: str) -> Path:
        digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]
        return self.directory / f"{kind}-{digest}.json"

    async def _read(self, kind: str, key: str) -> Any:
        return await trio.to_thread.run_sync(self._read_sync, self._path(kind, key), key)

    async def _write(self, kind: str, key: str, value: Any) -> None:
        payload = {"key": key, "value": value}
        await trio.to_thread.run_sync(self._write_sync, self._path(kind, key), payload)

    async def _delete(self, kind: str, key: str) -> None:
        await trio.to_thread.run_sync(self._path(kind, key).unlink, True)

    @staticmethod
    def _read_sync(path: Path, key: str) -> Any:
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("key") != key:
            return None
        return data.get("value")

    def _write_sync(self, path: Path, payload: Any) -> None:
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        mode = stat.S_IMODE(self.directory.stat().st_mode)
        if mode & 0o077:
            os.chmod(self.directory, 0o700)
        fd, temporary = tempfile.mkstemp(dir=self.directory, prefix=".tmp-", suffix=".json")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                json.dump(payload, file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    async def get_tokens(self, resource: str) -> StoredTokens | None:
        value = await self._read("server", resource)
        try:
            return None if value is None else StoredTokens.from_json(value)
        except OAuthError:
            return None

    async def set_tokens(self, resource: str, tokens: StoredTokens) -> None:
        await self._write("server", resource, tokens.to_json())

    async def delete_tokens(self, resource: str) -> None:
        await self._delete("server", resource)

    async def get_client(self, issuer: str) -> ClientRegistration | None:
        value = await self._read("client", issuer)
        try:
            return None if value is None else ClientRegistration.from_json(value)
        except OAuthError:
            return None

    async def set_client(self, issuer: str, client: ClientRegistration) -> None:
        await self._write("client", issuer, client.to_json())

    async def delete_client(self, issuer: str) -> None:
        await self._delete("client", issuer)
