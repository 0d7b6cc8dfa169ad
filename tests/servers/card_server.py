"""A server whose card has everything to say: a registry name, a protected resource with an
authorization server and scopes, an extension it declares, a scoped tool and a mounted child.

``trio-mcp card tests/servers/card_server.py`` prints its card; the tests also build it in
process (:func:`card_server`) and serve it over HTTP.
"""

from __future__ import annotations

from trio_mcp import Auth, Principal, Server, StaticTokenVerifier
from trio_mcp.protocol import JSONObject
from trio_mcp.server import Extension, ExtensionHost

NAME = "com.example/weather"
RESOURCE = "https://mcp.example.com/mcp"
ISSUER = "https://issuer.example.com"
EXTENSION = "com.example/alerts"
READER = Principal("reader", "client-1", frozenset({"weather:read"}), issuer=ISSUER)
NOBODY = Principal("nobody", "client-2", frozenset(), issuer=ISSUER)
TOKENS = {"reader-token-1234": READER, "nobody-token-5678": NOBODY}


class Alerts(Extension):
    """An extension that only announces itself (its settings are what a card shows)."""

    name = EXTENSION

    def capability(self, host: ExtensionHost) -> JSONObject | None:
        return {"regions": ["eu", "us"]}


def card_server() -> Server:
    server = Server(
        NAME,
        "2.1.0",
        title="Weather",
        description="Forecasts and alerts for any city.",
        website_url="https://weather.example.com",
        auth=Auth(
            StaticTokenVerifier(TOKENS),
            resource=RESOURCE,
            authorization_servers=[ISSUER],
            required_scopes=["weather:read"],
        ),
        extensions=[Alerts()],
    )

    @server.tool()
    def forecast(city: str) -> str:
        """Tomorrow's forecast for a city."""
        return f"sunny in {city}"

    @server.tool(scopes=["weather:admin"])
    def purge() -> str:
        """Forget every cached forecast."""
        return "purged"

    @server.resource("weather://cities", mime_type="application/json")
    def cities() -> str:
        """The cities we know."""
        return '["Paris"]'

    maps = Server("maps")

    @maps.tool()
    def locate(city: str) -> str:
        """Where a city is."""
        return f"{city}: 48.85N 2.35E"

    server.mount(maps, prefix="maps")
    return server


server = card_server()
