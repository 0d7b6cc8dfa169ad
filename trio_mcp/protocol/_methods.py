"""Method tables: which methods exist, which server capability gates them, which are cacheable."""

from __future__ import annotations

#: Client-to-server requests a server answers, and the server capability each one needs.
SERVER_REQUEST_CAPABILITY: dict[str, str | None] = {
    "initialize": None,
    "ping": None,
    "server/discover": None,
    "tools/list": "tools",
    "tools/call": "tools",
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "resources/subscribe": "resources",
    "resources/unsubscribe": "resources",
    "logging/setLevel": "logging",
    "completion/complete": "completions",
}

#: Server-to-client requests (a handler's questions to the client), and the client capability
#: each one needs.
CLIENT_REQUEST_CAPABILITY: dict[str, str] = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}

#: Methods a user cannot redefine with ``@server.method``: the requests a server answers
#: itself and the notifications it handles.
BUILTIN_METHODS: frozenset[str] = frozenset(
    {
        *SERVER_REQUEST_CAPABILITY,
        "server/discover",
        "subscriptions/listen",
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
    }
)

#: Requests that may be sent again, on a new session or over a new connection after a reset:
#: they change nothing on the server, or setting them twice is the same as once.
SAFE_TO_REPEAT = frozenset(
    {
        "ping",
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    }
)

#: Methods the 2026-07-28 revision removed.
MODERN_REMOVED: frozenset[str] = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)

#: Results that carry cache hints in the modern era.
CACHEABLE: frozenset[str] = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
