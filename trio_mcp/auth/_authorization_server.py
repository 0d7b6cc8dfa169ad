"""The verifiers' calls to an authorization server: bounded in time and size, never redirected.

:class:`~trio_mcp.auth.JWTVerifier` fetches metadata and key sets here and
:class:`~trio_mcp.auth.IntrospectionVerifier` posts tokens here. Whatever goes wrong on the
way (no connection, a timeout, an answer too large or not JSON) is a
:class:`~trio_mcp.server.VerifierUnavailable`: the token could not be checked, which says
nothing about the token. No message names a request body, so an introspected token never
reaches one.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import trio

from ..server._principal import VerifierUnavailable

logger = logging.getLogger("trio_mcp.auth")

#: The largest metadata, key set or introspection answer read.
MAX_RESPONSE_BYTES = 1 << 20


def shown(url: str) -> str:
    """A URL for a message: scheme, host and path, never a query or user information."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"


class AuthServerCalls:
    """One verifier's way to an authorization server.

    ``http_client`` is the caller's (left open, its redirects not followed); without one, each
    call opens a client of its own, sharing one TLS context (creating that is the expensive
    part), so a verifier holds no connection between calls and needs no closing.
    """

    def __init__(
        self,
        *,
        http_client: httpx.AsyncClient | None,
        timeout: float,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self.http_client = http_client
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self._tls: ssl.SSLContext | None = None

    async def call(
        self,
        method: str,
        url: str,
        *,
        what: str,
        form: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, Any]:
        """The status and, for a 2xx, the JSON body (None otherwise) of one request. Raises
        :class:`VerifierUnavailable` when there is no usable answer; ``what`` names the
        document in that message."""
        logger.debug("authorization server: %s %s (%s)", method, shown(url), what)
        with trio.move_on_after(self.timeout) as bounded:
            try:
                if self.http_client is not None:
                    return await self._call(self.http_client, method, url, what, form, headers)
                if self._tls is None:
                    self._tls = httpx.create_ssl_context()
                async with httpx.AsyncClient(verify=self._tls, timeout=self.timeout) as http:
                    return await self._call(http, method, url, what, form, headers)
            except httpx.HTTPError as exc:
                raise VerifierUnavailable(
                    f"{what} could not be fetched from {shown(url)} ({type(exc).__name__})"
                ) from None
        assert bounded.cancelled_caught
        raise VerifierUnavailable(
            f"{what} did not arrive from {shown(url)} within {self.timeout:g} s"
        )

    async def _call(
        self,
        http: httpx.AsyncClient,
        method: str,
        url: str,
        what: str,
        form: Mapping[str, str] | None,
        headers: Mapping[str, str] | None,
    ) -> tuple[int, Any]:
        request_headers = {"Accept": "application/json", **(headers or {})}
        async with http.stream(
            method,
            url,
            data=dict(form) if form is not None else None,
            headers=request_headers,
            follow_redirects=False,
        ) as response:
            if not response.is_success:
                return response.status_code, None
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > self.max_response_bytes:
                    raise VerifierUnavailable(
                        f"{what} from {shown(url)} is larger than {self.max_response_bytes} bytes"
                    )
        try:
            return response.status_code, orjson.loads(body)
        except orjson.JSONDecodeError:
            raise VerifierUnavailable(f"{what} from {shown(url)} is not JSON") from None
