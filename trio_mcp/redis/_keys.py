"""Key names: every key of one thing (a session, a stream, a task, a worker, a quota) carries
that thing's id as a Redis Cluster hash tag, ``<prefix>{<id>}:<family>``.

A cluster places a key by the hash of its tag (the part between the first ``{`` and the next
``}``) when it has one, so the keys of one thing share a slot, and so a node: a MULTI, a
multi-key command or a Lua script over them runs there, atomically, where keys of several
slots would be refused (``CROSSSLOT``). Different things spread over the cluster. On one Redis
the braces are plain characters.

The prefix may not hold braces: its own ``{`` would become the tag (``a{b:`` tags every key
``b:...``, breaking the pairing above).
"""

from __future__ import annotations

__all__ = ["check_prefix", "key"]


def check_prefix(prefix: str) -> str:
    """``prefix``, or ValueError if it holds a brace (see the module docstring)."""
    if "{" in prefix or "}" in prefix:
        raise ValueError(
            f"a Redis key prefix cannot hold '{{' or '}}' (trio_mcp puts the hash tag of each "
            f"key after it), not {prefix!r}"
        )
    return prefix


def key(prefix: str, tag: str, family: str) -> str:
    """The key of ``family`` of the thing ``tag`` names: ``<prefix>{<tag>}:<family>``."""
    return f"{prefix}{{{tag}}}:{family}"
