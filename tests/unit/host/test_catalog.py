"""Background discovery of agy's models and agents, with the store's cache."""

from __future__ import annotations

from typing import Any

import trio

from agybridge.host.catalog import CatalogService

from ...acp_wire import FAKE_AGY


async def test_discovery_runs_agy_and_fills_the_cache() -> None:
    """Without a cache, agy's models, agents and version are discovered and cached."""
    service = CatalogService()
    cache: dict[str, Any] = {}
    changes = 0

    async def changed() -> None:
        nonlocal changes
        changes += 1

    async def get(key: str) -> Any:
        return cache.get(key)

    async def put(key: str, value: Any) -> None:
        cache[key] = value

    with trio.fail_after(30):
        await service.run(str(FAKE_AGY), changed, cache_get=get, cache_put=put)
    assert service.error is None and changes == 1
    assert any(m.slug == "gemini-3.7-flash-high" for m in service.catalog.models)
    assert service.catalog.agents and service.catalog.agy_version
    assert cache["discovery"]["models"]


async def test_a_cached_catalog_spawns_no_agy() -> None:
    """A fresh cache is used as is: start-up runs no agy process at all."""
    service = CatalogService()
    cached = {"models": [{"slug": "m1", "name": "M1"}], "agents": ["a"], "agyVersion": "9"}

    async def get(key: str) -> Any:
        return cached

    async def changed() -> None:
        pass

    with trio.fail_after(10):
        await service.run("/nonexistent/agy", changed, cache_get=get)
    assert service.error is None
    assert [m.slug for m in service.catalog.models] == ["m1"]
    assert service.catalog.agy_version == "9"


async def test_a_failing_agy_keeps_an_empty_catalog_and_says_why() -> None:
    """Discovery failure is logged and kept, never raised."""
    service = CatalogService()

    async def changed() -> None:
        raise AssertionError("nothing changed")

    with trio.fail_after(10):
        await service.run("/nonexistent/agy", changed)
    assert service.catalog.models == () and service.error
    assert service.refreshed.is_set()
