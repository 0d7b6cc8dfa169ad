"""``requestState`` sealing (2026-07-28): the state a server hands a client with an
``InputRequiredResult`` and gets back on the retry, sealed with an HMAC so that it cannot be
forged, replayed for another method or target, or kept forever.

The time is passed in (``now``, in seconds): a state crosses processes (a retry may reach
another worker), so the server passes wall-clock time, which every worker shares.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Any

import orjson


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class StateSealer:
    """Seals ``requestState`` with HMAC-SHA256 under a server key, with an expiry.

    The state is bound to the method and its target (tool, prompt or resource), so it cannot be
    replayed elsewhere. It expires ``ttl`` seconds after ``now`` at sealing.
    """

    def __init__(self, key: bytes | None = None, *, ttl: float = 600.0) -> None:
        self.key = key if key is not None else secrets.token_bytes(32)
        self.ttl = ttl

    def seal(self, method: str, target: str, payload: dict[str, Any], *, now: float) -> str:
        body = orjson.dumps({"m": method, "t": target, "exp": now + self.ttl, "p": payload})
        mac = hmac.new(self.key, body, hashlib.sha256).digest()
        return f"{_b64(body)}.{_b64(mac)}"

    def open(self, method: str, target: str, token: object, *, now: float) -> dict[str, Any] | None:
        """The payload of a state we sealed for this method and target, unexpired at ``now``,
        or None."""
        if not isinstance(token, str) or token.count(".") != 1:
            return None
        body_text, mac_text = token.split(".")
        try:
            body, mac = _unb64(body_text), _unb64(mac_text)
        except (ValueError, UnicodeError):
            return None
        expected = hmac.new(self.key, body, hashlib.sha256).digest()
        if not hmac.compare_digest(mac, expected):
            return None
        try:
            state = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(state, dict) or state.get("m") != method or state.get("t") != target:
            return None
        expiry = state.get("exp")
        if not isinstance(expiry, int | float) or expiry < now:
            return None
        payload = state.get("p")
        return payload if isinstance(payload, dict) else None
