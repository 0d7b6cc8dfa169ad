"""``requestState`` sealing (2026-07-28): the state a server hands a client with an
``InputRequiredResult`` and gets back on the retry.

A state is encrypted and authenticated with AES-256-GCM, so a client can neither read it nor
change it, and it opens only for the request it was issued for: the server it was issued by (the
``audience``), its method, its target (tool, prompt or resource) and a digest of its arguments,
and the principal it was issued to (the ``subject``; empty without authorization), which are the
associated data. The expiry travels inside the ciphertext.

Wire form: ``v1.<key id>.<base64url(nonce || ciphertext || tag)>``. The version names the format;
the key id names the key it was sealed under. A sealer holds a key ring: the first key seals,
every key opens, so keys rotate without refusing the states already out (add the new key first,
drop the old one once its states have expired). A fresh random 96-bit nonce is drawn for every
seal.

Keys from configuration are text: :func:`decode_key` reads one (hex or base64url),
:func:`keys_from_list` a comma-separated list, :func:`keys_from_file` the lines of a key file.
Their errors name where the key came from and never hold the key.

The time is passed in (``now``, in seconds): a state crosses processes (a retry may reach
another worker), so the server passes wall-clock time, which every worker shares.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Sequence
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
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")
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


def decode_key(text: str) -> bytes:
    """A key written as text: hex (an even number of hex digits) when it is only hex digits,
    else base64url (``-`` and ``_``, padding optional). ``ValueError`` when it is neither or
    shorter than :data:`MIN_KEY_SIZE` bytes; the message never holds the key."""
    text = text.strip()
    if not text:
        raise ValueError("the key is empty")
    if _HEX.fullmatch(text):
        key = bytes.fromhex(text)
    elif _BASE64URL.fullmatch(text) and len(text.rstrip("=")) % 4 != 1:
        key = base64.urlsafe_b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4))
    else:
        raise ValueError(
            "the key is neither hex nor base64url (make one with: openssl rand -hex 32)"
        )
    if len(key) < MIN_KEY_SIZE:
        raise ValueError(
            f"the key is {len(key)} bytes, under the {MIN_KEY_SIZE} needed (32 random ones, say)"
        )
    return key


def _distinct(keys: list[bytes], places: list[str], where: str) -> list[bytes]:
    seen: dict[bytes, str] = {}
    for key, place in zip(keys, places, strict=True):
        if key in seen:
            raise ValueError(f"{where}: {place} repeats {seen[key]}")
        seen[key] = place
    if not keys:
        raise ValueError(f"{where} holds no key")
    return keys


def keys_from_list(text: str, where: str) -> list[bytes]:
    """The keys of a comma-separated list (an environment variable's value), newest first;
    ``where`` names the list in the errors (``TRIO_MCP_STATE_KEYS: key 2: ...``)."""
    keys: list[bytes] = []
    places: list[str] = []
    for number, item in enumerate(text.split(","), 1):
        try:
            keys.append(decode_key(item))
        except ValueError as exc:
            raise ValueError(f"{where}: key {number}: {exc}") from None
        places.append(f"key {number}")
    return _distinct(keys, places, where)


def keys_from_file(text: str, where: str) -> list[bytes]:
    """The keys of a key file, newest first: one key per line; blank lines and lines starting
    with ``#`` are skipped. ``where`` names the file in the errors (``keys.txt, line 3: ...``)."""
    keys: list[bytes] = []
    places: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            keys.append(decode_key(line))
        except ValueError as exc:
            raise ValueError(f"{where}, line {number}: {exc}") from None
        places.append(f"line {number}")
    return _distinct(keys, places, where)


def _associated(
    kid: str, audience: str, method: str, target: str, arguments: object, subject: str
) -> bytes:
    return orjson.dumps(
        [VERSION, kid, audience, method, target, arguments_digest(arguments), subject]
    )


class StateSealer:
    """Seals ``requestState`` under a key ring (one random key unless given), with an expiry.

    ``keys``: one key (bytes) or several, newest first; the first seals, every one opens, so a
    rotation adds the new key in front and drops the old one once the states sealed under it
    have expired (``ttl``). A state opens only for the audience, method, target, arguments and
    subject it was sealed for, under a key of the ring, until ``ttl`` seconds after ``now`` at
    sealing.
    """

    def __init__(
        self,
        keys: bytes | Sequence[bytes] | None = None,
        *,
        ttl: float = 600.0,
        max_size: int = MAX_STATE_SIZE,
    ) -> None:
        #: Whether the ring is one random key drawn here (which no other process has).
        self.ephemeral = keys is None
        if keys is None:
            ring = [secrets.token_bytes(32)]
        elif isinstance(keys, bytes | bytearray):
            ring = [bytes(keys)]
        elif isinstance(keys, str):
            raise TypeError("state keys must be bytes (decode_key reads one written as text)")
        else:
            ring = list(keys)
            if not ring:
                raise ValueError("a key ring needs at least one key")
        self._keys: dict[str, AESGCM] = {}
        for secret in ring:
            aead = AESGCM(derive_key(secret))
            kid = key_id(secret)
            if kid in self._keys:
                raise ValueError("the key ring holds the same key twice")
            self._keys[kid] = aead
        #: The keys, newest first: the first seals.
        self.keys: tuple[bytes, ...] = tuple(bytes(secret) for secret in ring)
        self.key = self.keys[0]
        self.key_id = key_id(self.key)
        self.ttl = ttl
        self.max_size = max_size

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of the ring's keys, newest first (the first is :attr:`key_id`)."""
        return tuple(self._keys)

    def seal(
        self,
        method: str,
        target: str,
        arguments: object,
        payload: dict[str, Any],
        *,
        now: float,
        subject: str = "",
        audience: str = "",
    ) -> str:
        """A state for this request, sealed under the newest key; ``ValueError`` if it would be
        over ``max_size``."""
        plaintext = orjson.dumps({"exp": now + self.ttl, "p": payload})
        nonce = secrets.token_bytes(_NONCE_SIZE)
        aad = _associated(self.key_id, audience, method, target, arguments, subject)
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
        audience: str = "",
    ) -> dict[str, Any] | None:
        """The payload of a state we sealed for this very request, unexpired at ``now``, or
        None (too large, malformed, altered, foreign, sealed under a key not in the ring or for
        another audience, expired)."""
        opened = self.open_with_expiry(
            method, target, arguments, token, now=now, subject=subject, audience=audience
        )
        return opened[0] if opened is not None else None

    def open_with_expiry(
        self,
        method: str,
        target: str,
        arguments: object,
        token: object,
        *,
        now: float,
        subject: str = "",
        audience: str = "",
    ) -> tuple[dict[str, Any], float] | None:
        """As :meth:`open`, with the state's expiry (on the ``now`` clock): what a single-use
        claim needs to lapse when the state would have."""
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
            aad = _associated(kid, audience, method, target, arguments, subject)
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
        return (payload, float(expiry)) if isinstance(payload, dict) else None


def state_digest(token: str) -> str:
    """SHA-256 of a sealed state, in hex: the name of its single-use claim in a shared store,
    which never holds the state itself."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()
