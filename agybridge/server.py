"""The running bridge: stdio ownership, the main nursery and shutdown.

Main nursery (architecture.md "The shape of a running bridge"): the JSON-RPC
peer (reader, the only stdout writer, one task per request), the session
manager (one nursery per session), and a watcher that turns stdin EOF,
SIGTERM or SIGHUP into an orderly shutdown: every prompt is cancelled (and
answered, while the client still listens), every agy child is killed with
the escalation and reaped, then everything else is cancelled. Exit 0.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import os
import sys
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from . import agent as agent_layer
from .acp import models
from .agent import AcpAgent
from .agent.auth import SignInState
from .agent.wirelog import TracingReceiveStream, TracingSendStream, log_startup
from .agy import EscalationPolicy
from .config import Settings
from .host import RESPONSE_FLUSH_S, ShutdownClient, shut_down, stop_budget_s, watch_signals
from .jsonrpc import Peer, PipeSendStream
from .session import SessionDeps, SessionManager
from .session.catalog import CatalogService
from .session.deps import AskClient
from .store import (
    AsyncStore,
    StoreError,
    StoreInUseError,
    StorePathError,
    StoreUnavailableError,
    check_path,
    claim_for_bridge,
    release_claim,
)

if TYPE_CHECKING:
    from .store import LegacyPaths, Store

logger = logging.getLogger(__name__)

#: agy's model list changes with releases, not by the minute.
DISCOVERY_CACHE_TTL_S = 24 * 3600.0


def claim_stdio() -> tuple[int, int]:
    """Take fds 0/1 for the protocol; leave /dev/null and stderr in their place.

    A stray ``print()`` (ours or a library's) then lands on stderr, and no
    child can inherit the protocol pipes (architecture.md: a naive dup lost
    94% of a 1 MB print). Returns (protocol_in, protocol_out), both
    close-on-exec.
    """
    sys.stdout.flush()
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return protocol_in, protocol_out


async def serve_stdio(settings: Settings) -> None:
    """Serve ACP on this process's stdin/stdout until shutdown."""
    protocol_in, protocol_out = claim_stdio()
    receive = trio.lowlevel.FdStream(protocol_in)
    send = PipeSendStream(protocol_out)
    async with receive, send:
        await serve(receive, send, settings, own_processes=True)


async def serve(
    receive_stream: trio.abc.ReceiveStream,
    send_stream: trio.abc.SendStream,
    settings: Settings,
    *,
    handle_signals: bool = True,
    own_processes: bool = False,
) -> None:
    """Serve ACP over the given streams until EOF or a shutdown signal.

    ``own_processes``: this is the bridge process (not a test serving in
    process): end what dead bridges left and run the watchdog.

    Cancelling this kills every agy child (escalation is shielded and bounded)
    before the cancellation propagates.
    """
    if settings.trace:
        logger.info("AGYBRIDGE_TRACE=1: tracing every message (secrets redacted)")
        receive_stream = TracingReceiveStream(receive_stream)
        send_stream = TracingSendStream(send_stream)
    # Shared with other stdio bridges, never with a daemon (store/claim.py).
    claim = claim_for_bridge(settings.db_path) if settings.db_path is not None else None
    try:
        store = deferred_store(settings.db_path)
        try:
            await _serve(
                receive_stream,
                send_stream,
                settings,
                store,
                handle_signals=handle_signals,
                own_processes=own_processes,
            )
        finally:
            await store.aclose()
    finally:
        if claim is not None:
            release_claim(claim, daemon=False)


def deferred_store(path: Path | None) -> AsyncStore:
    """The session database, opened by its first use (issue 15: not before
    ``initialize`` is answered); in memory (with a warning) if it cannot be
    used, so the bridge always starts (a corrupt file is moved aside).

    Raises:
        StorePathError: the path names a directory, FIFO, device...: the user's
            mistake, and maybe the user's data, so the bridge does not start.
    """
    if path is not None:
        # One stat(2), so that a bad path still stops the start; one that cannot
        # even be looked at is for the open to report (then memory).
        with contextlib.suppress(StoreUnavailableError):
            check_path(path)
    return AsyncStore.deferred(functools.partial(_open_or_memory, path))


async def open_store(path: Path | None) -> AsyncStore:
    """`deferred_store`, opened now (the daemon: it serves many clients)."""
    store = deferred_store(path)
    await store.wait_open()
    return store


def _open_or_memory(path: Path | None) -> Store:
    """(In the store's worker thread.) The database at ``path``, else in memory."""
    from .store import Store  # noqa: PLC0415 - sqlite3 is loaded by the first use

    if path is not None:
        try:
            return Store.open(path)
        except StoreError as exc:  # a bad path was refused at start-up (check_path)
            logger.warning("session history unavailable (%s); keeping sessions in memory", exc)
    return Store.open_memory()


async def import_legacy(store: AsyncStore, legacy: LegacyPaths | None) -> None:
    """One-time import of agy-acp-map sessions (a no-op once done)."""
    if legacy is None or not legacy.sessions_file.exists():
        return
    from .store import import_agy_acp_map  # noqa: PLC0415 - runs once per machine

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
    from .workspace.staging import StagingError, sweep_stale  # noqa: PLC0415 - after initialize

    try:
        removed = await trio.to_thread.run_sync(
            functools.partial(sweep_stale, settings.staging_dir, keep=settings.keep_staging)
        )
    except (StagingError, OSError) as exc:
        logger.warning("could not sweep stale staging in %s: %s", settings.staging_dir, exc)
        return
    if removed:
        logger.info("removed %d stale staging director(ies)", len(removed))


async def _serve(
    receive_stream: trio.abc.ReceiveStream,
    send_stream: trio.abc.SendStream,
    settings: Settings,
    store: AsyncStore,
    *,
    handle_signals: bool,
    own_processes: bool,
) -> None:
    peer: Peer | None = None

    def send_updates(session_id: str, updates: Sequence[models.SessionUpdate]) -> Awaitable[None]:
        assert peer is not None
        # Through the layer's face: the encoder is loaded by the first update.
        # Not a coroutine of its own: the outlet awaits the peer's hand-over.
        return agent_layer.send_updates_via(peer.send_encoded, session_id, updates)

    async def ask_client(method: str, params: Any) -> Any:
        assert peer is not None
        return await peer.request(method, params)

    agy_bin = settings.resolve_agy_bin() or settings.agy_bin
    log_startup(agy_bin, settings.log_file)
    for warning in settings.warnings:
        logger.warning("%s", warning)
    catalog = CatalogService()
    manager = SessionManager(session_deps(settings, store, catalog, ask_client))
    sign_in = SignInState(agy_bin)
    doctor = functools.partial(doctor_lines, settings, catalog, manager, sign_in)

    agent = AcpAgent(
        manager,
        send_updates,
        default_settings=settings.launch,
        limits=settings.prompt_limits,
        doctor=doctor,
        catalog_ready=catalog.loaded.wait,
        sign_in=sign_in,
        # What the first session loads lives as long as the process, like
        # start-up's modules (frozen in cli.py): out of the collector's way.
        on_sessions_loaded=gc.freeze if own_processes else None,
    )

    peer = Peer(receive_stream, send_stream, agent, max_line_bytes=settings.max_line_bytes)
    shutdown = trio.Event()

    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)

        async def run_peer() -> None:
            try:
                assert peer is not None
                await peer.run()
            finally:
                shutdown.set()

        async def watch_eof() -> None:
            assert peer is not None
            await peer.wait_receive_closed()
            logger.info("stdin closed: shutting down")
            shutdown.set()

        async def watch_stdout() -> None:
            # Nobody reads our output (EPIPE): like stdin EOF, not a reason to
            # keep running agy turns.
            assert peer is not None
            await peer.wait_send_broken()
            logger.info("stdout closed: shutting down")
            shutdown.set()

        async def after_initialize() -> None:
            # Start-up work that answering initialize does not need runs once
            # its answer is written (issue 15). No agy starts before it: the
            # discovery starts here, and sessions wait for its catalog
            # (catalog_ready), so the watchdog is up before any child.
            assert peer is not None
            await agent.wait_initialized()
            await peer.flush()
            if own_processes:
                collect_start_up_garbage()
            housekeeping = functools.partial(
                start_housekeeping,
                nursery,
                settings,
                store=store,
                catalog=catalog,
                manager=manager,
                sign_in=sign_in,
            )
            if not own_processes:
                housekeeping()
                agent.load_sessions()
                return
            # What bridges that died (SIGKILL) left, then a watchdog in case we do.
            from .agy import end_orphans, watched  # noqa: PLC0415
            from .permissions import DIR_PREFIX, remove_orphaned_roots, runtime_bases  # noqa: PLC0415

            await end_orphans(remove_orphaned_roots)
            async with watched(runtime_bases(), DIR_PREFIX):
                housekeeping()
                # The session machinery loads now rather than with the editor's
                # first session/new or session/load, which then need not wait.
                agent.load_sessions()
                await trio.sleep_forever()  # the watchdog lives until shutdown

        nursery.start_soon(run_peer)
        nursery.start_soon(watch_eof)
        nursery.start_soon(watch_stdout)
        nursery.start_soon(after_initialize)
        if handle_signals:
            nursery.start_soon(watch_signals, shutdown)

        await shutdown.wait()
        grace = settings.shutdown_grace_s

        def the_client(closed_at: float) -> list[ShutdownClient]:
            # Its answers get RESPONSE_FLUSH_S, then a line in progress the grace.
            return [ShutdownClient(peer, "the client", closed_at + RESPONSE_FLUSH_S + grace)]

        await shut_down(manager, stop_budget_s(settings), the_client)
        nursery.cancel_scope.cancel(reason="shutdown")


def collect_start_up_garbage() -> None:
    """Free the cycles start-up left (attrs' discarded class drafts, ...): cli.py
    froze the heap built with the collector off (__main__), garbage included.
    One full collection, once initialize is answered; the rest is frozen again."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def session_deps(
    settings: Settings,
    store: AsyncStore,
    catalog: CatalogService,
    ask_client: AskClient,
    *,
    many_clients: bool = False,
) -> SessionDeps:
    """What every session of this bridge (or daemon: ``many_clients``) shares."""
    from .agy.binary import AgyRuns  # noqa: PLC0415 - with the first session, not at start-up

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
        ask_client=ask_client,
        timeouts=settings.timeouts,
        many_clients=many_clients,
    )


def doctor_lines(
    settings: Settings, catalog: CatalogService, manager: SessionManager, sign_in: SignInState
) -> list[str]:
    """The ``/doctor`` command's report: the same checks as ``agybridge doctor``,
    from what the bridge knows (pending ones say so)."""
    # Loaded by the first /doctor, not at start-up (issue 15).
    from .doctor import report  # noqa: PLC0415
    from .doctor.live import live_checks  # noqa: PLC0415

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


def run(settings: Settings) -> int:
    """Run the bridge on stdio; returns the process exit status (2: a start-up
    error, reported on stderr)."""
    try:
        trio.run(serve_stdio, settings)
    except (StorePathError, StoreInUseError) as exc:
        print(f"agybridge: {exc}", file=sys.stderr)
        return 2
    return 0
