"""The stdio bridge: the host (host/) with one client, over stdin and stdout.

Main nursery (architecture.md "The shape of a running bridge"): the host
(the session manager, one nursery per session; the signal watcher), the
client's JSON-RPC peer (reader, the only stdout writer, one task per
request) and, once ``initialize`` is answered, the housekeeping and the
watchdog. Stdin EOF, EPIPE, SIGTERM or SIGHUP shut it down: every prompt is
cancelled (and answered, while the client still listens), every agy child is
killed with the escalation and reaped, then everything else is cancelled.
Exit 0.
"""

from __future__ import annotations

import gc
import logging
import os
import sys

import trio

from .agent.wirelog import TracingReceiveStream, TracingSendStream, log_startup
from .config import Settings
from .host import Connection, Host, deferred_store
from .host.shutdown import safety_net
from .jsonrpc import PipeSendStream
from .store import StoreInUseError, StorePathError, claim_for_bridge, release_claim

logger = logging.getLogger(__name__)


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
            log_startup(settings.resolve_agy_bin() or settings.agy_bin, settings.log_file)
            for warning in settings.warnings:
                logger.warning("%s", warning)
            host = Host(settings, store, single_client=True)
            client = host.connect(
                receive_stream,
                send_stream,
                # What the first session loads lives as long as the process, like
                # start-up's modules (frozen in cli.py): out of the collector's way.
                on_sessions_loaded=gc.freeze if own_processes else None,
            )
            watchdog = Watchdog(own_processes)
            async with trio.open_nursery() as nursery:
                # Outside the host: the watchdog outlives every agy the host
                # started, so at a clean exit it finds nothing to end.
                nursery.start_soon(watchdog.run)
                async with trio.open_nursery() as hosting:
                    tasks = await hosting.start(host.run)
                    tasks.start_soon(host.serve, client)
                    tasks.start_soon(after_initialize, host, client, tasks, watchdog)
                nursery.cancel_scope.cancel(reason="the host has stopped")
        finally:
            await store.aclose()
    finally:
        if claim is not None:
            release_claim(claim, daemon=False)


async def after_initialize(
    host: Host, client: Connection, nursery: trio.Nursery, watchdog: Watchdog
) -> None:
    """Start-up work that answering ``initialize`` does not need runs once its
    answer is written (issue 15). No agy starts before it: the discovery starts
    here, and sessions wait for its catalog, so the watchdog is up before any
    child."""
    await client.agent.wait_initialized()
    await client.peer.flush()
    if watchdog.wanted:
        collect_start_up_garbage()
    await watchdog.start()
    host.start_housekeeping(nursery)
    # The session machinery loads now rather than with the editor's first
    # session/new or session/load, which then need not wait.
    client.agent.load_sessions()


class Watchdog:
    """The bridge process's safety net (``own_processes``): what bridges that
    died (SIGKILL) left is ended, then a watchdog ends this bridge's agy
    children if it dies too. It runs beside the host, not in it: it stops once
    the host has stopped and reaped every child, so on a clean exit its last
    look finds nothing."""

    def __init__(self, wanted: bool) -> None:
        self.wanted = wanted
        self._start = trio.Event()
        self._running = trio.Event()

    async def start(self) -> None:
        """Start it (once ``initialize`` is answered, before any agy) and wait
        until it runs."""
        self._start.set()
        await self._running.wait()

    async def run(self) -> None:
        """Until cancelled (after the host has stopped)."""
        await self._start.wait()
        if not self.wanted:
            self._running.set()
            return
        async with safety_net():
            self._running.set()
            await trio.sleep_forever()


def collect_start_up_garbage() -> None:
    """Free the cycles start-up left (attrs' discarded class drafts, ...): cli.py
    froze the heap built with the collector off (__main__), garbage included.
    One full collection, once initialize is answered; the rest is frozen again."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def run(settings: Settings) -> int:
    """Run the bridge on stdio; returns the process exit status (2: a start-up
    error, reported on stderr)."""
    try:
        trio.run(serve_stdio, settings)
    except (StorePathError, StoreInUseError) as exc:
        print(f"agybridge: {exc}", file=sys.stderr)
        return 2
    return 0
