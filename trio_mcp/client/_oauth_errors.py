"""The one exception of the OAuth client flow."""

from __future__ import annotations

from ..protocol._errors import MCPError


class OAuthError(MCPError):
    """Authorization failed; ``step`` says where.

    Steps: ``"discovery"`` (Protected Resource Metadata), ``"metadata"`` (authorization-server
    metadata), ``"registration"``, ``"authorization"`` (the browser step and its redirect),
    ``"token"`` (the code exchange), ``"refresh"``, ``"dpop"``, ``"store"``. ``error`` is the
    authorization server's OAuth error code when it gave one (``invalid_grant``, say). The
    message names the step and never carries a token or a secret.
    """

    def __init__(self, step: str, message: str, *, error: str | None = None) -> None:
        self.step = step
        self.message = message
        self.error = error
        super().__init__(f"OAuth {step} failed: {message}")
