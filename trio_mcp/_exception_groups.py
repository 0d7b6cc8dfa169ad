"""The collapsing of exception groups at the public boundary.

Inside the library Trio's strict exception groups are the rule; at every public boundary a group
holding one real error (plus cancellations) is unwrapped so callers can write plain ``except``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def single_error(exc: BaseException) -> BaseException | None:
    """The one meaningful exception inside ``exc`` (ignoring cancellations), if there is one."""
    if not isinstance(exc, BaseExceptionGroup):
        return exc
    real = [leaf for leaf in _leaves(exc) if not isinstance(leaf, trio.Cancelled)]
    return real[0] if len(real) == 1 else None


@contextmanager
def collapse_exception_groups() -> Iterator[None]:
    """Re-raise a group that holds one real error as that error alone."""
    try:
        yield
    except BaseExceptionGroup as group:
        only = single_error(group)
        if only is None:
            raise
        raise only from only.__cause__
