"""Routing-tagged session ids: what lets a stock load balancer keep a session on its node.

A handshake-era session lives in the memory of the process that opened it, and its
``initialize`` carries no session id yet, so a load balancer cannot hash its way to it (the
backend it picks for the first request is not the one the hash of the new id points to). With
``HttpOptions(node_id="n1")`` the app mints ``n1.<32 hex digits>`` instead of plain hex: the
tag says which node holds the session, and a proxy routes on it (nginx: a ``map`` of
``$http_mcp_session_id`` to an upstream per node; see ``deploy/nginx.conf``).

The tag is a routing hint, never a credential: the 128 random bits after it are what a client
cannot guess. An id whose tag is not this node's, or that is not of the minted form at all, is
treated exactly as an unknown session (404), so a forged tag learns nothing.
"""

from __future__ import annotations

import re
import secrets

#: A node id: a short token of letters, digits and ``-`` (it sits in a header and a proxy's
#: pattern, so nothing that needs quoting or escaping there).
NODE_ID = re.compile(r"[A-Za-z0-9-]{1,32}")
_RANDOM_HEX = 32
_TAGGED = re.compile(rf"([A-Za-z0-9-]{{1,32}})\.([0-9a-f]{{{_RANDOM_HEX}}})")


def check_node_id(node_id: str) -> str:
    """``node_id`` if it is a valid node id; ValueError saying what one is otherwise."""
    if not isinstance(node_id, str) or NODE_ID.fullmatch(node_id) is None:
        raise ValueError(
            f"node_id must be 1 to 32 letters, digits or '-' (it tags session ids for a load "
            f"balancer's routing), not {node_id!r}"
        )
    return node_id


def mint_session_id(node_id: str | None) -> str:
    """A new session id: 128 random bits in hex, behind ``node_id.`` when there is one."""
    random = secrets.token_hex(_RANDOM_HEX // 2)
    return f"{node_id}.{random}" if node_id is not None else random


def session_node(session_id: str) -> str | None:
    """The node tag of a minted session id (None for an untagged one, or for anything that is
    not a session id this library mints)."""
    match = _TAGGED.fullmatch(session_id)
    return match[1] if match is not None else None
