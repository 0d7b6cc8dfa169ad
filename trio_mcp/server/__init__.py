"""The server side: ``Server``, its decorators, the ``Context`` handlers receive, and the protocols
of the stores it needs with their in-memory versions.

Nothing here imports HTTP, hypercorn, Redis or JOSE: the ASGI binding is :mod:`trio_mcp.http`,
the token verifiers :mod:`trio_mcp.auth`, the Redis stores :mod:`trio_mcp.redis`, the tasks
extension :mod:`trio_mcp.tasks` (added through :class:`Extension`, the seam every extension
plugs into).
"""

from ..protocol._errors import InvalidAnswer
from ._bus import BusError, BusEvent, LocalBus, NotificationBus
from ._card import (
    CARD_MEDIA_TYPE,
    CARD_META_KEY,
    CARD_SCHEMA,
    SERVER_JSON_SCHEMA,
    ServerCardError,
    server_card,
    server_json,
)
from ._connection import ResourceNotFound, ServerConnection, ToolError
from ._context import CapabilityMissing, Context, Elicited, NestedRequestError
from ._extensions import Extension, ExtensionHost
from ._lifespan import LifespanFailed
from ._media import Audio, File, Image
from ._middleware import MiddlewareContext, MiddlewareServer
from ._mount import Mount
from ._principal import Auth, InvalidToken, Principal, TokenVerifier, VerifierUnavailable
from ._registry import RequestRecord
from ._server import Server
from ._session_state import (
    STATE_META_KEY,
    MemorySessionStateStore,
    SessionState,
    SessionStateError,
    SessionStateFull,
    SessionStateStore,
    SessionStateUnavailable,
)
from ._state import ConnectionState
from ._state_claims import MemoryStateClaims, StateClaims, StateClaimsUnavailable
from ._transform import ArgTransform

__all__ = [
    "CARD_MEDIA_TYPE",
    "CARD_META_KEY",
    "CARD_SCHEMA",
    "SERVER_JSON_SCHEMA",
    "STATE_META_KEY",
    "ArgTransform",
    "Audio",
    "Auth",
    "BusError",
    "BusEvent",
    "CapabilityMissing",
    "ConnectionState",
    "Context",
    "Elicited",
    "Extension",
    "ExtensionHost",
    "File",
    "Image",
    "InvalidAnswer",
    "InvalidToken",
    "LifespanFailed",
    "LocalBus",
    "MemorySessionStateStore",
    "MemoryStateClaims",
    "MiddlewareContext",
    "MiddlewareServer",
    "Mount",
    "NestedRequestError",
    "NotificationBus",
    "Principal",
    "RequestRecord",
    "ResourceNotFound",
    "Server",
    "ServerCardError",
    "ServerConnection",
    "SessionState",
    "SessionStateError",
    "SessionStateFull",
    "SessionStateStore",
    "SessionStateUnavailable",
    "StateClaims",
    "StateClaimsUnavailable",
    "TokenVerifier",
    "ToolError",
    "VerifierUnavailable",
    "server_card",
    "server_json",
]
