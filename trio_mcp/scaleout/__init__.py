"""What a second worker needs of the HTTP app: sessions served by any worker of a fleet.

The HTTP app (:mod:`trio_mcp.http`) asks its fleet a few questions (its ``Fleet`` protocol);
this room answers them when ``HttpOptions`` names a store or a relay that workers share. A
single process never imports it.
"""

from ._fleet import SharedFleet

__all__ = ["SharedFleet"]
