"""Fixed bearer tokens: the simplest verifier, for development, tests and a single operator."""

from __future__ import annotations

from collections.abc import Mapping

import attrs
import trio

from ..server import InvalidToken, Principal


class StaticTokenVerifier:
    """Fixed tokens, for development and tests: each maps to the principal it stands for.

    The tokens are this server's own, so their audience is not checked. Never use it with
    tokens anyone else can read.
    """

    def __init__(self, tokens: Mapping[str, Principal]) -> None:
        self._tokens = {
            token: attrs.evolve(principal, audience=None) for token, principal in tokens.items()
        }

    async def verify(self, token: str) -> Principal:
        await trio.lowlevel.checkpoint()
        principal = self._tokens.get(token)
        if principal is None:
            raise InvalidToken("unknown access token")
        return principal
