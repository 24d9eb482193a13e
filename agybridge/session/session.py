"""One ACP session: the trio driver of its :class:`~.turns.TurnCore`.

``run()`` is the session's nursery and visibly starts every task it owns:
the loop, the child-message pump, the permission broker, and (through the
child slot) each agy incarnation. The loop is the only task that feeds the
core, maps agy output and sends the session's updates: it takes one work
item at a time (a core event, a child message, or a step posted by another
task) and performs the actions the core returns, in order. Because a
prompt's answer is one of those actions, every update of a turn is written
before its answer, and nothing of it after. Decisions live in the core;
this module performs them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from ..acp import models
from ..agy import (
    AgySpawnError,
    ChildEvent,
    ChildExited,
    ChildMessage,
    ChildStderr,
    InitEvent,
    ResultEvent,
    Usage,
    build_argv,
)
from ..store import SessionRecord, utc_now
from . import output, timers, turns
from .child_events import on_child_message
from .child_slot import ChildSlot
from .commands import BRIDGE_COMMANDS, available_commands
from .config import Catalog, LaunchSettings, apply_option, config_options, mode_state
from .conversation import Conversation
from .deps import SessionDeps, SessionSpec
from .errors import AgyStartError, SessionError
from .gate import Gate, TurnWork
from .gating import ask_allow_and_retry, start_gate
from .images import snapshot_edit_target
from .inbox import Inbox
from .mapper import OutcomeKind, TurnMapper
from .outlet import Outlet
from .persistence import SessionBook
from .private_root import prepare_private_root
from .prompts import AttemptScopes, PromptResult, PromptWork, make_title
from .skills import Skill, find_skills
from .staging import StagingArea
from .usage import context_window

logger = logging.getLogger(__name__)

#: Messages from the child waiting for the loop; small, so a slow client
#: pushes back on agy instead of buffering without bound.
CHILD_MESSAGE_BUFFER = 16


class InternalSessionError(SessionError):
    """The bridge itself failed while serving a turn (a bug): -32603."""


class Session:
    """One ACP session; see the module docstring."""

    def __init__(self, spec: SessionSpec, deps: SessionDeps, outlet: Outlet) -> None:
        self.spec = spec
        self.session_id = spec.session_id
        self.cwd = spec.cwd
        self.additional_dirs = spec.additional_dirs
        self.deps = deps
        self.outlet = outlet
        self.title = spec.title
        self.created_at = spec.created_at or utc_now()
        self.model: str | None = spec.settings.model
        self.conversation = Conversation(spec.session_id, spec.conversation_id)
        self.book = SessionBook(deps.store, spec.session_id, spec.next_turn)
        self.gate: Gate | None = None
        self.staging: StagingArea | None = None
        self.skills: list[Skill] = []
        self.unrecognised: dict[str, int] = {}
        self._core = turns.TurnCore(spec.settings, resumable=spec.conversation_id is not None)
        self._inbox = Inbox(CHILD_MESSAGE_BUFFER)
        send, self._child_messages = trio.open_memory_channel[ChildMessage](CHILD_MESSAGE_BUFFER)
        self._slot = ChildSlot(
            policy=deps.policy,
            max_line_bytes=deps.max_line_bytes,
            messages=send,
            annotate=snapshot_edit_target,
        )
        self._prompts: dict[float, PromptWork] = {}
        self._notes: dict[int, output.ChildNotes] = {}
        self._last_result_usage: tuple[int, Usage] | None = None
        self.last_output = 0.0
        self._announced_options: list[models.SessionConfigOption] | None = None
        self._nursery: trio.Nursery | None = None
        #: Callers waiting for the loop (released if it ends first).
        self._waiting: set[trio.Event] = set()
        self.closed = trio.Event()

    # --- lifecycle ---------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the session until it is closed; ready once agy is spawned.

        Raises:
            AgyStartError: agy could not be started (before ``started``).
        Cancelling this task kills agy with the full escalation first; every
        prompt still waiting is answered (cancelled, or the bridge's error).
        """
        failure: BaseException | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self.staging = await prepare_private_root(
                    self.deps.staging_base, self.deps.keep_staging, self.spec.mcp_config
                )
                self.gate = await start_gate(self, nursery)
                if self.gate is not None:
                    self._core.gate = turns.GateState.UNVERIFIED
                    if self.gate.failure is not None:
                        self._core.gate = turns.GateState.FAILED
                nursery.start_soon(self._pump)
                await self._perform_first_spawn(self._core.start())
                await self.save()
                task_status.started()
                await self._loop()
                nursery.cancel_scope.cancel(reason="session closed")
        except BaseException as exc:
            failure = exc
            raise
        finally:
            self._slot.close()
            self._answer_all_left(failure)
            for waiter in self._waiting:
                waiter.set()
            if self.staging is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self.staging.remove)
            if self.gate is not None:
                self.gate.close()
            self.closed.set()
            logger.info(
                "session %s ended; unrecognised agy output: %s",
                self.session_id,
                self.unrecognised or "none",
            )

    async def _perform_first_spawn(self, actions: list[turns.Action]) -> None:
        try:
            await self._perform(actions)
        except AgyStartError:
            raise
        except BaseExceptionGroup as group:
            start_errors, _ = group.split(AgyStartError)
            if start_errors is None:
                raise
            raise _first_leaf(start_errors) from None

    async def close(self) -> None:
        """Cancel every prompt, stop agy (escalating), and end :meth:`run`."""
        self._post(turns.Close())
        await self.closed.wait()

    def _answer_all_left(self, failure: BaseException | None) -> None:
        """The session is over: no prompt may be left waiting. A prompt
        answered here was cut short by the bridge, not by the user."""
        error: SessionError | None = None
        if failure is not None and not isinstance(failure, trio.Cancelled | KeyboardInterrupt):
            error = InternalSessionError(f"the session failed: {failure!r}")
        for work in self._prompts.values():
            if error is not None:
                work.answer(error=error)
            else:
                work.answer(stop=models.STOP_CANCELLED)

    # --- the loop ------------------------------------------------------------

    def _post(self, event: turns.Event) -> None:
        self._inbox.post(event)

    async def _pump(self) -> None:
        async with self._child_messages:
            async for message in self._child_messages:
                await self._inbox.put_child(message)

    async def _loop(self) -> None:
        while not self._core.closed:
            item = await self._inbox.get()
            try:
                if isinstance(item, ChildEvent | ChildStderr | ChildExited):
                    await self._on_child(item)
                elif callable(item):
                    await item()
                else:
                    await self._feed(item)
            except (AgySpawnError, trio.Cancelled):
                raise
            except Exception as exc:
                # A bug while serving: the running turn fails with it (never
                # "cancelled"), its agy is replaced, the session goes on.
                logger.exception("session %s: internal error", self.session_id)
                error = InternalSessionError(
                    f"internal error in agybridge: {type(exc).__name__}: {exc}",
                    data={"exception": type(exc).__name__},
                )
                await self._feed(turns.InternalError(error))

    async def _feed(self, event: turns.Event) -> None:
        await self._perform(self._core.handle(event))

    async def _perform(self, actions: list[turns.Action]) -> None:
        for action in actions:
            await _PERFORM[type(action)](self, action)

    # --- actions -------------------------------------------------------------

    async def _answer(self, action: turns.AnswerPrompt) -> None:
        work = self._prompts.get(action.seq)
        if work is None:
            return
        if work.mapper is not None:
            self.book.count_usage(work.mapper)
            for kind, count in work.mapper.unrecognised.items():
                self.unrecognised[kind] = self.unrecognised.get(kind, 0) + count
        if action.error is not None:
            work.answer(error=action.error)
        elif action.stop is turns.Stop.CANCELLED:
            work.answer(stop=models.STOP_CANCELLED)
        else:
            assert work.mapper is not None
            work.answer(stop=models.STOP_END_TURN, meta=work.mapper.response_meta())

    async def _start_turn(self, action: turns.StartTurn) -> None:
        work = self._prompts[action.seq]
        if work.mapper is not None and action.attempt > 1:
            self.book.count_usage(work.mapper)
        work.mapper = TurnMapper(
            message_id=f"msg_{uuid.uuid4().hex}",
            cwd=self.cwd,
            terminals=self.spec.terminals,
            context_size=context_window(self.model, self.deps.context_window_override),
        )
        work.timers.cancel()
        work.timers = AttemptScopes()
        if action.attempt == 1:
            # Title (first turn) and updatedAt (every turn) for session lists.
            now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
            update = models.SessionInfoUpdate(updated_at=now)
            if self.title is None:
                self.title = make_title(work.display_text)
                update = attrs.evolve(update, title=self.title)
            await self.outlet.send(update)

    async def _send_user_turn(self, action: turns.SendUserTurn) -> None:
        work = self._prompts[action.seq]
        mapper = work.mapper
        child = self._slot.get(action.incarnation)
        assert mapper is not None and child is not None
        last = self._last_result_usage
        if last is not None and last[0] == action.incarnation:
            mapper.previous_result_usage = last[1]
        mapper.fresh_process = "--conversation" not in child.argv
        mapper.gate_active = self._core.gate_in_use()
        notice = self.conversation.take_fork_notice()
        if notice is not None:
            await self._say(mapper, notice + "\n\n", "notice")
        self.last_output = trio.current_time()
        # If agy is already going away, its exit finishes the attempt.
        with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
            await child.send_user(work.text)

    async def _spawn_child(self, action: turns.SpawnChild) -> None:
        assert self._nursery is not None
        roots = self.additional_dirs
        if self.staging is not None:
            roots = (*roots, self.staging.root)
        gate = self.gate if action.gated else None
        resume = self.conversation.resume_id(action.resume)
        launch = self._core.settings.launch_spec(
            self.cwd, roots, resume, gate_dir=gate.hook_dir if gate is not None else None
        )
        argv = build_argv(self.deps.agy_bin, launch)
        env = gate.agy_env(self.deps.env) if gate is not None else self.deps.env
        self._notes[action.incarnation] = output.ChildNotes()
        try:
            await self._slot.ensure(self._nursery, action.incarnation, argv, launch.cwd, env)
        except AgySpawnError as exc:
            error = AgyStartError(str(exc), data={"argv": argv})
            if action.incarnation == 1:
                raise error from exc  # session/new fails with it
            await self._feed(turns.ChildSpawnFailed(action.incarnation, error))
            return
        await self._feed(turns.ChildSpawned(action.incarnation))

    async def _retire_child(self, action: turns.RetireChild) -> None:
        turn = self._core.current
        if turn is not None and turn.incarnation == action.incarnation:
            work = self._prompts.get(turn.seq)
            if work is not None and work.mapper is not None:
                # An ERROR result is then agy's answer to SIGINT, not an error.
                work.mapper.cancel_requested = turn.pending_stop is turns.Stop.CANCELLED
        self._slot.retire(action.incarnation, action.reason)

    async def _verify_gate(self, action: turns.VerifyGate) -> None:
        gate = self.gate
        assert gate is not None and self._nursery is not None

        async def verify() -> None:
            await gate.verify(self.deps.agy_bin, self.deps.env)
            self._post(turns.GateVerified(gate.failure is None))

        self._nursery.start_soon(verify)

    async def _refuse(self, action: turns.RefusePermissions) -> None:
        if self.gate is not None:
            self.gate.refuse_pending()

    async def _accept(self, action: turns.AcceptPermissions) -> None:
        if self.gate is not None:
            self.gate.accept_requests()

    async def _apply_settings(self, action: turns.ApplySettings) -> None:
        new = action.new
        self.model = new.model
        self._save_soon()
        if self.gate is not None:
            self.gate.set_mode(new.mode)
        logger.info("session %s: settings changed: %s", self.session_id, new)
        if action.announce:
            # Applied after the turn the client changed it during: say so.
            await self._send_options()
            if action.old.mode != new.mode:
                await self.outlet.send(models.CurrentModeUpdate(current_mode_id=new.mode))

    async def _gate_notice(self, action: turns.GateFallbackNotice) -> None:
        gate = self.gate
        mapper = self._prompts[action.seq].mapper
        assert gate is not None and mapper is not None
        await self._say(
            mapper,
            f"⚠️ The permission gate is not available ({gate.failure}), so this session runs "
            "in safe mode: agy's own checks apply, and actions that need approval are "
            "auto-denied.\n\n",
            "gate",
        )

    async def _ask_allow(self, action: turns.AskAllowRetry) -> None:
        await ask_allow_and_retry(self, action.seq)

    async def _record_turn(self, action: turns.RecordTurn) -> None:
        work = self._prompts[action.seq]
        if work.mapper is not None:
            await self.book.record_turn(work.display_text, work.mapper)
        await self.save()

    async def _arm_deadline(self, action: turns.ArmDeadline) -> None:
        work = self._prompts[action.seq]
        assert self._nursery is not None
        self._nursery.start_soon(timers.arm, self, work.timers.new(), action)

    async def _stall_notice(self, action: turns.StallNotice) -> None:
        mapper = self._prompts[action.seq].mapper
        assert mapper is not None
        text = output.stall_notice_text(self.deps.timeouts.stall_notice_s)
        await self.outlet.send(
            models.AgentThoughtChunk(
                content=models.TextContent(text=text), message_id=f"{mapper.message_id}-stall"
            )
        )

    async def _announcements(self, action: turns.SendAnnouncements) -> None:
        if "commands" in action.kinds:
            await self._send_commands()
        if "catalog" in action.kinds:
            await self._send_options(only_if_changed=True)

    async def _closed(self, action: turns.Closed) -> None:
        pass  # the loop ends

    # --- child output ----------------------------------------------------------

    async def _on_child(self, message: ChildMessage) -> None:
        await on_child_message(self, message)

    # --- for the loop's helpers (child_events, gating, timers) -------------------

    async def feed(self, event: turns.Event) -> None:
        """Apply a core event and perform its actions (from the loop only)."""
        await self._feed(event)

    def post(self, event: turns.Event) -> None:
        self._post(event)

    def post_step(self, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step`` in the loop, in order with everything else."""
        self._inbox.post(step)

    def start_soon(self, fn: Callable[[], Awaitable[None]], scopes: AttemptScopes) -> None:
        """Run ``fn`` in the background, cancelled when the attempt ends."""
        scope = scopes.new()

        async def scoped() -> None:
            with scope:
                await fn()

        assert self._nursery is not None
        self._nursery.start_soon(scoped)

    def prompt_work(self, seq: float) -> PromptWork | None:
        return self._prompts.get(seq)

    def turn_work_on(self, incarnation: int) -> tuple[turns.Turn, PromptWork] | None:
        """The unanswered turn running on that child, and its work."""
        turn = self._core.turn_on(incarnation)
        if turn is None:
            return None
        work = self._prompts.get(turn.seq)
        return None if work is None else (turn, work)

    def is_asking(self, seq: float) -> bool:
        turn = self._core.current
        return turn is not None and turn.seq == seq and turn.state is turns.TurnState.ASKING

    def is_current_child(self, incarnation: int) -> bool:
        child = self._core.child
        return child is not None and child.incarnation == incarnation

    def child_notes(self, incarnation: int) -> output.ChildNotes | None:
        return self._notes.get(incarnation)

    def forget_child(self, incarnation: int) -> None:
        self._slot.forget(incarnation)
        self._notes.pop(incarnation, None)

    def heard_from(self, incarnation: int) -> None:
        """agy printed something (the stall deadline moves)."""
        if self.is_current_child(incarnation):
            self.last_output = trio.current_time()

    def roots(self) -> list[str]:
        roots = [self.cwd, *self.additional_dirs]
        if self.staging is not None:
            roots.append(self.staging.root)
        return roots

    def result_error(self, seq: float) -> SessionError | None:
        work = self._prompts.get(seq)
        if work is None or work.mapper is None:
            return None
        return output.result_error(work.mapper, auth_failed=work.auth_failed)

    def offers_retry(self, mapper: TurnMapper) -> bool:
        """Safe mode auto-denied something: ask to allow it and retry."""
        outcome = mapper.outcome
        return (
            self.gate is not None
            and self._core.settings.mode == "safe"
            and any(mapper.denied)
            and outcome is not None
            and outcome.kind is OutcomeKind.END_TURN
        )

    async def _say(self, mapper: TurnMapper, text: str, suffix: str) -> None:
        await self.outlet.send(
            models.AgentMessageChunk(
                content=models.TextContent(text=text), message_id=f"{mapper.message_id}-{suffix}"
            )
        )

    async def in_turn(self, work: TurnWork) -> bool:
        """Run ``work`` on the running turn's mapper inside the loop (the
        gate's way in); False when no turn is running."""
        ran = False

        async def step() -> None:
            nonlocal ran
            turn = self._core.current
            on_turn = self.turn_work_on(turn.incarnation) if turn and turn.incarnation else None
            if on_turn is not None and on_turn[1].mapper is not None:
                for update in work(on_turn[1].mapper):
                    await self.outlet.send(update)
                ran = True

        await self._run_in_loop(step)
        return ran

    async def _run_in_loop(self, step: Callable[[], Awaitable[None]]) -> None:
        """Post ``step`` and wait until the loop has run it (or has ended)."""
        done = trio.Event()
        if self.closed.is_set():
            return
        self._waiting.add(done)

        async def run_then_release() -> None:
            try:
                await step()
            finally:
                done.set()

        self._inbox.post(run_then_release)
        try:
            await done.wait()
        finally:
            self._waiting.discard(done)

    # --- the client's side -----------------------------------------------------

    def prompt_arrived(self, seq: float) -> None:
        """A prompt was read (call in wire order, before its task runs)."""
        if seq not in self._prompts:
            self._prompts[seq] = PromptWork()
        self._post(turns.PromptArrived(seq))

    def drop_prompt(self, seq: float) -> None:
        """The prompt was answered without a turn (error, bridge command)."""
        self._prompts.pop(seq, None)
        self._post(turns.PromptDropped(seq))

    async def prompt(self, seq: float, text: str, display_text: str) -> PromptResult:
        """Run the prompt's turn in its place in the queue; its answer.

        Raises:
            SessionError: agy could not run the turn, or the bridge failed.
        """
        self.prompt_arrived(seq)
        work = self._prompts[seq]
        work.text, work.display_text = text, display_text
        self._post(turns.PromptReady(seq))
        try:
            return await work.result()
        except trio.Cancelled:
            # The request itself went away ($/cancel_request without a handler,
            # shutdown): do not leave agy working on a turn nobody awaits.
            self._post(turns.CancelPrompt(seq))
            raise
        finally:
            self._prompts.pop(seq, None)

    def cancel(self, seq: float) -> None:
        """``session/cancel`` at wire position ``seq``."""
        self._post(turns.Cancel(seq))

    def cancel_prompt(self, seq: float) -> None:
        """``$/cancel_request`` for the prompt at ``seq``: answered cancelled."""
        self._post(turns.CancelPrompt(seq))

    def client_request(self, seq: float) -> None:
        """The client sent a request for this session (wire order)."""
        self._post(turns.ClientRequest(seq))

    async def barrier(self) -> None:
        """Wait until the loop has done everything posted before this call
        (e.g. announcements held back after a cancel, before an answer)."""

        async def nothing() -> None:
            return None

        await self._run_in_loop(nothing)

    @property
    def busy(self) -> bool:
        return self._core.busy

    @property
    def settings(self) -> LaunchSettings:
        return self._core.settings

    @property
    def agy_version(self) -> str | None:
        return self._catalog().agy_version

    def _catalog(self) -> Catalog:
        return self.deps.catalog()

    # --- announcements -----------------------------------------------------------

    def announce(self, kind: str) -> None:
        """``commands`` or ``catalog`` changed: tell the client (held back
        while muted after a cancel)."""
        if self._announced_options is None:
            return  # the client has not seen the session yet: its response says it all
        actions = self._core.announce(kind)
        if actions:
            self._inbox.post(functools.partial(self._perform, actions))

    async def announce_now(self) -> None:
        """Everything a load/resume sends, before its response."""
        await self._send_commands()
        self.options_seen()

    async def _send_commands(self) -> None:
        roots = [self.cwd, *self.additional_dirs]
        self.skills = await trio.to_thread.run_sync(
            functools.partial(find_skills, roots, reserved=BRIDGE_COMMANDS.keys())
        )
        await self.outlet.send(
            models.AvailableCommandsUpdate(available_commands=available_commands(self.skills))
        )

    async def _send_options(self, *, only_if_changed: bool = False) -> None:
        options = self.config_options()
        if only_if_changed and options == self._announced_options:
            return
        self._announced_options = options
        await self.outlet.send(models.ConfigOptionUpdate(config_options=options))

    # --- configuration -------------------------------------------------------

    def config_options(self) -> list[models.SessionConfigOption]:
        """The complete option list, with the values the client last chose."""
        return config_options(self._core.requested, self._catalog())

    def options_seen(self) -> None:
        """The client got the option list (in a response): from now on it
        hears of changes."""
        self._announced_options = self.config_options()

    def modes(self) -> models.SessionModeState:
        return mode_state(self._core.requested)

    async def set_config_option(self, config_id: str, value: str) -> None:
        """Change one option; applied now when idle, else when the turn ends.

        Raises:
            ConfigValueError: unknown option or value.
        """
        new = apply_option(self._core.requested, config_id, value, self._catalog())
        self._post(turns.SettingsRequested(new))
        await self.barrier()

    async def set_mode(self, mode_id: str) -> None:
        """Legacy ``session/set_mode`` (same effect as the mode option)."""
        await self.set_config_option("mode", mode_id)

    # --- persistence -----------------------------------------------------------

    def record(self) -> SessionRecord:
        meta: dict[str, Any] = {}
        if self.conversation.drift:
            meta["conversationDrift"] = [
                {"asked": asked, "got": got} for asked, got in self.conversation.drift
            ]
        return SessionRecord(
            session_id=self.session_id,
            cwd=self.cwd,
            additional_dirs=self.additional_dirs,
            conversation_id=self.conversation.id,
            title=self.title,
            launch=self._core.settings.to_store(),
            created_at=self.created_at,
            updated_at=utc_now(),
            meta=meta,
        )

    async def save(self) -> None:
        await self.book.save(self.record())

    def _save_soon(self) -> None:
        if self._nursery is not None and self.deps.store is not None and not self._core.closing:
            self._nursery.start_soon(self.save)

    def learned(self, event: InitEvent | ResultEvent, incarnation: int) -> None:
        """Process-level facts from agy's output (conversation, model, usage)."""
        if isinstance(event, InitEvent):
            if self.conversation.learn(event.conversation_id, "init"):
                self._save_soon()
            if event.init.model:
                self.model = event.init.model
        else:
            if event.result.conversation_id and self.conversation.learn(
                event.result.conversation_id, "result"
            ):
                self._save_soon()
            if event.result.usage is not None:
                self._last_result_usage = (incarnation, event.result.usage)


_PERFORM: Mapping[type, Callable[[Session, Any], Awaitable[None]]] = {
    turns.AnswerPrompt: Session._answer,
    turns.StartTurn: Session._start_turn,
    turns.SendUserTurn: Session._send_user_turn,
    turns.SpawnChild: Session._spawn_child,
    turns.RetireChild: Session._retire_child,
    turns.VerifyGate: Session._verify_gate,
    turns.RefusePermissions: Session._refuse,
    turns.AcceptPermissions: Session._accept,
    turns.ApplySettings: Session._apply_settings,
    turns.GateFallbackNotice: Session._gate_notice,
    turns.AskAllowRetry: Session._ask_allow,
    turns.RecordTurn: Session._record_turn,
    turns.ArmDeadline: Session._arm_deadline,
    turns.StallNotice: Session._stall_notice,
    turns.SendAnnouncements: Session._announcements,
    turns.Closed: Session._closed,
}


def _first_leaf(group: BaseExceptionGroup[AgyStartError]) -> AgyStartError:
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, AgyStartError)
    return error
