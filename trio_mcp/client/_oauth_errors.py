"""The one exception every OAuth step raises: :class:`OAuthError`, naming the step."""

from __future__ import annotations

from ..protocol._errors import MCPError


class OAuthError(MCPError):
    """An OAuth step failed: ``step`` names it ("discovery", "metadata", "token", "dpop", ...),
    ``error`` is the authorization server's OAuth error code when it gave one.

    The message never carries a token or a secret.
    """

    def __init__(self, step: str, message: str, *, error: str | None = None) -> None:
        self.step = step
        self.error = error
        self.message = message
        super().__init__(f"OAuth {step} failed: {message}")
