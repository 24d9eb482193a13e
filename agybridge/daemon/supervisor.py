"""``agybridge daemon``: one long-lived process owns every session.

Main nursery: the session manager (one nursery per session, every agy child
inside), model discovery and housekeeping, the socket listener (one task per
connection) and the signal watcher. Each connection gets its own JSON-RPC
peer and ACP agent (:mod:`.connection`); the sessions are shared, so a
session outlives the connection that opened it:

* a connection that ends detaches its sessions (``on_disconnect = keep``:
  their turns go on; ``cancel``: their turns are cancelled), it never closes
  them;
* a permission question goes to the client attached to its session, and
  waits for one while none is (the hook's own timeout still applies);
* ``_agybridge/status`` and ``_agybridge/stop`` are answered on the same
  socket (ACP leaves ``_`` names to extensions).

Shutdown (``stop``, SIGTERM, SIGINT, SIGHUP): every session is closed (every
prompt answered cancelled, every agy child reaped) within the stop budget,
the answers are flushed to the clients still connected, then everything is
cancelled and the socket removed.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import trio

from ..agent.auth import SignInState
from ..agy import end_orphans, watched
from ..attach.relay import EXIT_DAEMON_RUNNING
from ..config import Settings
from ..jsonrpc import PeerClosedError, RpcError
from ..permissions import DIR_PREFIX, remove_orphaned_roots, runtime_bases
from ..server import (
    doctor_lines,
    finish_lines,
    open_store,
    session_deps,
    start_housekeeping,
)
from ..session import Session, SessionManager
from ..session.catalog import CatalogService
from ..store import (
    AsyncStore,
    StoreInUseError,
    StorePathError,
    claim_for_daemon,
    release_claim,
)
from .connection import Connection
from .listener import DaemonRunningError, SocketPathError, own_socket_path, peer_allowed
from .status import status_of

logger = logging.getLogger(__name__)

#: After the sessions are closed, how long their answers may take to reach
#: the clients still connected.
RESPONSE_FLUSH_S = 1.0


class Daemon:
    """The supervisor's state: sessions, connections, shutdown."""

    def __init__(self, settings: Settings, socket_path: Path, store: AsyncStore) -> None:
        self.settings = settings
        self.socket_path = socket_path
        self.store = store
        self.catalog = CatalogService()
        self.manager = SessionManager(
            session_deps(settings, store, self.catalog, self.ask_client, many_clients=True)
        )
        #: What the daemon knows about agy's sign-in (shared by every client).
        self.sign_in = SignInState(settings.resolve_agy_bin() or settings.agy_bin)
        self.connections: dict[int, Connection] = {}
        self._next_connection = 1
        #: Every connection's incoming messages are numbered from this one
        #: counter, in the order they arrive: a session/cancel cancels what
        #: arrived before it, whichever client sent that (a range per
        #: connection made every prompt of an older connection come "before" a
        #: newer connection's cancel, for ever).
        self.seqs = itertools.count()
        self.started_at = trio.current_time()
        self.shutdown = trio.Event()
        self.stop_budget_s = (
            settings.sigint_grace_s + settings.sigterm_grace_s + settings.shutdown_grace_s
        )
        #: Permission questions waiting for an answer, per session.
        self.questions: Counter[str] = Counter()
        #: Set when a client comes or goes (the idle-exit watch looks again).
        self._activity = trio.Event()

    # --- connections --------------------------------------------------------

    async def serve_connection(self, stream: trio.SocketStream) -> None:
        """One client, until it closes the connection (or shutdown)."""
        async with stream:
            if not peer_allowed(stream.socket, os.getuid()):
                return
            number = self._next_connection
            self._next_connection += 1
            connection = Connection(
                number,
                stream,
                self,
                doctor=functools.partial(
                    doctor_lines, self.settings, self.catalog, self.manager, self.sign_in
                ),
                seqs=self.seqs,
            )
            self.connections[number] = connection
            self._note_activity()
            logger.info("client %d connected", number)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(connection.peer.run)
                    await connection.peer.wait_receive_closed()
                    self.detach(connection)
                    # peer.run ends once this client's requests are answered;
                    # a prompt's answer waits for its turn (then is dropped).
            finally:
                self.detach(connection)
                del self.connections[number]
                self._note_activity()
                logger.info("client %d gone", number)

    def _note_activity(self) -> None:
        self._activity.set()
        self._activity = trio.Event()

    async def _idle_exit_task(self, idle_s: float) -> None:
        """Stop once no client and no session was there for ``idle_s``
        (sessions end through clients' requests, so clients going away is
        when to look)."""
        while True:
            activity = self._activity
            if self.connections or len(self.manager):
                await activity.wait()
                continue
            with trio.move_on_after(idle_s):
                await activity.wait()
            if activity.is_set():
                continue
            logger.info("no client and no session for %.0f s: exiting", idle_s)
            self.shutdown.set()
            return

    def detach(self, connection: Connection) -> None:
        """The client is gone: its sessions lose it (and, with
        ``on_disconnect = cancel``, their turns)."""
        for session in self.manager.live():
            if session.outlet.client is connection.sink:
                session.outlet.detach()
                logger.info(
                    "session %s detached from client %d", session.session_id, connection.number
                )
                policy = session.on_disconnect or self.settings.on_disconnect
                if policy == "cancel":
                    session.cancel(next(self.seqs))  # everything that arrived so far

    def connection_of(self, session: Session) -> Connection | None:
        client = session.outlet.client
        return next((c for c in self.connections.values() if c.sink is client), None)

    async def ask_client(self, method: str, params: Any) -> Any:
        """A session's question, to the client attached to that session; while
        none is, it waits for one (the hook's timeout bounds the wait)."""
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        session = self.manager.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            raise RpcError(-32603, f"no live session {session_id!r} to ask about")
        self.questions[session.session_id] += 1
        try:
            while True:
                client = await session.outlet.wait_attached()
                connection = self.connection_of(session)
                if connection is None or connection.peer.receive_closed:
                    # The client is going away: wait for the next one.
                    if session.outlet.client is client:
                        session.outlet.detach()
                    continue
                # A client that another one took the session from is not
                # asked any more: the question is withdrawn ($/cancel_request)
                # and asked of the client that drives the session now.
                with session.outlet.while_attached(client):
                    try:
                        return await connection.peer.request(method, params)
                    except PeerClosedError:
                        if session.outlet.client is client:
                            session.outlet.detach()
        finally:
            self.questions[session.session_id] -= 1
            if not self.questions[session.session_id]:
                del self.questions[session.session_id]

    # --- control ------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return status_of(self)

    def stop(self, budget_s: float | None) -> dict[str, Any]:
        if budget_s is not None:
            self.stop_budget_s = budget_s
        logger.info("stop requested (budget %.1f s)", self.stop_budget_s)
        self.shutdown.set()
        return {"pid": os.getpid(), "stopping": True}

    # --- the whole life -------------------------------------------------------

    async def run(self, listener: trio.socket.SocketType, ready: trio.Event) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.manager.run)
            start_housekeeping(
                nursery,
                self.settings,
                store=self.store,
                catalog=self.catalog,
                manager=self.manager,
                sign_in=self.sign_in,
            )
            nursery.start_soon(_watch_signals, self)
            if self.settings.daemon_idle_exit_s > 0:
                nursery.start_soon(self._idle_exit_task, self.settings.daemon_idle_exit_s)
            listeners = [trio.SocketListener(listener)]
            nursery.start_soon(trio.serve_listeners, self.serve_connection, listeners)
            ready.set()
            await self.shutdown.wait()
            budget = self.stop_budget_s
            with trio.move_on_after(budget) as scope:
                await self.manager.close_all()
            if scope.cancelled_caught:
                logger.warning("sessions did not close within %.1f s; cancelling", budget)
            for connection in list(self.connections.values()):
                connection.peer.cancel_requests()  # every request still gets its answer
            with trio.move_on_after(RESPONSE_FLUSH_S):
                for connection in list(self.connections.values()):
                    await connection.peer.wait_requests_done()
                    await connection.peer.flush()
            peers = [connection.peer for connection in self.connections.values()]
            await finish_lines(peers, self.settings.shutdown_grace_s)
            nursery.cancel_scope.cancel(reason="daemon stopped")


async def _watch_signals(daemon: Daemon) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP, signal.SIGINT) as signals:
        async for signum in signals:
            logger.info("received %s: stopping", signal.Signals(signum).name)
            daemon.shutdown.set()


async def serve_daemon(settings: Settings, socket_path: Path, ready_fd: int | None) -> None:
    """Run the daemon until it is stopped.

    Raises:
        DaemonRunningError: another daemon owns ``socket_path``.
    """
    async with own_socket_path(socket_path) as listener:
        # The only writer of its database (store/claim.py): taken after the
        # socket, so a second daemon on one socket names the first by it.
        db = settings.db_path
        claim = claim_for_daemon(db, str(socket_path)) if db is not None else None
        try:
            # As the stdio bridge does: what dead bridges left, then a watchdog
            # that ends this daemon's agy children if it is killed.
            await end_orphans(remove_orphaned_roots)
            async with watched(runtime_bases(), DIR_PREFIX):
                store = await open_store(settings.db_path)
                try:
                    await _serve_ready(Daemon(settings, socket_path, store), listener, ready_fd)
                finally:
                    await store.aclose()
        finally:
            if claim is not None:
                release_claim(claim, daemon=True)


async def _serve_ready(
    daemon: Daemon, listener: trio.socket.SocketType, ready_fd: int | None
) -> None:
    ready = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(daemon.run, listener, ready)
        await ready.wait()
        logger.info("listening on %s", daemon.socket_path)
        print(
            f"agybridge daemon pid {os.getpid()} listening on {daemon.socket_path}",
            file=sys.stderr,
            flush=True,
        )
        if ready_fd is not None:
            _tell_ready(ready_fd)


def _tell_ready(fd: int) -> None:
    """``attach`` waits for this byte (see attach/relay.py)."""
    try:
        os.write(fd, b"R")
    except OSError as exc:
        logger.warning("could not report readiness on fd %d: %s", fd, exc)
    finally:
        os.close(fd)


def run_daemon(settings: Settings, socket_path: Path, ready_fd: int | None = None) -> int:
    """``agybridge daemon``: the process exit status."""
    try:
        trio.run(serve_daemon, settings, socket_path, ready_fd)
    except DaemonRunningError as exc:
        print(f"agybridge daemon: {exc}", file=sys.stderr)
        return EXIT_DAEMON_RUNNING
    except (SocketPathError, PermissionError) as exc:  # attach.trust's refusals included
        print(f"agybridge daemon: {exc}", file=sys.stderr)
        return 1
    except StoreInUseError as exc:
        print(f"agybridge daemon: {exc}", file=sys.stderr)
        return 1
    except StorePathError as exc:
        print(f"agybridge daemon: {exc}", file=sys.stderr)
        return 2
    return 0
