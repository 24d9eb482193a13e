"""The core's actions, as the session loop performs them: a new turn
(mapper, title), sending the prompt to agy, answering it, the journal, the
notices a turn can carry (gate fallback, stall), and the session's side
effects (agy children, the gate, settings, deadlines, announcements)."""

from __future__ import annotations

import datetime as dt
import functools
import logging
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ..acp import codec, models
from ..agy import AgySpawnError, build_argv
from ..translate.history import storable
from ..translate.mapper import TurnMapper
from ..translate.usage import context_window
from . import output, timers, turns
from .errors import AgyStartError, auth_required, internal_error
from .gating import ask_allow_and_retry
from .outlet import turn_outcome
from .prompts import AttemptScopes, PromptWork, make_title

if TYPE_CHECKING:
    from .session import Session

logger = logging.getLogger(__name__)


async def start_turn(session: Session, action: turns.StartTurn) -> None:
    work = session.prompts.get(action.seq)
    assert work is not None
    if work.mapper is not None:  # a retry: the first attempt's tokens count too
        session.book.count_usage(work.mapper)
    work.mapper = TurnMapper(
        message_id=f"msg_{uuid.uuid4().hex}",
        cwd=session.cwd,
        terminals=session.spec.terminals,
        context_size=context_window(session.model, session.deps.context_window_override),
    )
    work.timers.cancel()
    work.timers = AttemptScopes()
    if action.attempt == 1:
        # Title (first turn) and updatedAt (every turn) for session lists.
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        update = models.SessionInfoUpdate(updated_at=now)
        if session.title is None:
            session.title = make_title(work.display_text)
            update = attrs.evolve(update, title=session.title)
        # The prompt is kept for a client that attaches while the turn runs
        # (outlet.py); the update leads the turn's first hand-over.
        await session.outlet.turn_started(work.display_text, work.owner, lead=update)
        turn = session.core.current
        if turn is None or turn.seq != action.seq or turn.state is not turns.TurnState.RUNNING:
            # The turn waits for agy to start (or the gate): agy's first
            # output, which it would ride with, is far off; tell the client now.
            await session.outlet.hand_over_lead()


async def send_user_turn(session: Session, action: turns.SendUserTurn) -> None:
    work = session.prompts.get(action.seq)
    child = session.slot.get(action.incarnation)
    assert work is not None and work.mapper is not None and child is not None
    mapper = work.mapper
    usage = session.result_usage(action.incarnation)
    if usage is not None:
        mapper.previous_result_usage = usage
    # Only the first turn of a new conversation has nothing before it in the
    # cumulative sum (a result without usage leaves no figure to subtract).
    mapper.fresh_process = "--conversation" not in child.argv and not session.had_result(
        action.incarnation
    )
    mapper.gate_active = session.core.gate_in_use()
    notice = session.conversation.take_fork_notice()
    if notice is not None:
        await say(session, mapper, notice + "\n\n", "notice")
    note = session.mutations.take_agy_note()
    if note is not None:
        # A rollback since agy's last turn (an /undo or a rollback sent before
        # this prompt, which waited for it): agy reads what it undid first. Kept
        # in the text for a resend of this turn.
        work.text = note + work.text
    session.last_output = trio.current_time()
    try:
        await child.send_user(work.text)
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        return  # agy is already going away: its exit finishes the attempt


async def answer(session: Session, action: turns.AnswerPrompt) -> None:
    work = session.prompts.take_answered(action.seq)
    if work is None:
        return
    try:
        try:
            # Its turn's lead goes before the answer (agy may have written nothing).
            await session.outlet.hand_over_lead()
        except Exception as exc:
            action = _saying_bug(action, exc)
            raise
        if work.mapper is not None:
            session.book.count_usage(work.mapper)
            if work.mapper.unrecognised:  # mostly empty: no Counter.update per turn
                session.unrecognised.update(work.mapper.unrecognised)
            reason = (
                "cancelled before this tool finished"
                if action.stop is turns.Stop.CANCELLED
                else "the turn ended before this tool finished"
            )
            unfinished = work.mapper.end_without_result(reason)
            if unfinished:
                await session.outlet.send_all(unfinished)
    finally:
        # Taken from the book: nothing else can answer it, whatever failed above.
        outcome = _give(work, action)
    if work.mapper is not None:
        # Its turn started (start_turn): it is the outlet's running turn. A
        # prompt answered while still queued must not end another's record.
        await session.outlet.turn_ended(outcome)


def _saying_bug(action: turns.AnswerPrompt, exc: Exception) -> turns.AnswerPrompt:
    """``action``, except that an answer that was to say ``end_turn`` says the
    bug ``exc`` instead (one that says an error or ``cancelled`` still does)."""
    if action.error is None and action.stop is not turns.Stop.CANCELLED:
        return attrs.evolve(action, stop=None, error=internal_error(exc))
    return action


def _give(work: PromptWork, action: turns.AnswerPrompt) -> models.SessionInfoUpdate:
    """Answer the prompt's request; the turn-outcome notification that goes with it."""
    if action.error is not None:
        work.answer(error=action.error)
        return turn_outcome("failed", error={"message": action.error.message})
    if action.stop is turns.Stop.CANCELLED:
        work.answer(stop=models.STOP_CANCELLED)
        return turn_outcome("ended", stopReason=models.STOP_CANCELLED)
    assert work.mapper is not None
    work.answer(stop=models.STOP_END_TURN, meta=work.mapper.response_meta())
    return turn_outcome("ended", stopReason=models.STOP_END_TURN)


async def perform_regardless(
    session: Session, queue: deque[turns.Action], exc: Exception, failed: turns.Action | None
) -> Exception | None:
    """``failed`` raised ``exc``, a bug (None: handing over the updates before
    ``queue`` did). The core counts every action it decided as done, so the
    rest of ``queue`` is still performed (a dropped spawn, retire or answer
    would leave a prompt waiting forever). An answer that was to say
    ``end_turn`` says the bug instead.

    Returns:
        The bug the running turn fails with; None if it hit only turns
        already answered (it is logged then).
    """
    reported = False
    bugs = [exc] if failed is not None and not _turn_over(session, failed) else []
    while queue:
        action = queue.popleft()
        if type(action) is turns.AnswerPrompt:
            said = action
            action = _saying_bug(action, exc)
            reported = reported or action is not said
        try:
            await PERFORM[type(action)](session, action)
        except Exception as later:
            logger.exception("session %s: after an internal error", session.session_id)
            if not _turn_over(session, action):
                bugs.append(later)
    if failed is None and not reported:
        bugs.insert(0, exc)  # those updates were the running turn's
    if not bugs or bugs[0] is not exc:
        logger.error("session %s: internal error", session.session_id, exc_info=exc)
    return bugs[0] if bugs else None


def _turn_over(session: Session, action: turns.Action) -> bool:
    """``action`` is of another prompt than the running turn's (one answered
    already): its bug must not fail the running turn. Not read from
    ``core.answered``: a prompt whose request ended first is not kept there."""
    seq = getattr(action, "seq", None)
    current = session.core.current
    return seq is not None and (current is None or current.seq != seq)


async def record_turn(session: Session, action: turns.RecordTurn) -> None:
    work = session.prompts.get(action.seq)
    if work is None or work.mapper is None:
        await session.save()
        return
    if work.mapper.plan:
        session.plan = tuple(
            codec.unstructure(attrs.evolve(entry, content=storable(entry.content)))
            for entry in work.mapper.plan.values()
        )
    async with session.outlet.journalling():
        # The turn's lines and the session's row: one write, one commit.
        prompt = None if work.prompt_journalled else work.display_text
        work.prompt_journalled = True
        await session.book.record_turn(prompt, work.mapper, session.record)


async def gate_notice(session: Session, action: turns.GateFallbackNotice) -> None:
    work = session.prompts.get(action.seq)
    assert session.gate is not None and work is not None and work.mapper is not None
    await say(
        session,
        work.mapper,
        f"⚠️ The permission gate is not available ({session.gate.failure}), so this session "
        "runs in safe mode: agy's own checks apply, and actions that need approval are "
        "auto-denied.\n\n",
        "gate",
    )


async def stall_notice(session: Session, action: turns.StallNotice) -> None:
    work = session.prompts.get(action.seq)
    assert work is not None and work.mapper is not None
    text = output.stall_notice_text(session.deps.timeouts.stall_notice_s)
    await session.outlet.send(
        models.AgentThoughtChunk(
            content=models.TextContent(text=text), message_id=f"{work.mapper.message_id}-stall"
        )
    )


async def say(session: Session, mapper: TurnMapper, text: str, suffix: str) -> None:
    """A paragraph of the bridge's own in the turn's reply."""
    await session.outlet.send(
        models.AgentMessageChunk(
            content=models.TextContent(text=text), message_id=f"{mapper.message_id}-{suffix}"
        )
    )


async def spawn_child(session: Session, action: turns.SpawnChild) -> None:
    assert session.nursery is not None
    roots = session.additional_dirs
    if session.staging is not None:
        roots = (*roots, session.staging.root)
    gate = session.gate if action.gated else None
    resume = session.conversation.resume_id(action.resume)
    launch = session.core.settings.launch_spec(
        session.cwd, roots, resume, gate_dir=gate.hook_dir if gate is not None else None
    )
    argv = build_argv(session.deps.agy_bin, launch)
    env = gate.agy_env(session.deps.env) if gate is not None else session.deps.env
    session.notes[action.incarnation] = output.ChildNotes()
    try:
        await session.slot.ensure(session.nursery, action.incarnation, argv, launch.cwd, env)
    except AgySpawnError as exc:
        error = AgyStartError(str(exc), data={"argv": argv})
        if action.incarnation == 1:
            raise error from exc  # session/new fails with it
        await session.feed(turns.ChildSpawnFailed(action.incarnation, error))
        return
    except Exception as exc:
        if action.incarnation == 1:
            raise
        # A bug: this agy will never exist, and the core must hear it (else
        # the turn waiting for it waits forever).
        logger.exception("session %s: spawning agy failed", session.session_id)
        await session.feed(turns.ChildSpawnFailed(action.incarnation, internal_error(exc)))
        return
    await session.feed(turns.ChildSpawned(action.incarnation))


async def retire_child(session: Session, action: turns.RetireChild) -> None:
    turn = session.core.current
    work = session.prompts.get(turn.seq) if turn is not None else None
    if turn is not None and turn.incarnation == action.incarnation and work and work.mapper:
        # An ERROR result is then agy's answer to SIGINT, not an error.
        work.mapper.cancel_requested = turn.pending_stop is turns.Stop.CANCELLED
    session.slot.retire(action.incarnation, action.reason)


async def verify_gate(session: Session, action: turns.VerifyGate) -> None:
    gate = session.gate
    assert gate is not None and session.nursery is not None

    async def verify() -> None:
        await gate.verify(session.deps.agy_bin, session.deps.env)
        signed_out = auth_required(gate.failure or "") if gate.signed_out else None
        session.post(turns.GateVerified(gate.failure is None, signed_out))

    session.start_soon(verify)


async def permissions(
    session: Session, action: turns.RefusePermissions | turns.AcceptPermissions
) -> None:
    if session.gate is not None and isinstance(action, turns.RefusePermissions):
        session.gate.refuse_pending()
    elif session.gate is not None:
        session.gate.accept_requests()


async def apply_settings(session: Session, action: turns.ApplySettings) -> None:
    session.model = action.new.model
    session._save_soon()
    if session.gate is not None:
        session.gate.set_mode(action.new.mode)
    logger.info("session %s: settings changed: %s", session.session_id, action.new)
    if action.announce:
        await session.announcer.settings_applied(action.old, action.new)


async def ask_allow(session: Session, action: turns.AskAllowRetry) -> None:
    await ask_allow_and_retry(session, action.seq)


async def arm_deadline(session: Session, action: turns.ArmDeadline) -> None:
    work = session.prompts.get(action.seq)
    assert work is not None
    if action.kind is turns.Deadline.STALL_NOTICE:
        session.stall_watch.arm(action)
        work.timers.on_cancel(functools.partial(session.stall_watch.disarm, action))
        return
    session.start_soon(functools.partial(timers.arm, session, action), work.timers)


async def announcements(session: Session, action: turns.SendAnnouncements) -> None:
    if "commands" in action.kinds:
        await session.announcer.send_commands()
    if "catalog" in action.kinds:
        await session.announcer.send_options(session.core.requested, only_if_changed=True)


async def closed(session: Session, action: turns.Closed) -> None:
    pass  # the loop ends


async def arm_idle(session: Session, action: turns.ArmIdle) -> None:
    idle_s = session.deps.timeouts.idle_s
    if idle_s <= 0:
        return
    session.idle_timer.cancel()  # a newer idle period replaces the older one
    session.idle_timer = AttemptScopes()

    async def wait_idle() -> None:
        await trio.sleep(idle_s)
        session.post(turns.IdlePassed(action.token))

    session.start_soon(wait_idle, session.idle_timer)


#: What performs each of the core's actions (the session loop looks it up).
PERFORM: Mapping[type, Callable[[Session, Any], Awaitable[None]]] = {
    turns.AnswerPrompt: answer,
    turns.StartTurn: start_turn,
    turns.SendUserTurn: send_user_turn,
    turns.RecordTurn: record_turn,
    turns.GateFallbackNotice: gate_notice,
    turns.StallNotice: stall_notice,
    turns.SpawnChild: spawn_child,
    turns.RetireChild: retire_child,
    turns.VerifyGate: verify_gate,
    turns.RefusePermissions: permissions,
    turns.AcceptPermissions: permissions,
    turns.ApplySettings: apply_settings,
    turns.AskAllowRetry: ask_allow,
    turns.ArmDeadline: arm_deadline,
    turns.ArmIdle: arm_idle,
    turns.SendAnnouncements: announcements,
    turns.Closed: closed,
}
