"""The process's heap, settled once an app has started (``HttpOptions.freeze_heap``).

Python's cyclic garbage collector now and then runs a full collection, which walks every
container object of the process: with trio_mcp, hypercorn and their imports some 64,000 of
them, tens of milliseconds during which nothing else runs (each request in flight waits that
long). The first full collection of a server comes a while after it started serving, paying
for what the imports and the startup made. Almost all of that lives as long as the process:
collected once here, at the start, and frozen (``gc.freeze``), it is never walked again, and
a full collection later walks only what was made since (the sessions, the requests).
"""

from __future__ import annotations

import gc

_heap_settled = False


def settle_heap() -> None:
    """Collect the garbage once and freeze what is left; once per process (the first app to
    start does it: what a later one made is not frozen by it)."""
    global _heap_settled
    if _heap_settled:
        return
    _heap_settled = True
    gc.collect()
    gc.freeze()
