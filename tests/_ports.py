"""A free TCP port of 127.0.0.1 for a server a test starts.

Asking the kernel for one (bind to port 0, read it, close) hands out a port from the range it
also gives outgoing connections: between the test reading the port and the server binding it,
any connection made meanwhile (a Redis client, httpx, another test's worker) may take it as its
local port, and the server fails with "Address already in use". So the port is drawn from below
that range (Linux's starts at 32768, IANA's at 49152), where no outgoing connection lands, and
is checked free by binding it once. Two test workers drawing the same port at the same moment is
left to chance: a draw from some 12,000 ports.
"""

from __future__ import annotations

import os
import random
import socket

#: Below every system's range for outgoing connections; above the registered services that
#: crowd the low thousands.
LOWEST = 20_000
HIGHEST = 32_767
#: Draws before giving up (a port found bound is drawn again).
DRAWS = 200

# A generator of our own, seeded from the system: a test that seeds the ``random`` module (as
# hypothesis does) cannot make two workers draw the same ports.
_draw = random.Random(os.urandom(16))


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on or is connected from, outside the kernel's range
    for outgoing connections."""
    for _ in range(DRAWS):
        port = _draw.randint(LOWEST, HIGHEST)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port of 127.0.0.1 between {LOWEST} and {HIGHEST}")
