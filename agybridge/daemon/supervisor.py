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
* a connection that reads nothing of what it was sent for the read timeout
  is detached from its sessions the same way (and told), so a frozen editor
  stalls no turn (:mod:`.output` knows since when it has not read);
* ``_agybridge/status`` and ``_agybridge/stop`` are answered on the same
  socket (ACP leaves ``_`` names to extensions);
* each prompt being served is noted in the store (:mod:`.interrupted`), so
  the next daemon can journal a turn this one's death cut off.

The idle exit (AGYBRIDGE_DAEMON_IDLE_EXIT_S) is the deadline of the wait for
the next connection: a client is served, or refused (``attach`` then starts a
new daemon), never accepted and dropped.

Shutdown (``stop``, SIGTERM, SIGINT, SIGHUP): every session is closed (every
prompt answered cancelled, every agy child reaped) within the stop budget,
the answers are flushed to the clients still connected (one that does not
read gets the shutdown grace from the stop on, no more), then everything is
cancelled and the socket removed.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import trio

from ..agent.auth import SignInState
from ..agy import end_orphans, watched
from ..attach.start import EXIT_DAEMON_RUNNING
from ..config import Settings
from ..host import RESPONSE_FLUSH_S, ShutdownClient, shut_down, stop_budget_s, watch_signals
from ..jsonrpc import PeerClosedError, RpcError
from ..permissions import DIR_PREFIX, remove_orphaned_roots, runtime_bases
from ..server import doctor_lines, open_store, session_deps, start_housekeeping
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
from .interrupted import PromptNotes, journal_interrupted
from .listener import (
    DaemonRunningError,
    SocketPathError,
    own_socket_path,
    peer_allowed,
    take_queued,
)
from .readers import ReadWatch
from .status import status_of

logger = logging.getLogger(__name__)



class Daemon:
    """The supervisor's state: sessions, connections, shutdown."""

    def __init__(
        self,
        settings: Settings,
        socket_path: Path,
        store: AsyncStore,
        *,
        prompt_notes: PromptNotes | None = None,
    ) -> None:
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
        self.stop_budget_s = stop_budget_s(settings)
        #: Permission questions waiting for an answer, per session.
        self.questions: Counter[str] = Counter()
        #: The prompts being served, kept in the store (interrupted.py).
        self.prompt_notes = prompt_notes
        #: Connections accepted and not ended (counted before their task starts).
        self._accepted = 0
        #: The wait for the next connection, while there is one: its deadline
        #: is the idle exit's.
        self._accepting: trio.CancelScope | None = None
        #: Detaches a client that stops reading.
        self.read_watch = ReadWatch(self.manager, settings.client_read_timeout_s)

    # --- connections --------------------------------------------------------

    async def serve_connection(self, stream: trio.SocketStream) -> None:
        """One client, until it closes the connection (or shutdown)."""
        try:
            async with stream:
                if peer_allowed(stream.socket, os.getuid()):
                    await self._serve_client(stream)
        finally:
            self._accepted -= 1
            self._note_activity()

    async def _serve_client(self, stream: trio.SocketStream) -> None:
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
        logger.info("client %d connected", number)
        try:
            async with trio.open_nursery() as watching:
                watching.start_soon(self.read_watch.watch, connection, watching)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(connection.peer.run)
                    await connection.peer.wait_receive_closed()
                    self.detach(connection)
                    # peer.run ends once this client's requests are answered;
                    # a prompt's answer waits for its turn (then is dropped).
                watching.cancel_scope.cancel(reason="the client is gone")
        finally:
            self.detach(connection)
            del self.connections[number]
            logger.info("client %d gone", number)

    # --- idle exit ------------------------------------------------------------

    def _idle_deadline(self) -> float:
        idle_s = self.settings.daemon_idle_exit_s
        if idle_s <= 0 or self._accepted or len(self.manager):
            return math.inf
        return trio.current_time() + idle_s

    def _note_activity(self) -> None:
        """A client came or went: the idle exit's deadline moves."""
        if self._accepting is not None:
            self._accepting.deadline = self._idle_deadline()

    async def _accept(self, listener: trio.socket.SocketType, nursery: trio.Nursery) -> None:
        """Serve every connection (in ``nursery``). With an idle exit set, stop
        listening once no client and no session were there for that long:
        what is queued already is served, then the socket is closed with no
        checkpoint in between, so a client is served or refused (``attach``
        then starts a new daemon), never accepted and dropped (issue 28)."""
        while True:
            with trio.CancelScope(deadline=self._idle_deadline()) as accepting:
                self._accepting = accepting
                try:
                    sock, _ = await listener.accept()
                finally:
                    self._accepting = None
                self._serve(nursery, sock)
            if not accepting.cancelled_caught:
                continue
            queued = take_queued(listener)
            for sock in queued:
                self._serve(nursery, sock)
            if queued:
                continue
            listener.close()
            logger.info(
                "no client and no session for %.0f s: exiting", self.settings.daemon_idle_exit_s
            )
            self.shutdown.set()
            return

    def _serve(self, nursery: trio.Nursery, sock: trio.socket.SocketType) -> None:
        self._accepted += 1
        self._note_activity()
        nursery.start_soon(self.serve_connection, trio.SocketStream(sock))

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
            nursery.start_soon(watch_signals, self.shutdown)
            if self.prompt_notes is not None:
                nursery.start_soon(self.prompt_notes.run)
            nursery.start_soon(self._accept, listener, nursery)
            ready.set()
            await self.shutdown.wait()
            await self._shut_down()
            nursery.cancel_scope.cancel(reason="daemon stopped")

    async def _shut_down(self) -> None:
        """Every session closed within the stop budget, then every client's
        answers flushed and the line in progress finished (server.shut_down):
        a client that reads gets `RESPONSE_FLUSH_S` at least, one that does
        not the shutdown grace from the stop on, and no more."""
        grace = self.settings.shutdown_grace_s
        self.read_watch.shutting_down(grace, self.connections.values())
        deadline = self.read_watch.deadline

        def clients(closed_at: float) -> list[ShutdownClient]:
            ends = []
            for connection in self.connections.values():
                # One given up for not reading may be reading again, slowly:
                # the rest of the grace, not nothing.
                end = deadline
                if connection.not_reading_since is None:
                    end = max(deadline, closed_at + RESPONSE_FLUSH_S)
                ends.append(ShutdownClient(connection.peer, f"client {connection.number}", end))
            return ends

        await shut_down(self.manager, self.stop_budget_s, clients)


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
                    await journal_interrupted(store)
                    notes = PromptNotes(store)
                    daemon = Daemon(settings, socket_path, store, prompt_notes=notes)
                    try:
                        await _serve_ready(daemon, listener, ready_fd)
                    finally:
                        with trio.CancelScope(shield=True):
                            await notes.flush()  # none left: a clean stop
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
