"""The models and agents agy offers, discovered in the background.

Discovery runs once at start-up (``agy models`` and ``agy agents``, stdin
closed, bounded by :data:`DISCOVERY_TIMEOUT_S`); ``initialize`` and
``session/new`` never wait for it. Until it succeeds, sessions offer the
current model only; when it completes, live sessions are told through
``config_option_update``. A cached result (memory, and the store when the
caller provides a cache) is used instead until it expires.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from ..session.config import Catalog

logger = logging.getLogger(__name__)

#: agy's discovery is a remote fetch (6-8 s when healthy, contract.md §6).
DISCOVERY_TIMEOUT_S = 45.0

CacheGet = Callable[[str], Awaitable[Any]]
CachePut = Callable[[str, Any], Awaitable[None]]
_CACHE_KEY = "discovery"


class CatalogService:
    """Holds the current :class:`Catalog`; :meth:`run` refreshes it."""

    def __init__(self, cache_file: Path | None = None) -> None:
        """``cache_file``: the database holding the discovery cache, read by
        :meth:`offered` before the store is open."""
        self._cache_file = cache_file
        self.catalog = Catalog()
        self.error: str | None = None
        #: The cache was read (or there is none): what a session is offered
        #: before discovery finishes.
        self.loaded = trio.Event()
        self.refreshed = trio.Event()

    def __call__(self) -> Catalog:
        return self.catalog

    async def offered(self) -> tuple[list[str], list[str]]:
        """The model slugs and agent names ``initialize`` advertises: the
        catalog once the cache was read (or discovery ran), else a warm
        discovery cache read straight from the database (the store is opened
        only after ``initialize``: issue 15), else none."""
        if self.loaded.is_set() or self.catalog.models or self._cache_file is None:
            return [m.slug for m in self.catalog.models], list(self.catalog.agents)
        from ..store.peek import peek_cache  # noqa: PLC0415 - sqlite3 only when asked

        cached = await trio.to_thread.run_sync(peek_cache, self._cache_file, _CACHE_KEY)
        if not isinstance(cached, dict):
            return [], []
        return [str(m["slug"]) for m in _model_rows(cached)], _agent_names(cached)

    async def run(
        self,
        agy_bin: str,
        on_change: Callable[[], Awaitable[None]],
        *,
        version: Callable[[], Awaitable[str]] | None = None,
        cache_get: CacheGet | None = None,
        cache_put: CachePut | None = None,
        timeout_s: float = DISCOVERY_TIMEOUT_S,
    ) -> None:
        """Load the cache, then discover; ``on_change`` after each change.
        ``version``: asks agy's version (shared with the sessions' check that
        agy runs), else ``agy --version`` is run here.

        Never raises for agy failures (logged, and kept in :attr:`error`).
        """
        # agy's discovery (and its process tree) loads here, once initialize is
        # answered: the service itself is built before (issue 15).
        from ..agy.discovery import (  # noqa: PLC0415
            DiscoveryError,
            discover_agents,
            discover_models,
            run_subcommand,
        )

        try:
            if cache_get is not None:
                cached = await cache_get(_CACHE_KEY)
                if isinstance(cached, dict):
                    # Fresh enough (the store expires it): no agy processes at start-up.
                    self._set(_from_json(cached))
                    self.refreshed.set()
                    return
        finally:
            self.loaded.set()
        try:
            with trio.fail_after(timeout_s):
                said = await version() if version is not None else None
                if said is None:
                    said = (await run_subcommand(agy_bin, "--version")).strip()
                agy_version = said or None
                models = await discover_models(agy_bin)
                agents = await discover_agents(agy_bin)
        except (DiscoveryError, trio.TooSlowError) as exc:
            self.error = (
                str(exc)
                if isinstance(exc, DiscoveryError)
                else (f"agy discovery took longer than {timeout_s:g} s")
            )
            logger.warning("could not list agy's models/agents: %s", self.error)
            self.refreshed.set()
            return
        catalog = Catalog(models=tuple(models), agents=tuple(agents), agy_version=agy_version)
        self.error = None
        changed = catalog != self.catalog
        self._set(catalog)
        if cache_put is not None:
            await cache_put(_CACHE_KEY, _to_json(catalog))
        self.refreshed.set()
        if changed:
            await on_change()

    def _set(self, catalog: Catalog) -> None:
        self.catalog = catalog
        logger.info(
            "agy offers %d model(s) and %d agent(s)", len(catalog.models), len(catalog.agents)
        )


def _to_json(catalog: Catalog) -> dict[str, Any]:
    return {
        "models": [{"slug": m.slug, "name": m.name} for m in catalog.models],
        "agents": list(catalog.agents),
        "agyVersion": catalog.agy_version,
    }


def _from_json(data: dict[str, Any]) -> Catalog:
    from ..agy.discovery import ModelInfo  # noqa: PLC0415 - see CatalogService.run

    models = tuple(
        ModelInfo(slug=str(m["slug"]), name=str(m.get("name") or m["slug"]))
        for m in _model_rows(data)
    )
    agents = tuple(_agent_names(data))
    version = data.get("agyVersion")
    return Catalog(
        models=models, agents=agents, agy_version=version if isinstance(version, str) else None
    )


def _model_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The cached models that have a slug (the cache is JSON: anything may be in it)."""
    return [m for m in data.get("models", []) if isinstance(m, dict) and m.get("slug")]


def _agent_names(data: dict[str, Any]) -> list[str]:
    return [str(a) for a in data.get("agents", []) if isinstance(a, str)]
