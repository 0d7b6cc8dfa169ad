"""What the token tests share: a clock they move, a real httpx client that counts what it
fetches, and the JWT surgery of the attacks (a header changed with the signature kept, an HMAC
signature made with a key anyone can read)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx
import orjson


@attrs.define
class Clock:
    """A verifier's or policy's clock, in Unix seconds: the real time until a test moves it."""

    now: float = attrs.Factory(time.time)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@asynccontextmanager
async def counting_client() -> AsyncIterator[tuple[httpx.AsyncClient, Counter[str]]]:
    """A real httpx client that counts the paths it requests."""
    seen: Counter[str] = Counter()

    async def record(request: httpx.Request) -> None:
        seen[request.url.path] += 1

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as http:
        yield http, seen


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def header_of(token: str) -> dict[str, Any]:
    header: dict[str, Any] = json.loads(unb64(token.split(".")[0]))
    return header


def claims_of(token: str) -> dict[str, Any]:
    claims: dict[str, Any] = json.loads(unb64(token.split(".")[1]))
    return claims


def with_header(token: str, **changes: Any) -> str:
    """The token with its header changed and its signature kept (so no longer valid)."""
    _, payload, signature = token.split(".")
    header = header_of(token) | changes
    return ".".join((b64(orjson.dumps(header)), payload, signature))


def hmac_signed(token: str, secret: bytes, alg: str = "HS256") -> str:
    """The token's claims under an HMAC signature made with ``secret``."""
    header = b64(orjson.dumps(header_of(token) | {"alg": alg}))
    signing_input = f"{header}.{token.split('.')[1]}".encode()
    digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384}[alg]
    return f"{header}.{token.split('.')[1]}.{b64(hmac.new(secret, signing_input, digest).digest())}"
