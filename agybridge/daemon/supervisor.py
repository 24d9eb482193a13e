"""``agybridge daemon``: one long-lived process owns every session.

The daemon is the host (``host/``) with a client per socket connection. Its
main nursery is the host's: the session manager (one nursery per session,
every agy child inside), model discovery and housekeeping, the signal
watcher, and here the socket listener (one task per connection). Each
connection gets its own JSON-RPC peer and ACP agent (``host/connection.py``);
the sessions are shared, so a session outlives the connection that opened it:

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

import logging
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from ..attach.start import EXIT_DAEMON_RUNNING
from ..config import Settings
from ..host import Connection, Host, open_store
from ..host.shutdown import safety_net
from ..store import (
    AsyncStore,
    StoreInUseError,
    StorePathError,
    claim_for_daemon,
    release_claim,
)
from .interrupted import PromptNotes, journal_interrupted
from .listener import (
    DaemonRunningError,
    SocketPathError,
    own_socket_path,
    peer_allowed,
    take_queued,
)
from .output import ClientOutput
from .readers import ReadWatch
from .status import status_of

logger = logging.getLogger(__name__)


class Daemon:
    """The supervisor: the host (host/) with a client per socket connection,
    the idle exit, the control methods and the notes of prompts served."""

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
        self.host = Host(settings, store, single_client=False)
        self.manager = self.host.manager
        #: Detaches a client that stops reading; at a stop, gives it the grace.
        self.read_watch = ReadWatch(
            self.manager, settings.client_read_timeout_s, settings.shutdown_grace_s
        )
        self.started_at = trio.current_time()
        #: The prompts being served, kept in the store (interrupted.py).
        self.prompt_notes = prompt_notes
        #: Connections accepted and not ended (counted before their task starts).
        self._accepted = 0
        #: The wait for the next connection, while there is one: its deadline
        #: is the idle exit's.
        self._accepting: trio.CancelScope | None = None

    @property
    def connections(self) -> Mapping[int, Connection]:
        return self.host.connections

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
        output = ClientOutput(stream.socket)
        connection = self.host.connect(stream, output, control=self, hung_up=output.hung_up)
        logger.info("client %d connected", connection.number)
        try:
            async with trio.open_nursery() as watching:
                watching.start_soon(self.read_watch.watch, connection, output, watching)
                # Until its requests are answered; a prompt's answer waits for
                # its turn (then is dropped).
                await self.host.serve(connection)
                watching.cancel_scope.cancel(reason="the client is gone")
        finally:
            logger.info("client %d gone", connection.number)

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
            self.host.stop()
            return

    def _serve(self, nursery: trio.Nursery, sock: trio.socket.SocketType) -> None:
        self._accepted += 1
        self._note_activity()
        nursery.start_soon(self.serve_connection, trio.SocketStream(sock))

    # --- control (host/connection.py's Control) -------------------------------

    def status(self) -> dict[str, Any]:
        return status_of(self)

    def stop(self, budget_s: float | None) -> dict[str, Any]:
        self.host.stop(budget_s)
        logger.info("stop requested (budget %.1f s)", self.host.stop_budget_s)
        return {"pid": os.getpid(), "stopping": True}

    def prompt_started(self, params: Any) -> str | None:
        return self.prompt_notes.started(params) if self.prompt_notes is not None else None

    def prompt_ended(self, note: str | None) -> None:
        if self.prompt_notes is not None:
            self.prompt_notes.ended(note)

    # --- the whole life -------------------------------------------------------

    async def run(self, listener: trio.socket.SocketType, ready: trio.Event) -> None:
        """Serve until stopped: then every session is closed within the stop
        budget and every client's answers flushed (the host's shutdown; a
        client that reads gets `RESPONSE_FLUSH_S` at least, one that does not
        the shutdown grace from the stop on, and no more: readers.py)."""
        async with trio.open_nursery() as nursery:
            tasks = await nursery.start(self.host.run, self.read_watch)
            self.host.start_housekeeping(tasks)
            if self.prompt_notes is not None:
                tasks.start_soon(self.prompt_notes.run)
            tasks.start_soon(self._accept, listener, tasks)
            ready.set()


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
            async with safety_net():
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
