"""MCP Apps (SEP-1865, ``io.modelcontextprotocol/ui``), in a room of its own: interactive HTML
views a host renders for a tool's results.

The server half: :class:`Apps` (``Apps(server)``: ``@apps.resource("ui://...")`` or
``apps.html(...)`` for a UI resource with its CSP, permissions and domain metadata,
``@apps.tool(ui=..., visibility=...)`` for a tool linked to it) and :func:`client_supports_apps`.
The client half: :class:`ClientApps` (``open_client(..., extensions=[ClientApps()])``),
:func:`server_apps`, :func:`tool_ui`, :func:`model_tools` and :func:`read_app`, which fetches a
tool's UI and checks it (:class:`AppNotFound`, :class:`InvalidApp`). The wire values
(:class:`Csp`, :class:`Permissions`, :class:`AppMeta`, :class:`ToolUi`) are shared.
"""

from ._client import (
    AppError,
    AppNotFound,
    AppView,
    ClientApps,
    InvalidApp,
    model_tools,
    read_app,
    server_apps,
    tool_ui,
)
from ._meta import APP_MIME_TYPE, UI_EXTENSION, AppMeta, Csp, Permissions, ToolUi, declares_apps
from ._server import Apps, ToolOptions, client_supports_apps

__all__ = [
    "APP_MIME_TYPE",
    "UI_EXTENSION",
    "AppError",
    "AppMeta",
    "AppNotFound",
    "AppView",
    "Apps",
    "ClientApps",
    "Csp",
    "InvalidApp",
    "Permissions",
    "ToolOptions",
    "ToolUi",
    "client_supports_apps",
    "declares_apps",
    "model_tools",
    "read_app",
    "server_apps",
    "tool_ui",
]
