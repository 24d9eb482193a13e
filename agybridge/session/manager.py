"""The live sessions of one bridge process, each supervised in one nursery."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import trio

from ..agy import EscalationPolicy
from ..store import AsyncStore
from .config import Catalog, LaunchSettings
from .gate import AskClient
from .session import Session, UpdateSink

logger = logging.getLogger(__name__)


class SessionManager:
    """Creates, finds and closes sessions; :meth:`run` is their nursery."""

    def __init__(
        self,
        *,
        agy_bin: str,
        policy: EscalationPolicy,
        max_line_bytes: int,
        send_update: UpdateSink,
        env: Mapping[str, str] | None = None,
        context_window: int | None = None,
        catalog: Callable[[], Catalog] = Catalog,
        store: AsyncStore | None = None,
        staging_base: str | None = None,
        keep_staging: bool = False,
        ask_client: AskClient | None = None,
    ) -> None:
        self._agy_bin = agy_bin
        self._policy = policy
        self._max_line_bytes = max_line_bytes
        self._send_update = send_update
        self._env = env
        self._context_window = context_window
        self._catalog = catalog
        self.store = store
        self._staging_base = staging_base
        self._keep_staging = keep_staging
        self._ask_client = ask_client
        self._sessions: dict[str, Session] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Own every session until cancelled (cancel kills all agy children)."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def __len__(self) -> int:
        return len(self._sessions)

    def live(self) -> list[Session]:
        return list(self._sessions.values())

    async def create(
        self,
        *,
        cwd: str,
        additional_dirs: tuple[str, ...] = (),
        settings: LaunchSettings | None = None,
        terminals: bool = False,
        session_id: str | None = None,
        conversation_id: str | None = None,
        title: str | None = None,
        next_turn: int = 0,
        created_at: str | None = None,
        mcp_config: Mapping[str, Any] | None = None,
    ) -> Session:
        """Start a session (new, or an earlier one by id) and its agy child;
        returns once agy is spawned.

        Raises:
            AgyStartError: agy could not be started.
        """
        assert self._nursery is not None, "SessionManager.run is not running"
        session = Session(
            session_id=session_id or f"sess_{uuid.uuid4().hex}",
            cwd=cwd,
            additional_dirs=additional_dirs,
            settings=settings,
            catalog=self._catalog,
            conversation_id=conversation_id,
            title=title,
            store=self.store,
            next_turn=next_turn,
            created_at=created_at,
            staging_base=self._staging_base,
            keep_staging=self._keep_staging,
            mcp_config=mcp_config,
            ask_client=self._ask_client,
            agy_bin=self._agy_bin,
            policy=self._policy,
            max_line_bytes=self._max_line_bytes,
            send_update=self._send_update,
            env=self._env,
            terminals=terminals,
            context_window_override=self._context_window,
        )
        await self._nursery.start(self._session_task, session)
        return session

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
            # One broken session must not take the others down.
            logger.exception("session %s failed", session.session_id)
        finally:
            self._sessions.pop(session.session_id, None)

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
