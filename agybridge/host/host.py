"""A bridge process's host: what every client of it shares, and how a client
is served.

The stdio bridge (``server.py``) is a host with one client, over stdin and
stdout; the daemon (``daemon/``) is a host with a client per socket
connection. Both have one session manager (one nursery per session, every
agy child inside), one model catalog, one sign-in state, one counter that
numbers every client's messages in the order they arrive (a
``session/cancel`` cancels what arrived before it, whichever client sent
that), the same housekeeping, the same shutdown and the same signal watcher.
They differ in one rule, ``single_client``: when the stdio bridge's client
stops writing (stdin EOF) or reading (EPIPE) the bridge shuts down, while a
daemon's client that leaves only lets its sessions go (their turns go on, or
are cancelled with ``on_disconnect = cancel``).
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..agent.auth import SignInState
from ..jsonrpc import PeerClosedError, RpcError
from ..session import SessionManager
from .catalog import CatalogService
from .connection import Connection, Control
from .housekeeping import doctor_lines, session_deps, start_housekeeping
from .shutdown import RESPONSE_FLUSH_S, ShutdownClient, shut_down, stop_budget_s, watch_signals

if TYPE_CHECKING:
    from ..config import Settings
    from ..session import Session
    from ..session.deps import Phrase
    from ..store import AsyncStore

logger = logging.getLogger(__name__)


class ClientEnds(Protocol):
    """By when each client's answers and its line in progress must be written
    at shutdown (then it is given up)."""

    def stopping(self, connections: Iterable[Connection]) -> None:
        """The shutdown has begun (before the sessions are closed)."""

    def end(self, connection: Connection, closed_at: float) -> float:
        """``connection``'s end, the sessions closed at ``closed_at``."""
        ...


class AfterClose:
    """Each client's answers get `RESPONSE_FLUSH_S` once the sessions are
    closed, then its line in progress the shutdown grace."""

    def __init__(self, grace_s: float) -> None:
        self._grace_s = grace_s

    def stopping(self, connections: Iterable[Connection]) -> None:
        pass

    def end(self, connection: Connection, closed_at: float) -> float:
        return closed_at + RESPONSE_FLUSH_S + self._grace_s


class Host:
    """What every client of one bridge process shares (module docstring)."""

    def __init__(
        self,
        settings: Settings,
        store: AsyncStore,
        *,
        single_client: bool,
    ) -> None:
        self.settings = settings
        self.store = store
        self.single_client = single_client
        self.catalog = CatalogService(settings.db_path)
        self.manager = SessionManager(
            session_deps(
                settings,
                store,
                self.catalog,
                self.ask_client,
                ask_question=self.ask_question,
                many_clients=not single_client,
            )
        )
        #: What the bridge knows about agy's sign-in (shared by every client).
        self.sign_in = SignInState(settings.resolve_agy_bin() or settings.agy_bin)
        self.connections: dict[int, Connection] = {}
        self._next_connection = 1
        #: Every client's incoming messages are numbered from this one counter,
        #: in the order they arrive (a range per connection made every prompt
        #: of an older connection come "before" a newer connection's cancel).
        self.seqs = itertools.count()
        self.shutdown = trio.Event()
        self.stop_budget_s = stop_budget_s(settings)
        #: Permission questions waiting for an answer, per session.
        self.questions: Counter[str] = Counter()

    def doctor(self) -> list[str]:
        """The ``/doctor`` command's report."""
        return doctor_lines(self.settings, self.catalog, self.manager, self.sign_in)

    # --- the whole life -------------------------------------------------------

    async def run(
        self,
        client_ends: ClientEnds | None = None,
        *,
        task_status: trio.TaskStatus[trio.Nursery] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the session manager and the signal watcher until shutdown; then
        close every session and flush every client's answers, each by the end
        ``client_ends`` gives it (default: `AfterClose`), and cancel the rest.
        Started with ``nursery.start``: hands back the nursery the host's own
        tasks (clients, housekeeping) run in, cancelled once shut down."""
        ends = client_ends or AfterClose(self.settings.shutdown_grace_s)
        async with trio.open_nursery() as nursery:
            await nursery.start(self.manager.run)
            nursery.start_soon(watch_signals, self.shutdown)
            task_status.started(nursery)
            await self.shutdown.wait()
            ends.stopping(self.connections.values())

            def clients(closed_at: float) -> list[ShutdownClient]:
                return [
                    ShutdownClient(c.peer, c.name, ends.end(c, closed_at))
                    for c in self.connections.values()
                ]

            await shut_down(self.manager, self.stop_budget_s, clients)
            nursery.cancel_scope.cancel(reason="shutdown")

    def start_housekeeping(self, nursery: trio.Nursery) -> None:
        """Model discovery, agy's ``--version``, the agy-acp-map import and the
        stale staging sweep (housekeeping.py)."""
        start_housekeeping(
            nursery,
            self.settings,
            store=self.store,
            catalog=self.catalog,
            manager=self.manager,
            sign_in=self.sign_in,
        )

    def stop(self, budget_s: float | None = None) -> None:
        """Shut down (``budget_s``: how long closing the sessions may take)."""
        if budget_s is not None:
            self.stop_budget_s = budget_s
        self.shutdown.set()

    # --- clients --------------------------------------------------------------

    def connect(
        self,
        receive_stream: trio.abc.ReceiveStream,
        send_stream: trio.abc.SendStream,
        *,
        control: Control | None = None,
        hung_up: Callable[[], bool] | None = None,
        on_sessions_loaded: Callable[[], None] | None = None,
    ) -> Connection:
        """A new client over these streams (served by `serve`)."""
        number = self._next_connection
        self._next_connection += 1
        connection = Connection(
            number,
            receive_stream,
            send_stream,
            self,
            seqs=self.seqs,
            control=control,
            name="the client" if self.single_client else f"client {number}",
            hung_up=hung_up,
            on_sessions_loaded=on_sessions_loaded,
        )
        self.connections[number] = connection
        return connection

    async def serve(self, connection: Connection) -> None:
        """Serve ``connection`` until its input has ended and its requests are
        answered (a prompt's answer waits for its turn). When its input ends,
        the stdio bridge shuts down; a daemon's client lets its sessions go."""
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(connection.peer.run)
                if self.single_client:
                    nursery.start_soon(self._shut_down_when_unread, connection)
                await connection.peer.wait_receive_closed()
                self._client_left(connection, "stdin closed")
        finally:
            self.detach(connection)
            del self.connections[connection.number]

    async def _shut_down_when_unread(self, connection: Connection) -> None:
        # Nobody reads our output (EPIPE): like stdin EOF, not a reason to
        # keep running agy turns.
        await connection.peer.wait_send_broken()
        self._client_left(connection, "stdout closed")

    def _client_left(self, connection: Connection, how: str) -> None:
        if self.single_client:
            if not self.shutdown.is_set():
                logger.info("%s: shutting down", how)
            self.shutdown.set()
        else:
            self.detach(connection)

    def detach(self, connection: Connection) -> None:
        """The client is gone: its sessions lose it (and, with
        ``on_disconnect = cancel``, their turns)."""
        if self.single_client:
            return  # the bridge shuts down: its sessions are closed, not let go
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
        asked = await self.ask_question(session_id, lambda _capabilities: (method, params))
        assert asked is not None  # the phrase always asks
        return asked[1]

    async def ask_question(self, session_id: Any, phrase: Phrase) -> tuple[str, Any] | None:
        """Ask the client attached to the session what ``phrase`` makes of that
        client's capabilities (its method and params): phrased again for each
        client the question goes to. Returns the method sent and the answer;
        None when ``phrase`` had nothing to ask that client."""
        session = self.manager.get(session_id) if isinstance(session_id, str) else None
        if session is None:
            raise RpcError(-32603, f"no live session {session_id!r} to ask about")
        self.questions[session.session_id] += 1
        try:
            while True:
                client = await session.outlet.wait_attached()
                connection = self.connection_of(session)
                if connection is None or connection.peer.receive_closed:
                    if self.single_client:  # no other client will come
                        raise PeerClosedError("cannot ask the client a question: it has left")
                    # The client is going away: wait for the next one.
                    if session.outlet.client is client:
                        session.outlet.detach()
                    continue
                phrased = phrase(connection.agent.client_capabilities)
                if phrased is None:
                    return None
                method, params = phrased
                # A client that another one took the session from is not
                # asked any more: the question is withdrawn ($/cancel_request)
                # and asked of the client that drives the session now.
                with session.outlet.while_attached(client):
                    try:
                        return method, await connection.request(method, params)
                    except PeerClosedError:
                        if session.outlet.client is client:
                            session.outlet.detach()
        finally:
            self.questions[session.session_id] -= 1
            if not self.questions[session.session_id]:
                del self.questions[session.session_id]
