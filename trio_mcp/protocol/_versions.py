"""Protocol revisions, the era each belongs to, and handshake negotiation.

Two eras share one wire: the handshake era (a session opened by ``initialize``) and the modern era
(every request carries its version in ``params._meta``). ``initialize`` can only ever negotiate a
handshake version, so a client asking it for a modern one is answered with a counter-offer.
"""

from __future__ import annotations

import enum
from typing import Any

V2024_11_05 = "2024-11-05"
V2025_03_26 = "2025-03-26"
V2025_06_18 = "2025-06-18"
V2025_11_25 = "2025-11-25"
V2026_07_28 = "2026-07-28"

#: Oldest first: the order is what "at least" means (never compare version strings).
HANDSHAKE_VERSIONS: tuple[str, ...] = (V2024_11_05, V2025_03_26, V2025_06_18, V2025_11_25)
MODERN_VERSIONS: tuple[str, ...] = (V2026_07_28,)
KNOWN_VERSIONS: tuple[str, ...] = HANDSHAKE_VERSIONS + MODERN_VERSIONS
LATEST_HANDSHAKE_VERSION = V2025_11_25
LATEST_MODERN_VERSION = V2026_07_28


class Era(enum.Enum):
    HANDSHAKE = "handshake"
    MODERN = "modern"


def is_at_least(version: str, minimum: str) -> bool:
    """Whether a known ``version`` is ``minimum`` or newer, by position in the known list."""
    return KNOWN_VERSIONS.index(version) >= KNOWN_VERSIONS.index(minimum)


def check_pin(version: str | None) -> str:
    """Validate a server's or client's pinned handshake version; None means the latest."""
    if version is None:
        return LATEST_HANDSHAKE_VERSION
    if version in MODERN_VERSIONS:
        raise ValueError(
            f"{version!r} is a modern protocol version and cannot be pinned here: modern versions "
            "are not negotiated through initialize. Remove the setting; modern clients reach the "
            "server through per-request metadata and server/discover."
        )
    if version not in HANDSHAKE_VERSIONS:
        raise ValueError(
            "protocol_version must be one of " + ", ".join(reversed(HANDSHAKE_VERSIONS))
        )
    return version


def negotiate(requested: object, pin: str | None = None) -> str:
    """The version an ``initialize`` result carries for the version a client asked for.

    A handshake version the client asks for is echoed; anything else (a modern version, an
    unknown one, or garbage) gets the server's pin, or the latest handshake version.
    """
    if isinstance(requested, str) and requested in HANDSHAKE_VERSIONS:
        return requested
    return check_pin(pin)


# Fields of ``Implementation`` (serverInfo/clientInfo) and of InitializeResult, with the first
# version that defines each. Negotiating an older version drops what it does not know.
_IMPLEMENTATION_FIELDS_SINCE: dict[str, str] = {
    "title": V2025_06_18,
    "websiteUrl": V2025_06_18,
    "description": V2025_11_25,
    "icons": V2025_11_25,
}
_INITIALIZE_RESULT_FIELDS_SINCE: dict[str, str] = {
    "instructions": V2025_03_26,
}


def filter_implementation(info: dict[str, Any], version: str) -> dict[str, Any]:
    """Drop ``Implementation`` fields that ``version`` does not define."""
    return {
        key: value
        for key, value in info.items()
        if key not in _IMPLEMENTATION_FIELDS_SINCE
        or is_at_least(version, _IMPLEMENTATION_FIELDS_SINCE[key])
    }


def filter_initialize_result(result: dict[str, Any], version: str) -> dict[str, Any]:
    """Drop InitializeResult fields (and serverInfo fields) that ``version`` does not define."""
    out = {
        key: value
        for key, value in result.items()
        if key not in _INITIALIZE_RESULT_FIELDS_SINCE
        or is_at_least(version, _INITIALIZE_RESULT_FIELDS_SINCE[key])
    }
    if isinstance(out.get("serverInfo"), dict):
        out["serverInfo"] = filter_implementation(out["serverInfo"], version)
    return out
