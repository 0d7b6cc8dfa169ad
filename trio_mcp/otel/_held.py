"""What the event stores hold, counted whether or not anything listens (no OpenTelemetry
import): an observable counter of ``_instruments`` reads it when a metric reader collects."""

from __future__ import annotations

#: The bytes each kind of event store holds now, by ``trio_mcp.event_store``. Kept whether or
#: not anything listens, since a change is a dictionary update, cheaper than asking whether
#: anything listens; an observable counter reads it when a reader collects, so a provider
#: installed later still sees what was stored before it.
_held_bytes: dict[str, int] = {}


def event_store_bytes(change: int, store: str = "memory") -> None:
    """The bytes an event store holds changed by ``change`` (added, or evicted when < 0)."""
    if change:
        _held_bytes[store] = _held_bytes.get(store, 0) + change


def held_bytes() -> dict[str, int]:
    """What :func:`event_store_bytes` has counted, per kind of store (a copy: a metric reader
    may read it from its own thread)."""
    return _held_bytes.copy()
