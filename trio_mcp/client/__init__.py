"""The client side: ``open_client`` and the ``Client`` it yields."""

from ._client import Client, InitializeError, PaginationError, open_client

__all__ = ["Client", "InitializeError", "PaginationError", "open_client"]
