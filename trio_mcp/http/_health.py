"""Readiness: whether the stores, the bus and the relay a configuration needs answer now.

A load balancer or an orchestrator asks ``ready_path`` whether to send a process traffic; a
process whose Redis is gone answers every Redis-backed ``initialize`` with 503, so its
readiness must say 503 too. What it asks is bounded (``HttpOptions.ready_timeout`` for each
probe, run side by side), shared (concurrent probes wait for the one running) and kept for a
moment (:data:`PROBE_INTERVAL`), so a storm of probes costs Redis one round of commands.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

import trio

logger = logging.getLogger("trio_mcp.http")

#: How long the outcome of one round of probes answers the readiness path.
PROBE_INTERVAL = 1.0


@runtime_checkable
class HealthProbe(Protocol):
    """A store, a bus or a relay that can say whether it serves now (the Redis ones do): its
    ``probe()`` returns when it does and raises its own unavailable error, whose message says
    what and where (never a password), when it does not. A store of your own takes part in
    the readiness check by having one."""

    async def probe(self) -> None: ...


class Health:
    """The readiness probes of one app: ``await health.trouble()`` is None while every probe
    answers, else what is wrong (for the log, never for the peer)."""

    def __init__(self, probes: Iterable[object], timeout: float) -> None:
        seen: set[int] = set()
        #: Each component once (several may be one object).
        self.probes: list[HealthProbe] = []
        for probe in probes:
            if isinstance(probe, HealthProbe) and id(probe) not in seen:
                seen.add(id(probe))
                self.probes.append(probe)
        self.timeout = timeout
        self._trouble: str | None = None
        self._checked = -math.inf
        self._running: trio.Event | None = None

    async def trouble(self) -> str | None:
        """What keeps the app from serving now, or None: the latest round of probes if it is
        recent, else a new round (shared with every caller meanwhile)."""
        if not self.probes:
            return None
        while self._running is not None:
            await self._running.wait()
            if trio.current_time() - self._checked < PROBE_INTERVAL:
                return self._trouble
        if trio.current_time() - self._checked < PROBE_INTERVAL:
            return self._trouble
        running = self._running = trio.Event()
        try:
            found = await self._round()
            if found != self._trouble:
                if found is None:
                    logger.warning("ready again: every store answers")
                else:
                    logger.error("not ready: %s", found)
            self._trouble, self._checked = found, trio.current_time()
        finally:
            self._running = None
            running.set()
        return self._trouble

    async def _round(self) -> str | None:
        troubles: list[str] = []

        async def one(probe: HealthProbe) -> None:
            with trio.move_on_after(self.timeout) as bound:
                try:
                    await probe.probe()
                except Exception as error:  # a probe's own error says what and where
                    troubles.append(" ".join(str(error).split()) or type(error).__name__)
            if bound.cancelled_caught:
                troubles.append(f"{type(probe).__name__} did not answer in {self.timeout:g} s")

        async with trio.open_nursery() as nursery:
            for probe in self.probes:
                nursery.start_soon(one, probe)
        return "; ".join(troubles) if troubles else None
