"""The client side: ``open_client`` and the ``Client`` it yields, and OAuth for it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._client import (
    Client,
    DiscoverInfo,
    InitializeError,
    PaginationError,
    RequestOptions,
    Subscription,
    open_client,
)
from ._extensions import ClientExtension
from ._oauth_errors import OAuthError
from ._target import Command, HttpTarget, Servable, Target, WebSocketTarget
from ._tokens import (
    ClientRegistration,
    FileTokenStore,
    MemoryTokenStore,
    StoredTokens,
    TokenSet,
    TokenStore,
)

if TYPE_CHECKING:
    from ._grants import (
        ClientAuth,
        ClientCredentials,
        DPoPSigner,
        EnterpriseManaged,
        Grant,
        GrantRequest,
        WorkloadIdentity,
    )
    from ._jose import DPoPKey
    from ._oauth import OAuth

# OAuth and the grants run on httpx: imported on first use, so that a stdio client never loads
# httpx (nor joserfc, for DPoPKey).
_LAZY = {
    "OAuth": "trio_mcp.client._oauth",
    "DPoPKey": "trio_mcp.client._jose",
    **dict.fromkeys(
        (
            "ClientAuth",
            "ClientCredentials",
            "DPoPSigner",
            "EnterpriseManaged",
            "Grant",
            "GrantRequest",
            "HttpTarget",
            "WorkloadIdentity",
        ),
        "trio_mcp.client._grants",
    ),
}

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


__all__ = [
    "Client",
    "ClientAuth",
    "ClientCredentials",
    "ClientExtension",
    "ClientRegistration",
    "Command",
    "DPoPKey",
    "DPoPSigner",
    "DiscoverInfo",
    "EnterpriseManaged",
    "FileTokenStore",
    "Grant",
    "GrantRequest",
    "HttpTarget",
    "InitializeError",
    "MemoryTokenStore",
    "OAuth",
    "OAuthError",
    "PaginationError",
    "RequestOptions",
    "Servable",
    "StoredTokens",
    "Subscription",
    "Target",
    "TokenSet",
    "TokenStore",
    "WebSocketTarget",
    "WorkloadIdentity",
    "open_client",
]
