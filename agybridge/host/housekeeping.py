"""What a bridge process does beside serving its clients: model discovery,
agy's ``--version``, the one-time agy-acp-map import, the stale staging
sweep; and what its sessions share (`session_deps`), its ``/doctor`` report."""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

import trio

from ..agy import EscalationPolicy
from ..session import SessionDeps, SessionManager
from ..store import StoreError

if TYPE_CHECKING:
    from ..agent.auth import SignInState
    from ..config import Settings
    from ..session.deps import AskClient, AskQuestion
    from ..store import AsyncStore, LegacyPaths
    from .catalog import CatalogService

logger = logging.getLogger(__name__)

#: agy's model list changes with releases, not by the minute.
DISCOVERY_CACHE_TTL_S = 24 * 3600.0


def session_deps(
    settings: Settings,
    store: AsyncStore,
    catalog: CatalogService,
    ask_client: AskClient,
    *,
    ask_question: AskQuestion | None = None,
    many_clients: bool = False,
) -> SessionDeps:
    """What every session of this bridge (or daemon: ``many_clients``) shares."""
    from ..agent.runtime import runtime  # noqa: PLC0415 - likewise
    from ..agy.binary import AgyRuns  # noqa: PLC0415 - with the first session, not at start-up

    return SessionDeps(
        agy_bin=settings.resolve_agy_bin() or settings.agy_bin,
        agy_runs=AgyRuns(settings.agy_bin, from_env=settings.agy_bin_set),
        policy=EscalationPolicy(settings.sigint_grace_s, settings.sigterm_grace_s),
        max_line_bytes=settings.max_line_bytes,
        context_window_override=settings.context_window,
        catalog=catalog,
        store=store,
        staging_base=settings.staging_dir,
        keep_staging=settings.keep_staging,
        delete_on_close=settings.delete_on_close,
        ask_client=ask_client,
        ask_question=ask_question,
        timeouts=settings.timeouts,
        many_clients=many_clients,
        runtime=runtime,
        log_file=str(settings.log_file) if settings.log_file is not None else None,
    )


def doctor_lines(
    settings: Settings, catalog: CatalogService, manager: SessionManager, sign_in: SignInState
) -> list[str]:
    """The ``/doctor`` command's report: the same checks as ``agybridge doctor``,
    from what the bridge knows (pending ones say so)."""
    # Loaded by the first /doctor, not at start-up (issue 15).
    from ..doctor import report  # noqa: PLC0415
    from ..doctor.live import live_checks  # noqa: PLC0415

    gates = [session.gate for session in manager.live()]
    return report.one_line_each(live_checks(settings, catalog, sign_in, gates))


def start_housekeeping(
    nursery: trio.Nursery,
    settings: Settings,
    *,
    store: AsyncStore,
    catalog: CatalogService,
    manager: SessionManager,
    sign_in: SignInState,
) -> None:
    """Model discovery (re-announced to live sessions when it changes; a
    failure that says agy is signed out is noted), the agy-acp-map import and
    the stale staging sweep."""

    async def catalog_changed() -> None:
        for session in manager.live():
            session.announce("catalog")

    async def discover() -> None:
        runs = manager.deps.agy_runs
        await catalog.run(
            settings.resolve_agy_bin() or settings.agy_bin,
            catalog_changed,
            version=runs.version if runs is not None else None,
            timeout_s=settings.timeouts.startup_s,
            cache_get=store.cache_get,
            cache_put=lambda key, value: store.cache_put(key, value, DISCOVERY_CACHE_TTL_S),
        )
        sign_in.note_discovery_error(catalog.error)

    async def check_agy_runs() -> None:
        # Asked now, beside the rest of start-up (the discovery, when it runs,
        # shares the answer): the first session/new or session/load finds it.
        runs = manager.deps.agy_runs
        if runs is not None:
            await runs.failure()

    nursery.start_soon(discover)
    nursery.start_soon(check_agy_runs)
    nursery.start_soon(import_legacy, store, settings.legacy)
    nursery.start_soon(sweep_staging, settings)


async def import_legacy(store: AsyncStore, legacy: LegacyPaths | None) -> None:
    """One-time import of agy-acp-map sessions (a no-op once done)."""
    if legacy is None or not legacy.sessions_file.exists():
        return
    from ..store import import_agy_acp_map  # noqa: PLC0415 - runs once per machine

    try:
        report = await store.run_sync(
            functools.partial(
                import_agy_acp_map,
                sessions_file=legacy.sessions_file,
                history_dir=legacy.history_dir,
            )
        )
    except StoreError as exc:
        logger.warning("could not import agy-acp-map sessions: %s", exc)
        return
    if report.sessions_imported:
        logger.info("imported %d agy-acp-map session(s)", report.sessions_imported)


async def sweep_staging(settings: Settings) -> None:
    """Remove staging left by bridges that are gone (crash, SIGKILL)."""
    from ..workspace.staging import StagingError, sweep_stale  # noqa: PLC0415 - after initialize

    try:
        removed = await trio.to_thread.run_sync(
            functools.partial(sweep_stale, settings.staging_dir, keep=settings.keep_staging)
        )
    except (StagingError, OSError) as exc:
        logger.warning("could not sweep stale staging in %s: %s", settings.staging_dir, exc)
        return
    if removed:
        logger.info("removed %d stale staging director(ies)", len(removed))
