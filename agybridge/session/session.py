"""One ACP session: one nursery supervising one long-lived agy child.

Theory of operation.

* ``run()`` is the session's nursery. It spawns agy at once (agy takes seconds
  to start, so the first prompt should not wait for it) and runs the events
  task, the only consumer of the child's messages. Each child incarnation is an
  :class:`~agybridge.agy.AgyChild` started into this nursery.
* Prompts are served strictly one at a time, first come first served
  (``trio.Lock`` is fair). Each incoming message carries its wire sequence
  number; ``session/cancel`` cancels every prompt that arrived before it: the
  running turn (the child is killed with the SIGINT -> SIGTERM -> SIGKILL
  escalation) and every queued one (they answer ``cancelled`` without running).
* A turn ends on agy's ``result`` (never on a timer), or, when it was
  cancelled, once the child is gone and swept, so a ``cancelled`` answer
  means nothing of that turn is still running. If agy dies mid-turn without a
  result the turn fails with :class:`AgyExitedError` (never a hang).
* The events task (``events.py``, mixed in) sends every update of a turn
  (awaiting each) before it marks the turn done, so all of a turn's updates
  precede its prompt response.
* After a kill the child is respawned at once with ``--conversation <id>``
  (warm for the next prompt); after an unplanned exit it is respawned lazily
  by the next prompt, so a binary that dies at start-up cannot loop.
"""

from __future__ import annotations

import bisect
import contextlib
import datetime as dt
import functools
import logging
import math
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from ..acp import models
from ..agy import (
    AgyChild,
    AgySpawnError,
    ChildMessage,
    EscalationPolicy,
    Usage,
    build_argv,
)
from ..store import AsyncStore, SessionRecord, StoreError, utc_now
from .commands import BRIDGE_COMMANDS, available_commands
from .config import (
    GATED_MODES,
    Catalog,
    LaunchSettings,
    apply_option,
    config_options,
    mode_state,
)
from .errors import (
    AgyExitedError,
    AgyStartError,
    SessionError,
)
from .events import ChildEvents, Turn
from .gate import AskClient, Gate
from .gating import Gating
from .history import turn_entries
from .images import snapshot_edit_target
from .mapper import OutcomeKind, TurnMapper, TurnOutcome
from .mcp import write_mcp_config
from .skills import Skill, find_skills
from .staging import StagingArea, StagingError
from .usage import context_window
from .usage import to_meta as usage_meta

logger = logging.getLogger(__name__)

UpdateSink = Callable[[str, models.SessionUpdate], Awaitable[None]]

#: Messages from the child waiting for the events task; small, so a slow
#: client pushes back on agy instead of buffering without bound.
CHILD_MESSAGE_BUFFER = 16
ALL_PROMPTS = math.inf


@attrs.frozen
class PromptResult:
    stop_reason: str
    #: The prompt response's ``_meta``: token figures, structured output,
    #: parsed agy errors, counts of output the bridge could not map.
    meta: Mapping[str, Any] = attrs.Factory(dict)


class Session(ChildEvents, Gating):
    """One ACP session; see the module docstring."""

    def __init__(
        self,
        *,
        session_id: str,
        cwd: str,
        agy_bin: str,
        policy: EscalationPolicy,
        max_line_bytes: int,
        send_update: UpdateSink,
        env: Mapping[str, str] | None = None,
        terminals: bool = False,
        context_window_override: int | None = None,
        additional_dirs: tuple[str, ...] = (),
        settings: LaunchSettings | None = None,
        catalog: Callable[[], Catalog] = Catalog,
        conversation_id: str | None = None,
        title: str | None = None,
        store: AsyncStore | None = None,
        next_turn: int = 0,
        created_at: str | None = None,
        staging_base: str | None = None,
        keep_staging: bool = False,
        mcp_config: Mapping[str, Any] | None = None,
        ask_client: AskClient | None = None,
    ) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.additional_dirs = additional_dirs
        #: Settings agy runs with now, and the latest the client asked for
        #: (applied when the running turn ends).
        self.settings = settings or LaunchSettings()
        self._requested = self.settings
        self._catalog = catalog
        self._store = store
        self._staging_base = staging_base
        self._keep_staging = keep_staging
        self._mcp_config = dict(mcp_config or {})
        self._ask_client = ask_client
        #: The permission gate (None without a client to ask, e.g. in tests).
        self.gate: Gate | None = None
        self._gate_notice_sent = False
        #: The private --add-dir root: staged attachments, MCP config.
        self.staging: StagingArea | None = None
        #: Workspace skills offered as slash commands (found after start-up).
        self.skills: list[Skill] = []
        #: Index of the next turn in the display journal.
        self._next_turn = next_turn
        self._usage_totals: dict[str, int] = {}
        self.created_at = created_at or utc_now()
        self.agy_bin = agy_bin
        self.policy = policy
        self.max_line_bytes = max_line_bytes
        self._send_update = send_update
        self._env = env
        self._terminals = terminals
        self._context_window_override = context_window_override
        self.title: str | None = title
        #: The model agy reports (init) or was asked for, for the context size.
        self.model: str | None = self.settings.model
        #: ``result.usage`` of the current process's last turn (cumulative).
        self._last_result_usage: tuple[int, Usage] | None = None
        self._messages_send, self._messages_receive = trio.open_memory_channel[ChildMessage](
            CHILD_MESSAGE_BUFFER
        )
        self._nursery: trio.Nursery | None = None
        #: Wire positions of the prompts waiting or running, in wire order.
        self._queue: list[float] = []
        self._queue_changed = trio.Event()
        self._spawn_lock = trio.Lock()
        self._child: AgyChild | None = None
        self._incarnations = 0
        self._cancelled_before: float = -1
        self._cancelled_seqs: set[float] = set()
        self._turn: Turn | None = None
        self._closing = False
        self._close_requested = trio.Event()
        self.closed = trio.Event()
        #: agy's conversation id, learned from ``init`` / ``result``.
        self.conversation_id: str | None = conversation_id
        #: The conversation has had a turn, so a respawn resumes it (an id
        #: agy never used would silently fork a new conversation).
        self._resumable = conversation_id is not None
        #: The conversation id we asked agy to resume, to detect a fork.
        self._resuming: str | None = None
        self._fork_notice: str | None = None
        #: A child being replaced: the next one starts once it is gone.
        self._retiring: AgyChild | None = None
        #: A failure agy reported before any turn (e.g. an unknown model).
        self._startup_failure: SessionError | None = None
        self.unrecognised: Counter[str] = Counter()
        #: (asked, got) each time agy forked instead of resuming.
        self.conversation_drift: list[tuple[str, str]] = []
        #: The client has (or is about to have) this session's id: updates
        #: not tied to a prompt may be sent.
        self.announced = False

    # --- lifecycle ---------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the session until :meth:`close`; ready once agy is spawned.

        Raises:
            AgyStartError: agy could not be started (before ``started``).
        Cancelling this task kills agy with the full escalation first.
        """
        started = False
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._events_task)
                await self._prepare_private_root()
                await self._start_gate(nursery)
                await self._spawn()
                await self.save()
                started = True
                task_status.started()
                await self._close_requested.wait()
                await self._shut_down_child()
                nursery.cancel_scope.cancel(reason="session closed")
        except BaseExceptionGroup as group:
            # The nursery wraps even its own body's errors: a start-up failure
            # reaches session/new as itself, not as a group.
            start_errors, _ = group.split(AgyStartError)
            if start_errors is not None and not started:
                raise _first_leaf(start_errors) from None
            raise
        finally:
            self._closing = True
            if self._turn is not None:
                # Closing cancels every prompt: the running one answers cancelled.
                self._turn.finish(TurnOutcome(OutcomeKind.CANCELLED, "CANCELLED"))
            if self.staging is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self.staging.remove)
            if self.gate is not None:
                self.gate.close()
            self.closed.set()
            logger.info(
                "session %s ended; unrecognised agy output: %s",
                self.session_id,
                dict(self.unrecognised) or "none",
            )

    async def close(self) -> None:
        """Cancel every prompt, stop agy (escalating), and end :meth:`run`.

        Waits until the session has fully ended, bounded by the escalation.
        """
        self._closing = True
        self.cancel(ALL_PROMPTS)
        self._close_requested.set()
        await self.closed.wait()

    async def _shut_down_child(self) -> None:
        child = self._child
        if child is not None and child.alive:
            child.kill("session closed")
            await child.exited.wait()

    # --- prompts -----------------------------------------------------------

    async def prompt(self, text: str, seq: int, display_text: str | None = None) -> PromptResult:
        """Run one turn for ``text`` after every earlier prompt has finished.

        ``seq`` is the wire position of the request (for ordering against
        ``session/cancel``). Returns ``cancelled`` if a cancel arrived after
        the request; the caller being cancelled cancels the turn too.

        Raises:
            SessionError: agy could not run the turn.
        """
        self.enqueue_prompt(seq)
        try:
            # Request tasks start in no particular order: the queue, filled in
            # wire order by enqueue_prompt, decides whose turn it is.
            while self._queue[0] != seq or self._turn is not None:
                if self._is_cancelled_seq(seq):
                    return PromptResult(models.STOP_CANCELLED)
                await self._queue_changed.wait()
            turn = Turn(seq=seq, mapper=self._new_mapper())
            self._turn = turn
            try:
                result = await self._run_turn(turn, text)
                self._count_usage(turn)
                if await self._offer_allow_and_retry(turn):
                    # The same prompt again, now that agy may do what it needed.
                    if turn.child is not None:
                        await self._record_turn(display_text or text, turn)
                    turn = Turn(seq=seq, mapper=self._new_mapper())
                    self._turn = turn
                    result = await self._run_turn(turn, text)
                    self._count_usage(turn)
                await self._apply_pending_settings()
                if turn.child is not None:  # the prompt reached agy
                    await self._record_turn(display_text or text, turn)
                return result
            finally:
                self._turn = None
                if turn.mapper.unrecognised:
                    self.unrecognised.update(turn.mapper.unrecognised)
        finally:
            self.withdraw_prompt(seq)
            self._cancelled_seqs.discard(seq)

    def enqueue_prompt(self, seq: float) -> None:
        """Reserve a place for the prompt at wire position ``seq`` (idempotent).

        Call it in wire order, before the prompt's task runs (the JSON-RPC
        reader does, through the agent), so prompts run in the order sent.
        """
        if seq not in self._queue:
            bisect.insort(self._queue, seq)

    def withdraw_prompt(self, seq: float) -> None:
        """Give up a place reserved by :meth:`enqueue_prompt` (idempotent)."""
        if seq in self._queue:
            self._queue.remove(seq)
            self._wake_queue()

    def _wake_queue(self) -> None:
        self._queue_changed.set()
        self._queue_changed = trio.Event()

    async def _run_turn(self, turn: Turn, text: str) -> PromptResult:
        if self._is_cancelled(turn):
            return PromptResult(models.STOP_CANCELLED)
        if self._startup_failure is not None:
            failure, self._startup_failure = self._startup_failure, None
            raise failure
        # A change requested while agy was not running applies from this turn.
        await self._apply_pending_settings(announce=False)
        await self._announce_turn(text)
        await self._ensure_gate(turn)
        for attempt in (1, 2):
            child = await self._ensure_child()
            if self._is_cancelled(turn):
                return PromptResult(models.STOP_CANCELLED)
            turn.child = child
            if self._last_result_usage and self._last_result_usage[0] == child.incarnation:
                turn.mapper.previous_result_usage = self._last_result_usage[1]
            turn.mapper.fresh_process = "--conversation" not in child.argv
            if self._fork_notice is not None:
                notice, self._fork_notice = self._fork_notice, None
                await self._send_update(
                    self.session_id,
                    models.AgentMessageChunk(
                        content=models.TextContent(text=notice + "\n\n"),
                        message_id=f"{turn.mapper.message_id}-notice",
                    ),
                )
            # If agy is already going away, its ChildExited finishes the turn.
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                await child.send_user(text)
                # agy recorded a turn in this conversation (even one cancelled
                # later: SIGINT lets it flush), so a respawn can resume it.
                self._resumable = True
            try:
                await turn.done.wait()
            except trio.Cancelled:
                # The request itself was cancelled ($/cancel_request or
                # shutdown): do not leave agy working on a turn nobody awaits.
                self._cancel_turn(turn, "prompt request cancelled")
                raise
            unread = isinstance(turn.error, AgyExitedError) and not turn.heard
            if attempt == 1 and unread and not turn.mapper.cancel_requested:
                # agy was already exiting (e.g. exit 3 after a quota error,
                # contract.md §5) and never read this prompt: a fresh agy,
                # resuming the conversation, gets it instead.
                logger.info(
                    "session %s: agy exited before reading the prompt; sending it again",
                    self.session_id,
                )
                turn.reset()
                continue
            break
        if turn.error is not None:
            raise turn.error
        assert turn.outcome is not None
        if turn.outcome.kind is OutcomeKind.CANCELLED:
            stop = models.STOP_CANCELLED
        else:
            stop = models.STOP_END_TURN
        return PromptResult(stop, turn.mapper.response_meta())

    # --- private root, commands ------------------------------------------------

    async def _prepare_private_root(self) -> None:
        """The session's private --add-dir root, with its MCP server config."""
        if self._staging_base is None:
            return
        try:
            self.staging = await trio.to_thread.run_sync(
                functools.partial(StagingArea.create, self._staging_base, keep=self._keep_staging)
            )
            if self._mcp_config.get("mcpServers"):
                await trio.to_thread.run_sync(write_mcp_config, self.staging.root, self._mcp_config)
        except (StagingError, ValueError, OSError) as exc:
            raise AgyStartError(
                f"could not prepare the session's private directory: {exc}",
                data={"base": self._staging_base},
            ) from exc

    def start_announcements(self) -> None:
        """After the client has the session id: send the slash commands."""
        self.announced = True
        if self._nursery is not None:
            self._nursery.start_soon(self._announce_commands)

    async def _announce_commands(self) -> None:
        roots = [self.cwd, *self.additional_dirs]
        self.skills = await trio.to_thread.run_sync(
            functools.partial(find_skills, roots, reserved=BRIDGE_COMMANDS.keys())
        )
        await self._send_update(
            self.session_id,
            models.AvailableCommandsUpdate(available_commands=available_commands(self.skills)),
        )

    @property
    def busy(self) -> bool:
        """A turn is running."""
        return self._turn is not None

    @property
    def agy_version(self) -> str | None:
        return self._catalog().agy_version

    def usage_summary(self) -> dict[str, int]:
        """Tokens of this session so far (for /status)."""
        return dict(self._usage_totals)

    # --- persistence -----------------------------------------------------------

    def _count_usage(self, turn: Turn) -> None:
        spent = turn.mapper.turn_usage
        if spent is not None:
            for key, value in usage_meta(spent).items():
                self._usage_totals[key] = self._usage_totals.get(key, 0) + value
        if turn.mapper.context_used is not None:
            self._usage_totals["contextUsed"] = turn.mapper.context_used
            self._usage_totals["contextSize"] = turn.mapper.context_size

    def record(self) -> SessionRecord:
        meta: dict[str, Any] = {}
        if self.conversation_drift:
            meta["conversationDrift"] = [
                {"asked": asked, "got": got} for asked, got in self.conversation_drift
            ]
        return SessionRecord(
            session_id=self.session_id,
            cwd=self.cwd,
            additional_dirs=self.additional_dirs,
            conversation_id=self.conversation_id,
            title=self.title,
            launch=self.settings.to_store(),
            created_at=self.created_at,
            updated_at=utc_now(),
            meta=meta,
        )

    async def save(self) -> None:
        """Write the session's index row; a store failure is logged, not raised
        (history is a convenience, the turn is what matters)."""
        if self._store is None:
            return
        try:
            await self._store.upsert_session(self.record())
        except StoreError as exc:
            logger.warning("session %s: could not save the session index: %s", self.session_id, exc)

    async def _record_turn(self, text: str, turn: Turn) -> None:
        index, self._next_turn = self._next_turn, self._next_turn + 1
        entries = turn_entries(
            self.session_id, index, text, turn.mapper, f"user_{uuid.uuid4().hex}"
        )
        if self._store is not None:
            try:
                await self._store.append_journal(entries)
            except StoreError as exc:
                logger.warning(
                    "session %s: could not save turn %d: %s", self.session_id, index, exc
                )
        await self.save()

    def _save_soon(self) -> None:
        if self._nursery is not None and self._store is not None and not self._closing:
            self._nursery.start_soon(self.save)

    # --- configuration -------------------------------------------------------

    def config_options(self) -> list[models.SessionConfigOption]:
        """The complete option list, with the values the client last chose."""
        return config_options(self._requested, self._catalog())

    def modes(self) -> models.SessionModeState:
        return mode_state(self._requested)

    async def set_config_option(self, config_id: str, value: str) -> None:
        """Change one option; applied now when idle, else when the turn ends.

        Raises:
            ConfigValueError: unknown option or value.
        """
        await self._request_settings(
            apply_option(self._requested, config_id, value, self._catalog())
        )

    async def announce_config_options(self) -> None:
        """Tell the client the option list changed (e.g. models discovered);
        only once the client knows the session (Zed drops earlier updates)."""
        if self.announced and not self._closing:
            await self._send_update(
                self.session_id, models.ConfigOptionUpdate(config_options=self.config_options())
            )

    async def set_mode(self, mode_id: str) -> None:
        """Legacy ``session/set_mode`` (same effect as the mode option)."""
        await self.set_config_option("mode", mode_id)

    async def _request_settings(self, settings: LaunchSettings) -> None:
        self._requested = settings
        if self._turn is None:
            await self._apply_pending_settings(announce=False)

    async def _apply_pending_settings(self, *, announce: bool = True) -> None:
        new = self._requested
        if new == self.settings:
            return
        old, self.settings = self.settings, new
        self.model = new.model
        self._save_soon()
        if self.gate is not None:
            self.gate.set_mode(new.mode)
            if new.mode in GATED_MODES and not self.gate.ready.is_set():
                assert self._nursery is not None
                self._nursery.start_soon(self.gate.verify, self.agy_bin, self._env)
        logger.info("session %s: settings changed: %s", self.session_id, new)
        child = self._child
        if child is not None and child.alive:
            # Launch flags cannot change inside a process: respawn it warm,
            # resuming the conversation.
            self._child = None
            self._retiring = child
            child.kill("configuration changed")
        if announce:
            # Applied after the turn the client changed it during: say so.
            await self._send_update(
                self.session_id, models.ConfigOptionUpdate(config_options=self.config_options())
            )
            if old.mode != new.mode:
                await self._send_update(
                    self.session_id, models.CurrentModeUpdate(current_mode_id=new.mode)
                )

    def _new_mapper(self) -> TurnMapper:
        return TurnMapper(
            message_id=f"msg_{uuid.uuid4().hex}",
            cwd=self.cwd,
            terminals=self._terminals,
            context_size=context_window(self.model, self._context_window_override),
        )

    async def _announce_turn(self, text: str) -> None:
        """Title (first turn) and ``updatedAt`` (every turn) for session lists."""
        updated_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        update = models.SessionInfoUpdate(updated_at=updated_at)
        if self.title is None:
            self.title = make_title(text)
            update = attrs.evolve(update, title=self.title)
        await self._send_update(self.session_id, update)

    def cancel(self, before_seq: float) -> None:
        """Cancel every prompt that arrived before wire position ``before_seq``.

        Synchronous: the running turn's child starts its escalation now; the
        prompts answer ``cancelled`` as they finish.
        """
        self._cancelled_before = max(self._cancelled_before, before_seq)
        turn = self._turn
        if turn is not None and self._is_cancelled(turn):
            if self.gate is not None:
                self.gate.refuse_pending()  # answered deny at once
            self._cancel_turn(turn, "session/cancel")
        self._wake_queue()  # queued prompts answer cancelled at once

    def cancel_prompt(self, seq: float) -> None:
        """Cancel just the prompt that arrived at wire position ``seq``
        (``$/cancel_request``); it answers ``cancelled``."""
        self._cancelled_seqs.add(seq)
        turn = self._turn
        if turn is not None and turn.seq == seq:
            self._cancel_turn(turn, "$/cancel_request")
        self._wake_queue()

    def _is_cancelled(self, turn: Turn) -> bool:
        return self._is_cancelled_seq(turn.seq)

    def _is_cancelled_seq(self, seq: float) -> bool:
        return seq < self._cancelled_before or seq in self._cancelled_seqs or self._closing

    def _cancel_turn(self, turn: Turn, reason: str) -> None:
        turn.mapper.cancel_requested = True
        child = turn.child
        if child is None:
            return  # not sent yet: _run_turn checks again before sending
        if child.alive:
            child.kill(reason)
        else:
            turn.finish(TurnOutcome(OutcomeKind.CANCELLED, "CANCELLED"))

    # --- the child ---------------------------------------------------------

    async def _ensure_child(self) -> AgyChild:
        async with self._spawn_lock:
            if self._child is None or not self._child.alive:
                await self._spawn_locked()
            assert self._child is not None
            return self._child

    async def _spawn(self) -> None:
        async with self._spawn_lock:
            await self._spawn_locked()

    async def _spawn_locked(self) -> None:
        assert self._nursery is not None
        retiring = self._retiring
        if retiring is not None:
            # Never two agy processes on one conversation.
            await retiring.exited.wait()
            self._retiring = None
        self._incarnations += 1
        resume = self.conversation_id if self._resumable else None
        roots = self.additional_dirs
        if self.staging is not None:
            roots = (*roots, self.staging.root)
        gate = self.gate if self._gate_in_use() else None
        gate_dir = gate.hook_dir if gate is not None else None
        launch = self.settings.launch_spec(self.cwd, roots, resume, gate_dir=gate_dir)
        self._resuming = resume
        child = AgyChild(
            argv=build_argv(self.agy_bin, launch),
            cwd=launch.cwd,
            env=gate.agy_env(self._env) if gate is not None else self._env,
            incarnation=self._incarnations,
            policy=self.policy,
            max_line_bytes=self.max_line_bytes,
            messages=self._messages_send.clone(),
            annotate=snapshot_edit_target,
        )
        try:
            await self._nursery.start(child.run)
        except AgySpawnError as exc:
            raise AgyStartError(str(exc), data={"argv": child.argv}) from exc
        self._child = child

    async def _respawn_after_kill(self) -> None:
        try:
            await self._ensure_child()
        except AgyStartError as exc:
            logger.warning("session %s: warm respawn failed: %s", self.session_id, exc)


def _first_leaf(group: BaseExceptionGroup[AgyStartError]) -> AgyStartError:
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, AgyStartError)
    return error


TITLE_MAX_CHARS = 80


def make_title(prompt: str) -> str:
    """A one-line session title from the first prompt."""
    line = next((line.strip() for line in prompt.splitlines() if line.strip()), "")
    line = " ".join(line.split())
    if len(line) > TITLE_MAX_CHARS:
        line = line[: TITLE_MAX_CHARS - 1].rstrip() + "…"
    return line or "New session"
