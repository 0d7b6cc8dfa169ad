"""Which operations become tools, resources, resource templates, or nothing: ``Route`` rules."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

import attrs

from ._operations import Operation

__all__ = ["RESOURCES_FOR_GETS", "Route", "kind_of"]

Kind = Literal["tool", "resource", "template", "exclude"]


def _upper(methods: Iterable[str] | str | None) -> frozenset[str] | None:
    if methods is None:
        return None
    if isinstance(methods, str):
        methods = [methods]
    return frozenset(m.upper() for m in methods)


@attrs.frozen
class Route:
    """A rule: an operation that matches becomes ``kind``. The first matching rule decides;
    an operation no rule matches is a tool. ``exclude`` rules come first wherever they stand:
    an operation one matches is left out before anything else of it is read (so an operation
    this import cannot serve does not stop the others).

    ``methods`` (None: any), ``path`` (a regular expression searched in the path template,
    ``/pets/{id}``; None: any), ``tags`` (the operation has every one). A ``resource`` rule
    matches only an operation without parameters or body; a ``template`` rule only one whose
    required arguments are all path parameters (the template's variables): other operations
    go on to the next rule.
    """

    kind: Kind
    methods: frozenset[str] | None = attrs.field(default=None, converter=_upper)
    path: str | None = None
    tags: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)

    def __attrs_post_init__(self) -> None:
        if self.kind not in ("tool", "resource", "template", "exclude"):
            raise ValueError(
                f"Route kind {self.kind!r}: use 'tool', 'resource', 'template' or 'exclude'"
            )
        if self.path is not None:
            re.compile(self.path)

    def selects(self, method: str, path: str, tags: Iterable[str]) -> bool:
        """Whether the method, path and tags match (what an ``exclude`` rule looks at)."""
        if self.methods is not None and method.upper() not in self.methods:
            return False
        if self.path is not None and re.search(self.path, path) is None:
            return False
        return self.tags <= set(tags)

    def matches(self, operation: Operation) -> bool:
        if not self.selects(operation.method, operation.path, operation.tags):
            return False
        if self.kind == "resource":
            return not operation.arguments
        if self.kind == "template":
            paths = {a.name for a in operation.arguments if a.location == "path"}
            return bool(paths) and operation.required <= paths
        return True


#: GETs without parameters as resources, GETs with path parameters (and no other required
#: argument) as resource templates, everything else a tool.
RESOURCES_FOR_GETS: tuple[Route, ...] = (
    Route("resource", methods="GET"),
    Route("template", methods="GET"),
)


def kind_of(operation: Operation, routes: Sequence[Route]) -> Kind:
    for route in routes:
        if route.matches(operation):
            return route.kind
    return "tool"
