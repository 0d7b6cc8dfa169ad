"""Visibility: which registered components a client sees, by name or tag.

A server keeps one :class:`Visibility` (``server.enable`` / ``server.disable``) and every
handshake-era connection one more (``ctx.enable_components`` / ``ctx.disable_components``). Each
holds rules in the order they were given; the last rule that matches a component decides, the
connection's rules after the server's, and a component no rule matches is shown. A hidden
component is left out of its list and answered as an unknown one (-32602 "Unknown tool", "Resource
not found"): to a client it does not exist, so nothing tells it apart from a typo.

Rules are kept small: a rule with the same selector as an earlier one replaces it, a rule that
matches everything replaces all, and at most :data:`MAX_RULES` are kept (invariant 11: a client
toggling its own view cannot grow the server's memory).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import attrs
import trio

#: The component kinds a rule may be limited to, and the list each one is listed in.
KINDS: dict[str, str] = {
    "tool": "tools",
    "prompt": "prompts",
    "resource": "resources",
    "template": "resources",
}
#: How many rules one :class:`Visibility` keeps; one more is refused with ``ValueError``.
MAX_RULES = 256


@attrs.frozen
class _Rule:
    enabled: bool
    #: None: any (a rule with neither names nor tags matches every component of its kinds).
    names: frozenset[str] | None
    tags: frozenset[str] | None
    components: frozenset[str]

    @property
    def selector(self) -> tuple[Any, ...]:
        return (self.names, self.tags, self.components)

    @property
    def everything(self) -> bool:
        return self.names is None and self.tags is None and self.components == frozenset(KINDS)

    def matches(self, kind: str, keys: tuple[str, ...], tags: frozenset[str]) -> bool:
        if kind not in self.components:
            return False
        if self.names is None and self.tags is None:
            return True
        return bool(
            (self.names is not None and not self.names.isdisjoint(keys))
            or (self.tags is not None and not self.tags.isdisjoint(tags))
        )


def _names(value: Iterable[str] | str | None, what: str) -> frozenset[str] | None:
    if value is None:
        return None
    found = frozenset((value,) if isinstance(value, str) else value)
    if not all(isinstance(v, str) for v in found):
        raise TypeError(f"{what} takes strings")
    return found


class Component(Protocol):
    """A registry entry, as a rule sees it (every ``*Entry`` of ``_registry``)."""

    @property
    def component(self) -> tuple[str, tuple[str, ...]]: ...
    @property
    def tags(self) -> frozenset[str]: ...


class Visibility:
    """Enable and disable rules, in order: the last one that matches a component decides."""

    def __init__(self) -> None:
        self._rules: list[_Rule] = []

    def __bool__(self) -> bool:
        return bool(self._rules)

    def change(
        self,
        enabled: bool,
        *,
        names: Iterable[str] | str | None = None,
        tags: Iterable[str] | str | None = None,
        components: Iterable[str] | str | None = None,
        only: bool = False,
    ) -> frozenset[str]:
        """Add a rule; return the lists it may change (``{"tools", "resources"}``, ...).

        ``names`` and ``tags`` select (either matches); neither selects every component of
        ``components`` (the kinds ``tool``, ``prompt``, ``resource``, ``template``; all by
        default). ``only=True`` (enabling): everything else of those kinds is disabled first.
        """
        kinds = _names(components, "components=")
        if kinds is None:
            kinds = frozenset(KINDS)
        unknown = kinds - KINDS.keys()
        if unknown:
            raise ValueError(
                f"components= takes {', '.join(KINDS)}, not {', '.join(sorted(unknown))}"
            )
        if only and not enabled:
            raise ValueError("only=True is for enabling: the rest is then disabled")
        rules = []
        if only:
            rules.append(_Rule(False, None, None, kinds))
        rules.append(_Rule(enabled, _names(names, "names="), _names(tags, "tags="), kinds))
        for rule in rules:
            self._add(rule)
        return frozenset(KINDS[k] for k in kinds)

    def _add(self, rule: _Rule) -> None:
        if rule.everything:
            self._rules.clear()
            if rule.enabled:
                return  # everything shown: what no rule says
        self._rules = [r for r in self._rules if r.selector != rule.selector]
        if len(self._rules) >= MAX_RULES:
            raise ValueError(f"at most {MAX_RULES} visibility rules are kept")
        self._rules.append(rule)

    def decide(self, kind: str, keys: tuple[str, ...], tags: frozenset[str]) -> bool | None:
        """What the last matching rule says, or None when none matches."""
        for rule in reversed(self._rules):
            if rule.matches(kind, keys, tags):
                return rule.enabled
        return None


def shown(entry: Component, *layers: Visibility) -> bool:
    """Whether ``entry`` is shown under ``layers`` (the server's, then a connection's): a tool
    or prompt is named by its name, a resource by its URI or name, a template by its URI
    template or name."""
    for layer in layers:
        if layer._rules:
            break
    else:
        return True  # no rules anywhere, as on most servers: decided with no call
    kind, keys = entry.component
    for layer in reversed(layers):
        decided = layer.decide(kind, keys, entry.tags)
        if decided is not None:
            return decided
    return True


def change_session(
    connection: Any,
    enabled: bool,
    names: Iterable[str] | str | None,
    tags: Iterable[str] | str | None,
    components: Iterable[str] | str | None,
    only: bool,
) -> None:
    """``ctx.enable_components`` / ``disable_components``: a rule for one connection, whose
    client is then told of each list it may change (``notifications/*/list_changed``)."""
    visibility = getattr(connection, "visibility", None)
    if not isinstance(visibility, Visibility):
        raise RuntimeError("this connection keeps no visibility rules of its own")

    def change() -> None:
        changed = visibility.change(
            enabled, names=names, tags=tags, components=components, only=only
        )
        for kind in sorted(changed):
            connection.send_list_changed(kind)

    try:
        trio.lowlevel.current_task()
    except RuntimeError:  # a sync tool, in its worker thread: changed in the Trio thread
        trio.from_thread.run_sync(change)
    else:
        change()
