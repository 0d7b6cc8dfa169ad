"""``requestState`` sealing (2026-07-28): the state a server hands a client with an
``InputRequiredResult`` and gets back on the retry.

A state is encrypted and authenticated with AES-256-GCM, so a client can neither read it nor
change it, and it opens only for the request it was issued for: its method, its target (tool,
prompt or resource) and a digest of its arguments, and the principal it was issued to (the
``subject``; empty without authorization), which are the associated data. The expiry travels
inside the ciphertext.

Wire form: ``v1.<key id>.<base64url(nonce || ciphertext || tag)>``. The version names the format;
the key id names the key it was sealed under, so a key ring can open states sealed under an
older key. A fresh random 96-bit nonce is drawn for every seal.

The time is passed in (``now``, in seconds): a state crosses processes (a retry may reach
another worker), so the server passes wall-clock time, which every worker shares.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

#: The format of the states sealed here (the first field of the wire form).
VERSION = "v1"
#: A token longer than this (in characters) is refused before anything is decoded.
MAX_STATE_SIZE = 64 * 1024
#: The shortest ``state_key`` accepted: a state is only as strong as its key.
MIN_KEY_SIZE = 16
_NONCE_SIZE = 12
_HKDF_INFO = b"trio-mcp requestState v1 AES-256-GCM"
_KEY_ID_INFO = b"trio-mcp requestState key id"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    """Strict: only the base64url alphabet, and only the one spelling :func:`_b64` writes
    (no stray characters skipped, no spare low bits), so one token is one byte string."""
    data = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    if _b64(data) != text:
        raise ValueError("not the canonical base64url spelling")
    return data


def arguments_digest(arguments: object) -> str:
    """SHA-256 of the canonical JSON of a request's arguments (keys sorted at every level, no
    spaces); absent arguments (``None``) count as ``{}``."""
    if arguments is None:
        arguments = {}
    try:
        canonical = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not what orjson encodes (an integer over 64 bits, say): still canonical
        canonical = json.dumps(
            arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr
        ).encode()
    return hashlib.sha256(canonical).hexdigest()


def derive_key(secret: bytes) -> bytes:
    """The AES-256 key for a ``state_key``: HKDF-SHA256 over it (no salt, a fixed label), so a
    key of any length at least :data:`MIN_KEY_SIZE` bytes gives a full-strength key."""
    if not isinstance(secret, bytes | bytearray):
        raise TypeError("state_key must be bytes")
    if len(secret) < MIN_KEY_SIZE:
        raise ValueError(f"state_key must be at least {MIN_KEY_SIZE} bytes (32 random ones, say)")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO)
    return hkdf.derive(bytes(secret))


def key_id(secret: bytes) -> str:
    """A short public name of a key (an HMAC of a fixed label under it: it reveals nothing of
    the key), written in every state sealed under it."""
    return _b64(hmac.new(bytes(secret), _KEY_ID_INFO, hashlib.sha256).digest()[:6])


def _associated(kid: str, method: str, target: str, arguments: object, subject: str) -> bytes:
    return orjson.dumps([VERSION, kid, method, target, arguments_digest(arguments), subject])


class StateSealer:
    """Seals ``requestState`` under a server key (random unless given), with an expiry.

    A state opens only for the method, target, arguments and subject it was sealed for, under
    the key it was sealed with, until ``ttl`` seconds after ``now`` at sealing.
    """

    def __init__(
        self, key: bytes | None = None, *, ttl: float = 600.0, max_size: int = MAX_STATE_SIZE
    ) -> None:
        self.key = key if key is not None else secrets.token_bytes(32)
        self.ttl = ttl
        self.max_size = max_size
        aead = AESGCM(derive_key(self.key))
        self.key_id = key_id(self.key)
        # By key id: the one key today; a key ring adds the keys it still accepts.
        self._keys: dict[str, AESGCM] = {self.key_id: aead}

    def seal(
        self,
        method: str,
        target: str,
        arguments: object,
        payload: dict[str, Any],
        *,
        now: float,
        subject: str = "",
    ) -> str:
        """A state for this request; ``ValueError`` if it would be over ``max_size``."""
        plaintext = orjson.dumps({"exp": now + self.ttl, "p": payload})
        nonce = secrets.token_bytes(_NONCE_SIZE)
        aad = _associated(self.key_id, method, target, arguments, subject)
        sealed = self._keys[self.key_id].encrypt(nonce, plaintext, aad)
        token = f"{VERSION}.{self.key_id}.{_b64(nonce + sealed)}"
        if len(token) > self.max_size:
            raise ValueError(
                f"the requestState would be {len(token)} characters, over the limit of "
                f"{self.max_size}: keep less in ctx.state"
            )
        return token

    def open(
        self,
        method: str,
        target: str,
        arguments: object,
        token: object,
        *,
        now: float,
        subject: str = "",
    ) -> dict[str, Any] | None:
        """The payload of a state we sealed for this very request, unexpired at ``now``, or
        None (too large, malformed, altered, foreign, sealed under an unknown key, expired)."""
        if not isinstance(token, str) or len(token) > self.max_size or token.count(".") != 2:
            return None
        version, kid, body = token.split(".")
        aead = self._keys.get(kid)
        if version != VERSION or aead is None:
            return None
        try:
            raw = _unb64(body)
        except ValueError:  # binascii.Error included
            return None
        if len(raw) < _NONCE_SIZE + 16:
            return None
        nonce, sealed = raw[:_NONCE_SIZE], raw[_NONCE_SIZE:]
        try:
            aad = _associated(kid, method, target, arguments, subject)
            plaintext = aead.decrypt(nonce, sealed, aad)
        except InvalidTag:
            return None
        try:
            state = orjson.loads(plaintext)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(state, dict):
            return None
        expiry = state.get("exp")
        if not isinstance(expiry, int | float) or expiry < now:
            return None
        payload = state.get("p")
        return payload if isinstance(payload, dict) else None
