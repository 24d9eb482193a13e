"""The session's side of the permission gate (see ``gate.py`` for the gate):
creating it, and safe mode's "allow for this session and retry".

The turn core decides when the gate is verified, when agy runs behind it and
when the fallback notice is due; these helpers do the I/O.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from ..acp import models
from . import turn_events as ev

if TYPE_CHECKING:
    from ..translate.mapper import TurnMapper
    from .gate import Gate
    from .session import Session

logger = logging.getLogger(__name__)


async def start_gate(session: Session, nursery: trio.Nursery) -> Gate | None:
    """The session's gate with its broker running (None without a client to
    ask). A gate that cannot be created is returned with its ``failure``."""
    ask_client = session.deps.ask_client
    if ask_client is None:
        return None
    # Imported on the first session, not at start-up: initialize needs none of it.
    from ..permissions import HookRootError  # noqa: PLC0415
    from .gate import Gate  # noqa: PLC0415

    roots = (session.cwd, *session.additional_dirs)
    if session.staging is not None:
        roots = (*roots, session.staging.root)
    gate = Gate(
        session_id=session.session_id,
        roots=roots,
        mode=session.settings.mode,
        ask_client=ask_client,
        send_update=session.outlet.send,
        in_turn=session.in_turn,
        note_write=session.mutations.note_before,
        verify_timeout_s=session.deps.timeouts.startup_s,
    )
    try:
        await gate.start(nursery)
    except (HookRootError, OSError) as exc:
        gate.failure = f"could not create the permission gate: {exc}"
        gate.ready.set()
        logger.warning("session %s: %s", session.session_id, gate.failure)
    return gate


async def ask_allow_and_retry(session: Session, seq: float) -> None:
    """Safe mode, agy auto-denied something: show the question's card (from
    the loop), ask in the background, and feed the answer back to the loop."""
    gate = session.gate
    work = session.prompts.get(seq)
    assert gate is not None and work is not None and work.mapper is not None
    denied = {p for p in work.mapper.denied if p}
    card, params = gate.allow_question(denied, _allow_call_id(work.mapper))
    await session.outlet.send(card)

    async def ask() -> None:
        allowed = await gate.ask_allowed(params)
        if allowed and not gate.ready.is_set():
            await gate.verify(session.deps.agy_bin, session.deps.env)
        failure = gate.failure if allowed else None
        session.post(ev.GateVerified(gate.failure is None))
        session.post(ev.AllowAnswered(seq, allowed, failure))

    session.start_soon(ask, work.timers)


async def show_allow_outcome(session: Session, action: ev.ShowAllowAnswer) -> None:
    """The user's answer on the question's card; allowed, the permissions are
    the session's from now on (the core retries the turn behind the gate)."""
    gate = session.gate
    work = session.prompts.get(action.seq)
    assert gate is not None and work is not None and work.mapper is not None
    mapper = work.mapper
    ok = action.allowed and action.gate_failure is None
    status = "completed" if ok else "failed"
    await session.outlet.send(
        models.ToolCallUpdate(tool_call_id=_allow_call_id(mapper), status=status)
    )
    if action.gate_failure is not None:
        await session.outlet.send(
            models.AgentMessageChunk(
                content=models.TextContent(
                    text="\n\n⚠️ Could not allow it: the permission gate is not "
                    f"available ({action.gate_failure})."
                ),
                message_id=mapper.message_id,
            )
        )
    if ok:
        denied = {p for p in mapper.denied if p}
        gate.allow_for_session(denied)
        logger.info("session %s: allowed %s for the session; retrying", session.session_id, denied)


def _allow_call_id(mapper: TurnMapper) -> str:
    return f"{mapper.message_id}-allow"
