"""Servers the MCP Apps tests share."""

from __future__ import annotations

from trio_mcp import Server
from trio_mcp.apps import Apps, Csp, Permissions, client_supports_apps
from trio_mcp.server import Context

VIEW = "ui://weather/dashboard"
VIEW_HTML = "<!doctype html><html><body><div id=app>weather</div></body></html>"
VIEW_META = {
    "csp": {"connectDomains": ["https://api.weather.example"]},
    "permissions": {"geolocation": {}},
    "domain": "weather.apps.example",
    "prefersBorder": True,
}


def weather_server() -> Server:
    """A server with one UI resource and a tool of each visibility."""
    server = Server("weather", "1.0.0")
    apps = Apps(server)

    @apps.resource(
        VIEW,
        name="dashboard",
        description="The forecast, drawn",
        csp=Csp(connect_domains=["https://api.weather.example"]),
        permissions=Permissions(geolocation=True),
        domain="weather.apps.example",
        prefers_border=True,
    )
    async def dashboard() -> str:
        return VIEW_HTML

    @apps.tool(ui=VIEW)
    async def forecast(city: str, ctx: Context) -> str:
        """The forecast for a city."""
        drawn = " (drawn by the app)" if client_supports_apps(ctx) else ""
        return f"{city}: sunny, 21 C{drawn}"

    @apps.tool(ui=VIEW, visibility=["app"])
    async def refresh(city: str) -> dict[str, int]:
        """Fetch fresh numbers: the app calls this, the model never sees it."""
        return {"temperature": 21}

    @apps.tool(visibility=["model"])
    async def summary() -> str:
        return "summary for the model only"

    @server.tool()
    async def plain() -> str:
        return "plain"

    return server
