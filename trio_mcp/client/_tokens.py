"""What a token endpoint grants: :class:`TokenSet`."""

from __future__ import annotations

from typing import Any

import attrs

from ._oauth_errors import OAuthError

#: The token types the client knows how to present, by their lower-cased name.
_TOKEN_TYPES = {"bearer": "Bearer", "dpop": "DPoP"}


@attrs.frozen
class TokenSet:
    """An access token and what came with it; ``expires_at`` is wall-clock seconds."""

    access_token: str = attrs.field(repr=False)
    token_type: str = "Bearer"  # "Bearer" or "DPoP", as the AS said
    expires_at: float | None = None  # time.time() seconds; None: unknown
    refresh_token: str | None = attrs.field(default=None, repr=False)
    scope: str | None = None  # as granted, space-separated

    @classmethod
    def from_response(cls, body: dict[str, Any], *, now: float) -> TokenSet:
        """The token set of a successful token response (RFC 6749 §5.1), its types checked."""
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise OAuthError("token", "the token response has no access_token string")
        kind = body.get("token_type")
        if not isinstance(kind, str) or kind.lower() not in _TOKEN_TYPES:
            raise OAuthError("token", "the token response has no Bearer or DPoP token_type")
        expires_in = body.get("expires_in")
        if expires_in is not None and (
            isinstance(expires_in, bool) or not isinstance(expires_in, int | float)
        ):
            raise OAuthError("token", "the token response's expires_in is not a number")
        refresh = body.get("refresh_token")
        if refresh is not None and not isinstance(refresh, str):
            raise OAuthError("token", "the token response's refresh_token is not a string")
        scope = body.get("scope")
        if scope is not None and not isinstance(scope, str):
            raise OAuthError("token", "the token response's scope is not a string")
        return cls(
            access_token=token,
            token_type=_TOKEN_TYPES[kind.lower()],
            expires_at=None if expires_in is None else now + float(expires_in),
            refresh_token=refresh,
            scope=scope,
        )
