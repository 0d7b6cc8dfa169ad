"""The heap is settled once an app has started (``HttpOptions.freeze_heap``): the first app of
the process collects the garbage and freezes what is left, so the cyclic collector's full
collections no longer walk the objects of the imports and the startup."""

from __future__ import annotations

import gc

import pytest

from trio_mcp import Server
from trio_mcp.http import HttpOptions, _heap


async def test_the_first_app_to_start_freezes_the_heap_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gc.unfreeze()
    monkeypatch.setattr(_heap, "_heap_settled", False)
    async with Server("off").http_app(HttpOptions(freeze_heap=False)).running():
        assert gc.get_freeze_count() == 0
    async with Server("first").http_app().running():
        assert gc.get_freeze_count() > 0
    gc.unfreeze()
    async with Server("second").http_app().running():
        assert gc.get_freeze_count() == 0  # once per process: a later start freezes nothing
