"""The app's few questions to the other workers of its fleet, as a protocol.

One process needs none of this. With a store or a relay shared by several workers
(``ScaleOut(session_store=..., relay=..., event_store=...)``) a session opened on one worker
may be served by any: a request for a session this worker does not hold follows its record, a
client's answer to another worker's copy is relayed there, a resume of a stream held elsewhere
is served from the shared event store. That code is the ``scaleout`` room's
(:class:`trio_mcp.scaleout.SharedFleet`); the app holds it as a :class:`Fleet`, or None in a
single process, where none of it is imported or run. These are the points where the app calls
it, each named for what happened here.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Protocol, TypeVar

import trio

from ..protocol._jsonrpc import ErrorResponse, Notification, RequestId, Response
from ..server._principal import Principal
from ._asgi import Receive, Scope, Send

#: The app's session (``HttpSession``), named here by a type variable: the app imports this
#: module, not the other way round.
S_contra = TypeVar("S_contra", contravariant=True)


class Fleet(Protocol[S_contra]):
    """What a Streamable HTTP app asks of the fleet it is one worker of (``Fleet[HttpSession]``)."""

    @property
    def id_prefix(self) -> str:
        """What the ids of the requests a session's engine sends start with: its node, so that
        the client's answer, which may reach any worker, is relayed to the copy that asked."""
        ...

    def open(self) -> AbstractAsyncContextManager[None]:
        """The lifespan's first step, after the event store's: the shared stores start (one that
        cannot be reached fails the start) and close when the app stops."""
        ...

    async def start(self, nursery: trio.Nursery) -> None:
        """Start what runs while the app serves, in the app's nursery (keeping records fresh,
        listening to the relay); returns once it is running."""
        ...

    @property
    def hands_over(self) -> bool:
        """Whether this worker's sessions outlive it (their records are shared): then, as the
        app stops, :meth:`hand_over` runs, and their records and streams stay."""
        ...

    async def hand_over(self) -> None:
        """The app stops, its requests drained: leave its sessions for the other workers to
        adopt (a GET stream held here is held nowhere now), before they end here."""
        ...

    async def before_request(self, scope: Scope, principal: Principal | None, method: str) -> None:
        """Before a POST, GET or DELETE of the MCP path is served: a session held elsewhere may
        become one held here too, and one held here takes what other workers changed."""
        ...

    def opened(self, session: S_contra) -> None:
        """A session's object was built (for ``initialize``, or from a record)."""
        ...

    async def initialized(self, session: S_contra, request_id: RequestId) -> None:
        """A session's ``initialize`` succeeded; before its client learns its id. May raise
        :class:`HttpError` (the session is closed then)."""
        ...

    async def ended(self, session: S_contra) -> None:
        """Its client DELETEd a session; it has ended here. May raise :class:`HttpError`."""
        ...

    async def send_elsewhere(
        self, session: S_contra, message: Notification | Response | ErrorResponse, body: bytes
    ) -> bool:
        """A client's notification or answer for a session: True if it was sent to another
        worker's copy (or to all), False if it is this copy's."""
        ...

    def forward_get(self, session: S_contra, data: bytes) -> bool:
        """A request's message for the GET stream, which this copy does not hold: True if it
        went to the copy that does."""
        ...

    async def hold_get(self, session: S_contra) -> None:
        """This copy of the session opened its GET stream."""
        ...

    def resumes_elsewhere(self, session_id: str, event: tuple[str, str, int]) -> bool:
        """Whether a GET with this ``Last-Event-ID`` (parsed) resumes a stream that this worker
        does not hold: then :meth:`resume_elsewhere` serves it."""
        ...

    async def resume_elsewhere(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        principal: Principal | None,
        session_id: str,
        event: tuple[str, str, int],
    ) -> None:
        """Serve that resume from the shared event store."""
        ...
