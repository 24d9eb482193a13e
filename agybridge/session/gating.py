"""The session's side of the permission gate (see ``gate.py`` for the gate).

Creating and verifying the gate, deciding whether agy runs behind it, the
fail-closed fallback to ``safe`` with its one-time notice, and safe mode's
"allow for this session and retry". :class:`Gating` is a mixin of
:class:`~agybridge.session.session.Session` and declares the state it uses.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

import trio

from ..acp import models
from ..agy import AgyChild
from ..permissions import HookRootError
from .config import GATED_MODES, LaunchSettings
from .events import Turn
from .gate import AskClient, Gate
from .mapper import OutcomeKind
from .staging import StagingArea

logger = logging.getLogger(__name__)


class Gating:
    """Gate glue (mixed into Session)."""

    # Session state used here (set in Session.__init__).
    session_id: str
    cwd: str
    additional_dirs: tuple[str, ...]
    agy_bin: str
    settings: LaunchSettings
    staging: StagingArea | None
    gate: Gate | None
    _ask_client: AskClient | None
    _send_update: Callable[[str, models.SessionUpdate], Awaitable[None]]
    _env: Mapping[str, str] | None
    _turn: Turn | None
    _child: AgyChild | None
    _retiring: AgyChild | None
    _gate_notice_sent: bool

    def _is_cancelled(self, turn: Turn) -> bool:
        raise NotImplementedError

    async def _start_gate(self, nursery: trio.Nursery) -> None:
        if self._ask_client is None:
            return
        ask_client = self._ask_client
        roots = (self.cwd, *self.additional_dirs)
        if self.staging is not None:
            roots = (*roots, self.staging.root)

        async def send(update: models.SessionUpdate) -> None:
            await self._send_update(self.session_id, update)

        gate = Gate(
            session_id=self.session_id,
            roots=roots,
            mode=self.settings.mode,
            ask_client=ask_client,
            send_update=send,
            current_turn=lambda: self._turn.mapper if self._turn is not None else None,
        )
        try:
            await gate.start(nursery)
        except (HookRootError, OSError) as exc:
            gate.failure = f"could not create the permission gate: {exc}"
            gate.ready.set()
            logger.warning("session %s: %s", self.session_id, gate.failure)
        self.gate = gate
        if gate.failure is None and self.settings.mode in GATED_MODES:
            nursery.start_soon(gate.verify, self.agy_bin, self._env)

    def _gate_in_use(self) -> bool:
        """Launch agy behind the gate: a gated mode, or safe mode after the
        user allowed something for the session (never an unchecked gate)."""
        gate = self.gate
        if gate is None or gate.failure is not None:
            return False
        mode = self.settings.mode
        return mode in GATED_MODES or (mode == "safe" and gate.verified and gate.session_allows)

    async def _offer_allow_and_retry(self, turn: Turn) -> bool:
        """Safe mode, agy auto-denied something: ask whether to allow it for the
        session and run the prompt again. True when the user allowed it."""
        gate = self.gate
        denied = {p for p in turn.mapper.denied if p}
        outcome = turn.mapper.outcome
        if (
            gate is None
            or self._ask_client is None
            or self.settings.mode != "safe"
            or not denied
            or outcome is None
            or outcome.kind is not OutcomeKind.END_TURN
            or self._is_cancelled(turn)
        ):
            return False
        allowed = await gate.ask_allow_for_session(denied, f"{turn.mapper.message_id}-allow")
        if not allowed or self._is_cancelled(turn):
            return False
        if not gate.ready.is_set():
            await gate.verify(self.agy_bin, self._env)
        if gate.failure is not None:
            await self._send_update(
                self.session_id,
                models.AgentMessageChunk(
                    content=models.TextContent(
                        text=f"\n\n⚠️ Could not allow it: the permission gate is not available "
                        f"({gate.failure})."
                    ),
                    message_id=turn.mapper.message_id,
                ),
            )
            return False
        gate.allow_for_session(denied)
        logger.info("session %s: allowed %s for the session; retrying", self.session_id, denied)
        # agy must run behind the gate from now on: respawn, resuming.
        child = self._child
        if child is not None and child.alive:
            self._child = None
            self._retiring = child
            child.kill("allowing for the session")
        return True

    async def _ensure_gate(self, turn: Turn) -> None:
        """Before a turn in a gated mode: the gate must be verified. If agy
        does not load it, fall back to agy's own checks and say so once."""
        gate = self.gate
        if gate is None or not (self.settings.mode in GATED_MODES or self._gate_in_use()):
            return
        await gate.ready.wait()
        gate.accept_requests()
        turn.mapper.gate_active = gate.failure is None
        if gate.failure is None:
            return
        child = self._child
        if child is not None and "--dangerously-skip-permissions" in child.argv:
            # Spawned warm with the gate before it was checked: never run a
            # turn on it.
            self._child = None
            self._retiring = child
            child.kill("permission gate not verified")
        if not self._gate_notice_sent:
            self._gate_notice_sent = True
            await self._send_update(
                self.session_id,
                models.AgentMessageChunk(
                    content=models.TextContent(
                        text=f"⚠️ The permission gate is not available ({gate.failure}), so this "
                        "session runs in safe mode: agy's own checks apply, and actions that "
                        "need approval are auto-denied.\n\n"
                    ),
                    message_id=f"{turn.mapper.message_id}-gate",
                ),
            )
