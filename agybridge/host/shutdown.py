"""How a bridge process shuts down: what the stdio bridge (``server.py``) and
the daemon (``daemon/``) share, so that both end the same way.

On SIGTERM, SIGHUP or SIGINT (:func:`watch_signals`), stdin EOF, EPIPE or
``stop``: every session is closed within the stop budget (agy's escalation,
every child signalled at once), every request still in flight is cancelled
so that each is answered, and each client's answers are flushed and its line
in progress finished by its own deadline (:func:`shut_down`); a client that
does not read is given up then, mid-line rather than never.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import trio

if TYPE_CHECKING:
    from ..config import Settings
    from ..jsonrpc import Peer
    from ..session import SessionManager

logger = logging.getLogger(__name__)

#: After the sessions are closed, how long their last responses may take to
#: reach the client before the writer is torn down.
RESPONSE_FLUSH_S = 1.0


def stop_budget_s(settings: Settings) -> float:
    """How long closing every session may take: agy's escalation (every child
    is signalled at once), then the shutdown grace."""
    return settings.sigint_grace_s + settings.sigterm_grace_s + settings.shutdown_grace_s


@attrs.frozen
class ShutdownClient:
    """A client at shutdown: its peer, a name for the log, and by when its
    answers and its line in progress must be written (then it is given up)."""

    peer: Peer
    name: str
    end: float


async def shut_down(
    manager: SessionManager,
    budget_s: float,
    clients: Callable[[float], Sequence[ShutdownClient]],
) -> None:
    """The one shutdown sequence, of the stdio bridge and of the daemon: every
    session closed within ``budget_s``; every request still in flight (a load
    starting agy, a close waiting behind it) cancelled, so each is answered
    too; then each client's answers flushed and its line in progress finished
    by its own end (``clients(closed_at)``), all clients at once."""
    with trio.move_on_after(budget_s) as scope:
        await manager.close_all()
    if scope.cancelled_caught:
        logger.warning("sessions did not close within %.1f s; cancelling", budget_s)
    closed_at = trio.current_time()
    connected = clients(closed_at)
    for client in connected:
        if client.peer.cancel_requests():
            logger.info("shutdown: cancelled the requests still in flight of %s", client.name)
    async with trio.open_nursery() as nursery:
        for client in connected:
            nursery.start_soon(_flush_client, client)


async def _flush_client(client: ShutdownClient) -> None:
    """The client's answers flushed, then its line in progress finished, by its end."""
    peer = client.peer
    if peer.writing:
        logger.info("shutdown: finishing the line being written to %s", client.name)
    with trio.move_on_at(client.end):
        await peer.wait_requests_done()
        await peer.flush()
    left = client.end - trio.current_time()
    if left > 0:
        await finish_lines([peer], left)
    elif peer.writing:
        logger.warning("%s did not read within the shutdown grace: stopping mid-line", client.name)


async def finish_lines(peers: Sequence[Peer], grace_s: float) -> None:
    """At shutdown: a line started to a client is finished (one reading slowly
    gets it whole), later ones are dropped; a client that stopped reading for
    good is given up after ``grace_s``."""
    if any(peer.writing for peer in peers):
        logger.info("shutdown: finishing the line being written to a client")
    with trio.move_on_after(grace_s) as finishing:
        async with trio.open_nursery() as nursery:
            for peer in peers:
                nursery.start_soon(peer.close_output)
    if finishing.cancelled_caught:
        logger.warning("a client did not read for %.1f s: stopping mid-line", grace_s)


async def watch_signals(shutdown: trio.Event) -> None:
    """SIGTERM, SIGHUP or SIGINT: shut down (the bridge's and the daemon's one watcher)."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("received %s: shutting down", signal.Signals(signum).name)
            shutdown.set()


@asynccontextmanager
async def safety_net() -> AsyncIterator[None]:
    """For a bridge process that may be killed (SIGKILL): what bridges that died
    left is ended first, then the body runs with a watchdog that ends this
    process's agy children if it dies too (agy/ownership.py). Used by both hosts."""
    # Loaded here, not at start-up: the stdio bridge enters it once initialize is answered.
    from ..agy import end_orphans, watched  # noqa: PLC0415
    from ..permissions import DIR_PREFIX, remove_orphaned_roots, runtime_bases  # noqa: PLC0415

    await end_orphans(remove_orphaned_roots)
    async with watched(runtime_bases(), DIR_PREFIX):
        yield
