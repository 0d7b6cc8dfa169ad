"""An HTTP API served from its OpenAPI 3.x document: each operation a tool, a resource or a
resource template (``Server.from_openapi``, ``trio-mcp serve --openapi``; docs/openapi.md)."""

from ._document import OpenApiError
from ._routes import RESOURCES_FOR_GETS, Route
from ._server import server_from_openapi

__all__ = ["RESOURCES_FOR_GETS", "OpenApiError", "Route", "server_from_openapi"]
