"""What the parts of the HTTP app share: the ASGI type names and the HTTP-level refusal."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

from ..auth._gate import Refused
from ..protocol._jsonrpc import INVALID_REQUEST, ErrorObject, RequestId

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class HttpError(Exception):
    """An HTTP-level refusal: its status, and the JSON-RPC error its body carries.

    A bare message is an Invalid Request (-32600); any other error is passed as an
    :class:`ErrorObject`.
    """

    def __init__(
        self,
        status: int,
        error: ErrorObject | str,
        *,
        request_id: RequestId | None = None,
        headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        if isinstance(error, str):
            error = ErrorObject.make(INVALID_REQUEST, error)
        super().__init__(error.message)
        self.status = status
        self.error = error
        self.request_id = request_id
        self.headers = list(headers)


def _refusal(refused: Refused, request_id: RequestId | None = None) -> HttpError:
    """The gate's refusal as the app answers it: the JSON-RPC error body, the challenge."""
    error = ErrorObject.make(refused.code, refused.message)
    return HttpError(refused.status, error, request_id=request_id, headers=refused.headers)
