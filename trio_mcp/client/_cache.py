"""A client-side cache for the results the server marks cacheable (2026-07-28 cache hints).

Off by default. A result is kept for its ``ttlMs`` (0 means do not reuse), keyed by method and
the parameters that affect it, and dropped early when a list-changed or resource-updated
notification says it is stale. Retries of multi round-trip requests are never cached.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import orjson

from ..protocol._jsonrpc import JSONObject
from ..protocol._methods import CACHEABLE

_LIST_OF = {
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
}


class ResultCache:
    """Results by (method, parameters), each until its server-given freshness runs out."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._entries: dict[tuple[str, bytes], tuple[float, JSONObject, str | None]] = {}
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _key(method: str, params: JSONObject) -> tuple[str, bytes] | None:
        if method not in CACHEABLE or "inputResponses" in params or "requestState" in params:
            return None
        relevant = {k: v for k, v in params.items() if k != "_meta"}
        return method, orjson.dumps(relevant, option=orjson.OPT_SORT_KEYS)

    def get(self, method: str, params: JSONObject) -> JSONObject | None:
        key = self._key(method, params)
        if key is None:
            return None
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self._clock():
            self._entries.pop(key, None)
            self.misses += 1
            return None
        self.hits += 1
        return dict(entry[1])

    def put(self, method: str, params: JSONObject, result: JSONObject) -> None:
        key = self._key(method, params)
        ttl = result.get("ttlMs")
        if key is None or result.get("resultType", "complete") != "complete":
            return
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
            return
        uri = params.get("uri") if method == "resources/read" else None
        self._entries[key] = (
            self._clock() + ttl / 1000,
            dict(result),
            uri if isinstance(uri, str) else None,
        )

    def invalidate(self, method: str, params: JSONObject) -> None:
        """Drop what a notification says is stale."""
        stale_methods = _LIST_OF.get(method)
        if stale_methods is not None:
            for key in [k for k in self._entries if k[0] in stale_methods]:
                del self._entries[key]
        elif method == "notifications/resources/updated":
            uri = params.get("uri")
            for key in [k for k, v in self._entries.items() if v[2] == uri]:
                del self._entries[key]

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def invalidates(method: str) -> bool:
    return method in _LIST_OF or method == "notifications/resources/updated"
