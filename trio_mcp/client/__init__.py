"""The client side: ``open_client`` and the ``Client`` it yields."""

from ._client import (
    Client,
    DiscoverInfo,
    InitializeError,
    PaginationError,
    RequestOptions,
    Subscription,
    open_client,
)
from ._target import Servable, Target

__all__ = [
    "Client",
    "DiscoverInfo",
    "InitializeError",
    "PaginationError",
    "RequestOptions",
    "Servable",
    "Subscription",
    "Target",
    "open_client",
]
