"""The one exception of the OAuth client flow."""

from __future__ import annotations

from ..protocol._errors import MCPError


class OAuthError(MCPError):
    """Authorization failed; ``step`` says where.

    Steps: ``"discovery"`` (Protected Resource Metadata), ``"metadata"`` (authorization-server
    metadata), ``"registration"``, ``"authorization"`` (the browser step and its redirect),
    ``"token"`` (the code exchange), ``"refresh"``, ``"dpop"``, ``"store"``, and
    ``"unavailable"``: the server wants a bearer token and offers no way to get one (no
    Protected Resource Metadata, no authorization server metadata, nothing at the 2025-03-26
    default registration endpoint), as a server checking fixed tokens does; the token has to
    come from elsewhere, in an ``Authorization`` header. ``error`` is the authorization
    server's OAuth error code when it gave one (``invalid_grant``, say); ``realm`` the realm of
    the server's challenge, when it named one. The message names the step and never carries a
    token or a secret.
    """

    def __init__(
        self, step: str, message: str, *, error: str | None = None, realm: str | None = None
    ) -> None:
        self.step = step
        self.message = message
        self.error = error
        self.realm = realm
        super().__init__(f"OAuth {step} failed: {message}")
