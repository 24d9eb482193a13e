"""The live sessions of one bridge process, each supervised in one nursery."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import trio

from .deps import SessionDeps

if TYPE_CHECKING:
    from .outlet import ClientSink
    from .session import Session
    from .spec import SessionSpec

logger = logging.getLogger(__name__)


@attrs.define
class _LifecycleLock:
    lock: trio.Lock = attrs.Factory(trio.Lock)
    #: Tasks holding or waiting for ``lock`` (the entry goes when none is left).
    users: int = 0


class SessionManager:
    """Creates, finds and closes sessions; :meth:`run` is their nursery."""

    def __init__(self, deps: SessionDeps) -> None:
        self.deps = deps
        self.store = deps.store
        self._sessions: dict[str, Session] = {}
        #: Sessions being started, so two loads of one stored session race
        #: to one agy child, not two.
        self._starting: dict[str, trio.Event] = {}
        #: Sessions whose last instance ended silent after a cancelled answer.
        self._muted: set[str] = set()
        #: Per session id, while a load, resume, close or delete holds or wants it.
        self._lifecycle: dict[str, _LifecycleLock] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own every session until cancelled (cancel kills all agy children)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    @asynccontextmanager
    async def lifecycle(self, session_id: str) -> AsyncIterator[None]:
        """Hold the session's lifecycle lock: one load, resume, close or delete
        of ``session_id`` at a time, whichever client sent it (each client's
        own are in wire order already: agent/ordering.py), so each takes effect
        as a whole (a delete cannot run between a load's read of the store and
        its open). FIFO; not re-entrant (a second hold in one task raises
        RuntimeError rather than deadlock).

        Cancellation: a wait for the lock can be cancelled; nothing is held then.
        """
        entry = self._lifecycle.get(session_id)
        if entry is None:
            entry = self._lifecycle[session_id] = _LifecycleLock()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if not entry.users:
                del self._lifecycle[session_id]

    def get(self, session_id: str) -> Session | None:
        """The live session with this id (not one that has ended)."""
        session = self._sessions.get(session_id)
        return None if session is None or session.ended else session

    def client_spoke(self, session_id: str) -> None:
        """A request for a session that has no live instance: a later instance
        need not stay silent."""
        self._muted.discard(session_id)

    def load_sessions(self) -> None:
        """Import what the first session runs on (they load lazily otherwise)."""
        from . import outlet, session  # noqa: F401, PLC0415

    def __len__(self) -> int:
        return len(self._sessions)

    def live(self) -> list[Session]:
        return list(self._sessions.values())

    async def create(self, spec: SessionSpec, client: ClientSink | None) -> Session:
        """Start a session and its agy child; returns once agy is spawned.

        Raises:
            AgyStartError: agy could not be started.
        """

        async def given() -> SessionSpec:
            return spec

        session, _ = await self.open(spec.session_id, given, client)
        return session

    async def open(
        self,
        session_id: str,
        make_spec: Callable[[], Awaitable[SessionSpec]],
        client: ClientSink | None,
    ) -> tuple[Session, bool]:
        """The live session with this id, or a new one from ``make_spec``:
        (session, started now). An open while another is starting the same
        session waits for it and gets that session: one agy child per session.

        Raises:
            AgyStartError: agy could not be started.
        """
        assert self._nursery is not None, "SessionManager.run is not running"
        while True:
            live = self._sessions.get(session_id)
            if live is not None and live.closing:
                await live.closed.wait()  # then open it afresh
                continue
            if live is not None:
                return live, False
            starting = self._starting.get(session_id)
            if starting is None:
                break
            await starting.wait()  # then look again (it may have failed)
        # The session machinery is loaded by the first session, not at start-up:
        # a bridge answers initialize without it (issue 15).
        from .outlet import Outlet  # noqa: PLC0415
        from .session import Session  # noqa: PLC0415

        started = self._starting[session_id] = trio.Event()
        try:
            spec = await make_spec()
            if session_id in self._muted:
                spec = attrs.evolve(spec, muted=True)
            outlet = Outlet(spec.session_id, client, takeovers=self.deps.many_clients)
            session = Session(spec, self.deps, outlet)
            await self._nursery.start(self._session_task, session)
        finally:
            del self._starting[session_id]
            started.set()
        return session, True

    async def _session_task(
        self, session: Session, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        ready = False

        class _Ready:
            def started(self, value: None = None) -> None:
                nonlocal ready
                ready = True
                task_status.started()

        self._sessions[session.session_id] = session
        try:
            await session.run(task_status=_Ready())
        except Exception:
            if not ready:
                raise
            # One broken session must not take the others down; its prompts
            # were answered with the error as it ended.
            logger.exception("session %s failed", session.session_id)
        finally:
            if self._sessions.get(session.session_id) is session:
                del self._sessions[session.session_id]
            if session.core.muted:
                self._muted.add(session.session_id)

    async def close(self, session_id: str) -> bool:
        """Close one session; False if it is not live. Waits for agy to be gone."""
        session = self._sessions.get(session_id)
        if session is None:
            return False
        await session.close()
        return True

    async def close_all(self) -> None:
        """Close every session concurrently (bounded by agy's escalation)."""
        async with trio.open_nursery() as nursery:
            for session in list(self._sessions.values()):
                nursery.start_soon(session.close)
