"""``ConnectionState``: the lifecycle of one server connection, and every rule that changes it.

Rule 1, as in h11's ``_state.py``: everything that affects the state machine and its transitions
lives here. The rest of the server reads the state and changes it only through these methods; each
refuses an illegal transition with the protocol error the peer is answered with. Sans-IO: nothing
here waits, reads, writes or looks at a clock; plain values in and out, tested without an event
loop.

A connection starts in no era. ``initialize`` puts it in the handshake era: the negotiated
version, the client's info and capabilities and the server capabilities it was told of are fixed
from then on. The first modern request that succeeds puts it in the modern era, where every
request carries its own version and capabilities and nothing is remembered between them. Neither
era ever gives way to the other, and neither can be entered twice.

Two settings are not eras: a connection with no way back to the client (stateless HTTP) refuses
the back channel, and the client's ``logging/setLevel`` decides which log messages it is sent.
"""

from __future__ import annotations

from ..protocol._envelope import PROTOCOL_VERSION_KEY
from ..protocol._errors import ProtocolError
from ..protocol._jsonrpc import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, JSONObject
from ..protocol._types import LOGGING_LEVELS, ClientCapabilities, Implementation
from ..protocol._versions import Era, negotiate

#: What is known of a client's capabilities before a handshake: nothing (frozen, so shared).
_NO_CLIENT_CAPABILITIES = ClientCapabilities()


class ConnectionState:
    """The lifecycle of one server connection: its era, what the handshake fixed, its settings."""

    def __init__(self, offered_version: str) -> None:
        #: The version answered to a client asking for one we do not speak, and the version of a
        #: connection that has had no handshake.
        self._offered_version = offered_version
        self._era: Era | None = None
        self._protocol_version = offered_version
        self._client_info: Implementation | None = None
        self._client_capabilities = _NO_CLIENT_CAPABILITIES
        self._announced: JSONObject = {}
        self._back_channel = True
        self._log_level: str | None = None

    # -- what it is ----------------------------------------------------------------------------

    @property
    def era(self) -> Era | None:
        """The era this connection is in; None until ``initialize`` or a modern request."""
        return self._era

    @property
    def initialized(self) -> bool:
        """True once the handshake era began (by ``initialize``, or assumed on stateless HTTP)."""
        return self._era is Era.HANDSHAKE

    @property
    def modern_locked(self) -> bool:
        """True once a modern request succeeded: the handshake is then refused."""
        return self._era is Era.MODERN

    @property
    def protocol_version(self) -> str:
        """The negotiated version (before a handshake, the version the server offers)."""
        return self._protocol_version

    @property
    def client_info(self) -> Implementation | None:
        return self._client_info

    @property
    def client_capabilities(self) -> ClientCapabilities:
        return self._client_capabilities

    @property
    def announced(self) -> JSONObject:
        """The server capabilities this client was told of at ``initialize``."""
        return self._announced

    @property
    def back_channel(self) -> bool:
        """False where the server cannot send requests to the client (stateless HTTP)."""
        return self._back_channel

    @property
    def log_level(self) -> str | None:
        """The level the client asked for with ``logging/setLevel``; None: everything."""
        return self._log_level

    def wants_log(self, level: str) -> bool:
        """Whether a log message at ``level`` (one of ``LOGGING_LEVELS``) goes to the client."""
        if self._log_level is None:
            return True
        return LOGGING_LEVELS.index(level) >= LOGGING_LEVELS.index(self._log_level)

    # -- checks: what may be routed, decided before a request runs -----------------------------

    def check_handshake_request(self, method: str) -> None:
        """A request without a per-request version: refused once the connection is modern."""
        if self._era is Era.MODERN:
            if method == "initialize":
                raise ProtocolError(METHOD_NOT_FOUND, "Method not found", method)
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: missing or invalid `{PROTOCOL_VERSION_KEY}` in `_meta`: this "
                "connection speaks the modern protocol",
            )

    def check_modern_request(self) -> None:
        """A request with its own version: refused once the connection had its handshake."""
        if self._era is Era.HANDSHAKE:
            raise ProtocolError(
                INVALID_REQUEST,
                "Invalid Request: the session already negotiated the legacy lifecycle via "
                "`initialize`; a request with a per-request protocol version does not belong "
                "on it",
            )

    def check_initialize(self) -> None:
        """Whether ``initialize`` may run now: the errors :meth:`initialize` would raise."""
        if self._era is Era.MODERN:
            raise ProtocolError(METHOD_NOT_FOUND, "Method not found", "initialize")
        if self._era is Era.HANDSHAKE:
            raise ProtocolError(INVALID_REQUEST, "Invalid Request: Server already initialized")

    # -- transitions ---------------------------------------------------------------------------

    def initialize(
        self,
        requested: str,
        client_info: Implementation,
        client_capabilities: ClientCapabilities,
        announced: JSONObject,
    ) -> str:
        """The handshake: enter the handshake era and return the negotiated version.

        ``announced`` is what the result tells the client the server can do; list changes are
        sent for those kinds only.
        """
        self.check_initialize()
        self._era = Era.HANDSHAKE
        self._protocol_version = negotiate(requested, self._offered_version)
        self._client_info = client_info
        self._client_capabilities = client_capabilities
        self._announced = announced
        return self._protocol_version

    def skip_handshake(self) -> None:
        """Enter the handshake era with no ``initialize``: a stateless HTTP POST has none.

        The connection then runs at the offered version, knowing nothing of the client.
        """
        self.check_initialize()
        self._era = Era.HANDSHAKE

    def restore(
        self,
        protocol_version: str,
        client_info: Implementation,
        client_capabilities: ClientCapabilities,
        announced: JSONObject,
        log_level: str | None,
    ) -> None:
        """Enter the handshake era as another worker's ``initialize`` left it, with no handshake
        here: a replica of a session opened elsewhere, from its record."""
        self.check_initialize()
        if log_level is not None:
            self.set_log_level(log_level)
        self._era = Era.HANDSHAKE
        self._protocol_version = protocol_version
        self._client_info = client_info
        self._client_capabilities = client_capabilities
        self._announced = announced

    def lock_modern(self) -> None:
        """A modern request succeeded: the connection is modern from now on."""
        self.check_modern_request()
        self._era = Era.MODERN

    def refuse_back_channel(self) -> None:
        """This connection cannot carry requests to the client (stateless HTTP)."""
        self._back_channel = False

    def set_log_level(self, level: object) -> None:
        """``logging/setLevel``: send log messages at ``level`` and above only."""
        if not isinstance(level, str) or level not in LOGGING_LEVELS:
            raise ProtocolError(
                INVALID_PARAMS, f"Invalid params: level must be one of {', '.join(LOGGING_LEVELS)}"
            )
        self._log_level = level
