"""The core's actions, as the session loop performs them: a new turn
(mapper, title), sending the prompt to agy, answering it, the journal, the
notices a turn can carry (gate fallback, stall), and the session's side
effects (agy children, the gate, settings, deadlines, announcements)."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from .. import causes
from ..acp import codec, models
from ..acp.notifications import RUNTIME_UPDATE
from ..agy import AgySpawnError, InitEvent, ResultEvent, build_argv
from ..agy.events import InitInfo
from ..translate.history import storable
from ..translate.mapper import TurnMapper
from ..translate.usage import context_window
from . import errors
from . import turn_events as ev
from .errors import SessionError, internal_error
from .prompts import AttemptScopes, PromptWork, make_title

if TYPE_CHECKING:
    from collections import Counter

    from ..store import SessionRecord
    from ..workspace.mutations import MutationLog
    from ..workspace.staging import StagingArea
    from .child_slot import ChildSlot
    from .commands import Announcer
    from .core_state import Turn
    from .deps import SessionDeps
    from .gating import GatePort
    from .outlet import Outlet
    from .persistence import Conversation, SessionBook
    from .prompts import PromptBook
    from .spec import SessionSpec
    from .timers import Deadlines
    from .turns import TurnCore


class SessionHost(Protocol):
    """What the performers of the core's actions (and the loop's readers of
    agy's messages, ``loop.py``) use of the session: its parts, its
    ports, and the loop's ways in. ``Session`` is the one implementation."""

    session_id: str
    cwd: str
    additional_dirs: tuple[str, ...]
    spec: SessionSpec
    deps: SessionDeps
    core: TurnCore
    outlet: Outlet
    prompts: PromptBook
    book: SessionBook
    announcer: Announcer
    conversation: Conversation
    mutations: MutationLog
    slot: ChildSlot
    gates: GatePort
    deadlines: Deadlines
    staging: StagingArea | None
    nursery: trio.Nursery | None
    title: str | None
    model: str | None
    init_info: InitInfo | None
    plan: tuple[Mapping[str, Any], ...]
    unrecognised: Counter[str]

    async def feed(self, event: ev.Event) -> None: ...
    async def save(self) -> None: ...
    def save_soon(self) -> None: ...
    def record(self, updated_at: str | None = None) -> SessionRecord: ...
    def start_failed(self, error: SessionError) -> None: ...
    def roots(self) -> list[str]: ...
    def runtime(self) -> dict[str, Any] | None: ...
    def learned(self, event: InitEvent | ResultEvent, incarnation: int) -> None: ...
    def heard_from(self, incarnation: int) -> None: ...
    def turn_work_on(self, incarnation: int) -> tuple[Turn, PromptWork] | None: ...


Session = SessionHost

logger = logging.getLogger(__name__)


def _unanswered(session: Session, seq: float) -> PromptWork | None:
    """The prompt's work, unless it was answered already: an action of its
    turn decided before the core answered it (a bug in an action performed
    first failed it) is stale, and nothing of an answered turn is done."""
    work = session.prompts.get(seq)
    return None if work is None or work.answered else work


async def start_turn(session: Session, action: ev.StartTurn) -> None:
    work = _unanswered(session, action.seq)
    if work is None:
        return
    if work.mapper is not None:  # a retry: the first attempt's tokens count too
        session.book.count_usage(work.mapper)
    work.mapper = TurnMapper(
        message_id=f"msg_{uuid.uuid4().hex}",
        cwd=session.cwd,
        terminals=session.spec.terminals,
        show_notices=session.spec.notices,
        # Dropped on the wire for a client that did not ask for them (agent/updates.py).
        extension_events=True,
        context_size=context_window(session.model, session.deps.context_window_override),
        context_window_override=session.deps.context_window_override,
        structured=session.core.settings.json_schema is not None,
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
        if action.waiting:
            # agy's first output, which the lead would ride with, is far off.
            await session.outlet.hand_over_lead()


async def send_user_turn(session: Session, action: ev.SendUserTurn) -> None:
    work = _unanswered(session, action.seq)
    child = session.slot.get(action.incarnation)
    if work is None or work.mapper is None:
        return
    assert child is not None
    mapper = work.mapper
    usage = session.slot.result_usage(action.incarnation)
    if usage is not None:
        mapper.previous_result_usage = usage
    # Only the first turn of a new conversation has nothing before it in the
    # cumulative sum (a result without usage leaves no figure to subtract).
    mapper.fresh_process = "--conversation" not in child.argv and not session.slot.had_result(
        action.incarnation
    )
    mapper.gate_active = action.gated
    # The child's init may have been read since the mapper was made (the model it
    # names sets the window; a later init reaches the mapper itself).
    mapper.context_size = context_window(session.model, session.deps.context_window_override)
    if session.init_info is not None and session.init_info.json_schema is not None:
        mapper.structured = True
    notice = session.conversation.take_fork_notice()
    if notice is not None:
        await say(session, mapper, notice + "\n\n", "notice")
    await tell_mode_notice(session, mapper)
    note = session.mutations.take_agy_note()
    if note is not None:
        # A rollback since agy's last turn (an /undo or a rollback sent before
        # this prompt, which waited for it): agy reads what it undid first. Kept
        # in the text for a resend of this turn.
        work.text = note + work.text
    session.deadlines.heard(trio.current_time())
    try:
        await child.send_user(work.text)
    except (trio.ClosedResourceError, trio.BrokenResourceError):
        return  # agy is already going away: its exit finishes the attempt


async def answer(session: Session, action: ev.AnswerPrompt | ev.AmendAnswer) -> None:
    """Give the prompt its answer, after the turn's last updates. An amendable
    (``end_turn``) answer is given only if they got out: a failure leaves it
    for the core to amend; any other answer is given whatever fails."""
    work = session.prompts.get(action.seq)
    if work is None or work.answered:
        return
    if type(action) is ev.AnswerPrompt and action.amendable:
        await _before_answer(session, work, action)
        _answered(session, action.seq)
        outcome = work.give(action)
    else:
        try:
            await _before_answer(session, work, action)
        finally:
            # Taken from the book: nothing else can answer it, whatever failed above.
            _answered(session, action.seq)
            outcome = work.give(action)
    if work.mapper is not None:
        # Its turn started (start_turn): it is the outlet's running turn. A
        # prompt answered while still queued must not end another's record.
        await session.outlet.turn_ended(outcome)
        runtime = session.runtime()
        if runtime is not None:
            # After the answer, with the turn's tokens counted (dropped on the
            # wire for a client that did not ask: agent/updates.py).
            await session.outlet.send(models.ExtensionEvent(RUNTIME_UPDATE, {"runtime": runtime}))


async def _before_answer(
    session: Session, work: PromptWork, action: ev.AnswerPrompt | ev.AmendAnswer
) -> None:
    # Its turn's lead goes before the answer (agy may have written nothing).
    await session.outlet.hand_over_lead()
    mapper = work.mapper
    if mapper is None:
        return
    if mapper.unrecognised:  # mostly empty
        session.unrecognised.update(mapper.unrecognised)
    cancelled = type(action) is ev.AnswerPrompt and action.stop is ev.Stop.CANCELLED
    reason = (
        "cancelled before this tool finished"
        if cancelled
        else "the turn ended before this tool finished"
    )
    unfinished = mapper.end_without_result(reason)
    if unfinished:
        await session.outlet.send_all(unfinished)


def _answered(session: Session, seq: float) -> None:
    work = session.prompts.take_answered(seq)
    if work is not None and work.mapper is not None:
        session.book.count_usage(work.mapper)


async def record_turn(session: Session, action: ev.RecordTurn) -> None:
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


async def gate_notice(session: Session, action: ev.GateFallbackNotice) -> None:
    work = _unanswered(session, action.seq)
    if work is None or work.mapper is None:
        return
    await say(
        session,
        work.mapper,
        f"⚠️ The permission gate is not available ({session.gates.failure}), so this session "
        "runs in safe mode: agy's own checks apply, and actions that need approval are "
        "auto-denied.\n\n",
        "gate",
        meta=causes.meta("gate_unavailable", detail=session.gates.failure),
    )


async def stall_notice(session: Session, action: ev.StallNotice) -> None:
    work = _unanswered(session, action.seq)
    if work is None or work.mapper is None:
        return
    text = errors.stall_notice_text(session.deps.timeouts.stall_notice_s)
    await session.outlet.send(
        models.AgentThoughtChunk(
            content=models.TextContent(text=text), message_id=f"{work.mapper.message_id}-stall"
        )
    )


async def say(
    session: Session, mapper: TurnMapper, text: str, suffix: str, *, meta: Any = None
) -> None:
    """A paragraph of the bridge's own in the turn's reply (``meta``: its ``_meta``)."""
    await session.outlet.send(
        models.AgentMessageChunk(
            content=models.TextContent(text=text),
            message_id=f"{mapper.message_id}-{suffix}",
            meta=meta,
        )
    )


async def agy_init(
    session: Session, event: InitEvent, incarnation: int, mapper: TurnMapper | None
) -> None:
    """agy's ``init``: its own permission mode against the session's mode; a
    notice is said in the turn running on it, else at the next turn's start."""
    child = session.slot.get(incarnation)
    argv = child.argv if child is not None else ()
    session.gates.agy_started(event.init.permission_mode, session.core.settings.mode, argv)
    if mapper is not None:
        await tell_mode_notice(session, mapper)


async def tell_mode_notice(session: Session, mapper: TurnMapper) -> None:
    notice = session.gates.take_mode_notice()
    if notice is not None:
        await say(session, mapper, notice, "permission-mode")


async def spawn_child(session: Session, action: ev.SpawnChild) -> None:
    assert session.nursery is not None
    roots = session.additional_dirs
    if session.staging is not None:
        roots = (*roots, session.staging.root)
    hook_dir, env = session.gates.agy_env(action.gated, observed=action.observed)
    resume = session.conversation.resume_id(action.resume)
    gate_dir, observer_dir = (hook_dir, None) if action.gated else (None, hook_dir)
    launch = action.settings.launch_spec(
        session.cwd, roots, resume, gate_dir=gate_dir, observer_dir=observer_dir
    )
    argv = build_argv(session.deps.agy_bin, launch)
    try:
        await session.slot.ensure(session.nursery, action.incarnation, argv, launch.cwd, env)
    except AgySpawnError as exc:
        located = session.deps.agy_runs.located() if session.deps.agy_runs else None
        error = errors.spawn_error(exc, argv, located)
        await session.feed(ev.ChildSpawnFailed(action.incarnation, error))
        return
    except Exception as exc:
        # A bug: this agy will never exist, and the core must hear it (else
        # the turn waiting for it waits forever).
        logger.exception("session %s: spawning agy failed", session.session_id)
        await session.feed(ev.ChildSpawnFailed(action.incarnation, internal_error(exc)))
        return
    await session.feed(ev.ChildSpawned(action.incarnation))


async def retire_child(session: Session, action: ev.RetireChild) -> None:
    if action.cancelling is not None:
        work = session.prompts.get(action.cancelling)
        if work is not None and work.mapper is not None:
            # An ERROR result is then agy's answer to SIGINT, not an error.
            work.mapper.cancel_requested = True
    session.slot.retire(action.incarnation, action.reason)


async def verify_gate(session: Session, action: ev.VerifyGate) -> None:
    session.gates.verify()


async def permissions(
    session: Session, action: ev.RefusePermissions | ev.AcceptPermissions
) -> None:
    session.gates.permissions(action)


async def apply_settings(session: Session, action: ev.ApplySettings) -> None:
    session.model = action.new.model
    session.save_soon()
    session.gates.set_mode(action.new.mode)
    logger.info("session %s: settings changed: %s", session.session_id, action.new)
    if action.announce:
        await session.announcer.settings_applied(action.old, action.new)


async def apply_directories(session: Session, action: ev.ApplyDirectories) -> None:
    """The new directory list (and working directory): the next agy's cwd and
    ``--add-dir``s (the core retires the current one), the recorded edits, the
    gate's rules, the skills and the stored session's cwd."""
    if action.cwd is not None:
        session.cwd = action.cwd
    session.additional_dirs = action.new
    session.mutations.roots = session.announcer.roots = (session.cwd, *action.new)
    if session.gates.gate is not None:
        session.gates.gate.set_roots(tuple(session.roots()))
    session.save_soon()
    logger.info(
        "session %s: cwd %s, directories now %s", session.session_id, session.cwd, list(action.new)
    )
    if action.cwd is not None and session.announcer.client_knows:
        # Another cwd has other workspace skills: the slash commands follow.
        await session.announcer.send_commands()


async def ask_allow(session: Session, action: ev.AskAllowRetry) -> None:
    work = _unanswered(session, action.seq)
    if work is None or work.mapper is None:
        return
    await session.gates.ask_allow(action, work.mapper, work.timers)


async def retry_refused(session: Session, action: ev.RetryRefused) -> None:
    work = _unanswered(session, action.seq)
    if work is not None and work.mapper is not None:
        await session.gates.retry_refused(action, work.mapper)


async def show_allow_answer(session: Session, action: ev.ShowAllowAnswer) -> None:
    work = _unanswered(session, action.seq)
    if work is None or work.mapper is None:
        return
    await session.gates.show_allow_answer(action, work.mapper)


async def arm_deadline(session: Session, action: ev.ArmDeadline) -> None:
    work = _unanswered(session, action.seq)
    if work is not None:
        session.deadlines.arm(action, work.timers)


async def announcements(session: Session, action: ev.SendAnnouncements) -> None:
    if "commands" in action.kinds:
        await session.announcer.send_commands()
    if "catalog" in action.kinds:
        await session.announcer.send_options(action.settings, only_if_changed=True)


async def closed(session: Session, action: ev.Closed) -> None:
    pass  # the loop ends


async def start_failed(session: Session, action: ev.StartFailed) -> None:
    session.start_failed(action.error)


async def arm_idle(session: Session, action: ev.ArmIdle) -> None:
    session.deadlines.arm_idle(action)


#: What performs each of the core's actions (the session loop looks it up).
PERFORM: Mapping[type, Callable[[Session, Any], Awaitable[None]]] = {
    ev.AnswerPrompt: answer,
    ev.AmendAnswer: answer,
    ev.StartFailed: start_failed,
    ev.ShowAllowAnswer: show_allow_answer,
    ev.StartTurn: start_turn,
    ev.SendUserTurn: send_user_turn,
    ev.RecordTurn: record_turn,
    ev.GateFallbackNotice: gate_notice,
    ev.StallNotice: stall_notice,
    ev.SpawnChild: spawn_child,
    ev.RetireChild: retire_child,
    ev.VerifyGate: verify_gate,
    ev.RefusePermissions: permissions,
    ev.AcceptPermissions: permissions,
    ev.ApplySettings: apply_settings,
    ev.ApplyDirectories: apply_directories,
    ev.AskAllowRetry: ask_allow,
    ev.RetryRefused: retry_refused,
    ev.ArmDeadline: arm_deadline,
    ev.ArmIdle: arm_idle,
    ev.SendAnnouncements: announcements,
    ev.Closed: closed,
}
