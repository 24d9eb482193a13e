"""One ACP session: what the agent and the supervisor hold, and the trio
driver of its :class:`~.turns.TurnCore`.

``run()`` is the session's nursery and visibly starts every task it owns:
the permission broker, each agy incarnation (through the child slot, whose
readers post straight into the loop's bounded inbox) and the loop
(``loop.py``), the only task that feeds the core and performs what it
returns. Decisions live in the core; the loop and the ports (the child slot,
``gating``, ``timers``, and ``actions`` for the rest) perform them.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import trio

from ..acp import models
from ..agy import InitEvent, ResultEvent
from ..agy.events import InitInfo
from ..logs import SESSION
from ..store import SessionRecord, utc_now
from ..workspace.mutations import MutationLog
from ..workspace.reads import snapshot_edit_target
from ..workspace.staging import StagingArea
from . import errors, startup, timers, turns
from . import turn_events as ev
from .child_slot import ChildSlot
from .commands import Announcer
from .config import LaunchSettings, apply_option, option_setting, with_setting
from .deps import SessionDeps
from .errors import SessionError, internal_error
from .gating import GatePort
from .loop import SessionLoop, Step
from .outlet import ClientSink, Outlet
from .persistence import Conversation, SessionBook
from .prompts import AttemptScopes, PromptBook, PromptResult, PromptWork
from .spec import SessionSpec

if TYPE_CHECKING:
    from .core_state import Turn
    from .gate import Gate, TurnWork

logger = logging.getLogger(__name__)

#: agy events waiting for the loop; small, so a slow client pushes back on
#: agy instead of buffering without bound (a read's batch counts per event).
CHILD_EVENT_BUFFER = 256


class Session:
    """One ACP session; see the module docstring."""

    def __init__(self, spec: SessionSpec, deps: SessionDeps, outlet: Outlet) -> None:
        self.spec, self.deps, self.outlet = spec, deps, outlet
        self.session_id, self.cwd = spec.session_id, spec.cwd
        self.additional_dirs = spec.additional_dirs
        self.title = spec.title
        #: The last plan shown, as JSON (kept in the index; re-sent on load).
        self.plan: tuple[Mapping[str, Any], ...] = spec.plan
        self.created_at = spec.created_at or utc_now()
        self.model: str | None = spec.settings.model
        #: What the current agy said in its ``init`` (tools, model, agent).
        self.init_info: InitInfo | None = None
        self.conversation = Conversation(spec.session_id, spec.conversation_id)
        self.book = SessionBook(deps.store, spec.session_id, spec.next_turn)
        self.mutations = MutationLog(
            deps.store, spec.session_id, (spec.cwd, *spec.additional_dirs), self._turn_number
        )
        self.announcer = Announcer(outlet, deps.catalog, (spec.cwd, *spec.additional_dirs))
        #: The rules; only the loop feeds it (others may read it).
        self.core = turns.TurnCore(
            spec.settings,
            dirs=spec.additional_dirs,
            cwd=spec.cwd,
            resumable=spec.conversation_id is not None,
            muted=spec.muted,
        )
        self.staging: StagingArea | None = None
        self.unrecognised: Counter[str] = Counter()
        #: ``keep`` or ``cancel`` its turn when its client goes away (None:
        #: the supervisor's default); the client may change it on load/resume.
        self.on_disconnect = spec.on_disconnect
        #: trio's clock (set by `run`): read once per read of agy's stdout, so
        #: without `trio.current_time`'s two lookups in between.
        self._clock: trio.abc.Clock
        self.closed = trio.Event()
        self._loop = SessionLoop(self, CHILD_EVENT_BUFFER)
        self.slot = ChildSlot(
            policy=deps.policy,
            max_line_bytes=deps.max_line_bytes,
            # agy's readers post straight into the loop's inbox, which bounds them.
            messages=self._loop.inbox,
            annotate=snapshot_edit_target,
        )
        self.prompts = PromptBook()
        self.nursery: trio.Nursery | None = None
        # The ports that perform the core's actions with state of their own
        # (the child slot above is the third).
        self.deadlines = timers.Deadlines(
            timeouts=deps.timeouts,
            post=self.post,
            start_soon=self.start_soon,
            notes=self.slot.notes,
            result_error=self.result_error,
        )
        self.gates = GatePort(
            session_id=spec.session_id,
            deps=deps,
            send=outlet.send,
            in_turn=self.in_turn,
            note_write=self.mutations.note_before,
            post=self.post,
            start_soon=self.start_soon,
        )
        #: The core's verdict that the session cannot start (`start_failed`).
        self._start_error: SessionError | None = None

    def _turn_number(self) -> int:
        # The running turn's journal index (it is journalled when it ends).
        return self.book.next_turn

    # --- lifecycle ---------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve the session until it is closed; ready once agy is spawned.

        Raises:
            AgyStartError: agy (or its private directory) could not be made
                ready: raised before ``started``, as itself.
        Cancelling this task kills agy with the full escalation first; every
        prompt still waiting is answered (cancelled, or the bridge's error).
        """
        failure: BaseException | None = None
        SESSION.set(self.session_id)  # this task's and its children's log lines name it
        self._clock = trio.lowlevel.current_clock()
        try:
            # Checked and made before the nursery, as trio's _run_process opens
            # its process outside its nursery: a failure reaches session/new as itself.
            await startup.check_agy_runs(self.deps)
            self.staging = await startup.prepare_staging(self.deps, self.spec)
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                self.start_soon(self.deadlines.stall_watch.run)
                roots = (self.cwd, *self.additional_dirs)
                if self.staging is not None:
                    roots = (*roots, self.staging.root)
                gate_ok = await self.gates.start(nursery, roots, self.settings.mode)
                if gate_ok is not None:
                    await self._loop.perform(self.core.handle(ev.GateStarted(gate_ok)))
                await self._loop.perform(self.core.start())
                if self._start_error is None:
                    await self.save()
                    task_status.started()
                    await self._loop.run()
                nursery.cancel_scope.cancel(reason="session closed")
            if self._start_error is not None:
                # The core's verdict (the first agy could not be started),
                # raised once the nursery is gone: session/new fails with it.
                raise self._start_error
        except BaseException as exc:
            failure = exc
            raise
        finally:
            self._loop.end()  # before any await: nothing may wait on the loop now
            self.prompts.close_after(failure)
            if self.staging is not None:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(self.staging.remove)
            self.gates.close()
            self.closed.set()
            logger.info(
                "session %s ended; unrecognised agy output: %s",
                self.session_id,
                dict(self.unrecognised) or "none",
            )

    def start_failed(self, error: SessionError) -> None:
        """The core's verdict: the session's first agy could not be started."""
        self._start_error = error

    async def close(self) -> None:
        """Cancel every prompt, stop agy (escalating), and end :meth:`run`."""
        self.post(ev.Close())
        await self.closed.wait()

    # --- the loop ------------------------------------------------------------

    def post(self, event: ev.Event) -> None:
        self._loop.post(event)

    def post_step(self, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step`` in the loop, in order with everything else."""
        self._loop.post(Step(step))

    async def feed(self, event: ev.Event) -> None:
        """Apply a core event and perform its actions (in the loop only)."""
        await self._loop.feed(event)

    # --- for the loop and the ports ---------------------------------------------------

    def start_soon(
        self, fn: Callable[[], Awaitable[None]], scopes: AttemptScopes | None = None
    ) -> None:
        """Run ``fn`` in the session's nursery (cancelled when the turn attempt
        of ``scopes`` ends). A bug in it fails the running turn, not the session."""
        scope = scopes.new() if scopes is not None else trio.CancelScope()

        async def guarded() -> None:
            try:
                with scope:
                    await fn()
            except Exception as exc:
                logger.exception("session %s: background task failed", self.session_id)
                self.post(ev.InternalError(internal_error(exc)))

        assert self.nursery is not None
        self.nursery.start_soon(guarded)

    def heard_from(self, incarnation: int) -> None:
        """agy printed something: the current child's stall deadline moves."""
        if self.core.is_current_child(incarnation):
            self.deadlines.heard(self._clock.current_time())

    def turn_work_on(self, incarnation: int) -> tuple[Turn, PromptWork] | None:
        """The unanswered turn running on that child, and its work."""
        turn = self.core.turn_on(incarnation)
        work = self.prompts.get(turn.seq) if turn is not None else None
        return None if turn is None or work is None else (turn, work)

    def runtime(self) -> dict[str, Any] | None:
        """The runtime snapshot (None: the bridge builds none)."""
        return None if self.deps.runtime is None else self.deps.runtime(self)

    def roots(self) -> list[str]:
        staging = [self.staging.root] if self.staging is not None else []
        return [self.cwd, *self.additional_dirs, *staging]

    def result_error(self, seq: float) -> SessionError | None:
        work = self.prompts.get(seq)
        if work is None or work.mapper is None:
            return None
        return errors.result_error(work.mapper, auth_failed=work.auth_failed)

    async def in_turn(self, work: TurnWork) -> bool:
        """Run ``work`` on the running turn's mapper inside the loop (the
        gate's way in); False when no turn is running."""
        ran = False

        async def step() -> None:
            nonlocal ran
            seq = self.core.running_seq(mapped=True)
            running = self.prompts.get(seq) if seq is not None else None
            if running is not None and running.mapper is not None:
                for update in work(running.mapper):
                    await self.outlet.send(update)
                ran = True

        await self._loop.run_in_loop(step)
        return ran

    def learned(self, event: InitEvent | ResultEvent, incarnation: int) -> None:
        """Process-level facts from agy's output (conversation, model, usage)."""
        if isinstance(event, InitEvent):
            if self.conversation.learn(event.conversation_id, "init"):
                self.save_soon()
            self.model = event.init.model or self.model
            self.init_info = event.init
            return
        if self.conversation.learn(event.result.conversation_id or "", "result"):
            self.save_soon()
        self.slot.finished_turn(incarnation, event.result.usage)

    # --- the client's side -----------------------------------------------------

    def prompt_arrived(self, seq: float) -> None:
        """A prompt was read (call in wire order, before its task runs)."""
        self.prompts.arrived(seq)
        # Its place in the queue: no work until its task (or its drop) posts.
        self._loop.post_quietly(ev.PromptArrived(seq))

    def steer_arrived(self, seq: float) -> None:
        """A steer was read (wire order): a prompt ahead of those waiting."""
        self.prompts.arrived(seq)
        self.post(ev.PromptArrived(seq, steer=True))

    def drop_prompt(self, seq: float) -> None:
        """The prompt's request task is done (answered by its turn, or without
        one: an error, a bridge command)."""
        self.prompts.drop(seq)
        if self.core.was_answered(seq):
            # Answered by its turn: the core only forgets it, no need to wake the loop.
            self._loop.post_quietly(ev.PromptDropped(seq))
        else:
            self.post(ev.PromptDropped(seq))

    async def prompt(
        self, seq: float, text: str, display_text: str, owner: ClientSink | None = None
    ) -> PromptResult:
        """Run the prompt's turn in its place in the queue; its answer
        (``owner``: the client that sent it, see `Outlet.turn_started`).

        Raises:
            SessionError: agy could not run the turn, or the bridge failed.
        """
        if self.prompts.get(seq) is None:
            # Not told in wire order (`prompt_arrived`: the core would ignore
            # it told twice): its place in the queue is now.
            self.post(ev.PromptArrived(seq))
        work = self.prompts.claim(seq, text, display_text, owner)
        self._loop.post(ev.PromptReady(seq))
        try:
            return await work.result()
        except trio.Cancelled:
            # The request itself went away ($/cancel_request without a handler,
            # shutdown): do not leave agy working on a turn nobody awaits.
            self.post(ev.CancelPrompt(seq))
            raise
        finally:
            self.prompts.release(seq, work)

    def cancel(self, seq: float) -> None:
        """``session/cancel`` at wire position ``seq``."""
        self.post(ev.Cancel(seq))

    def cancel_prompt(self, seq: float) -> None:
        """``$/cancel_request`` for the prompt at ``seq``: answered cancelled."""
        self.post(ev.CancelPrompt(seq))

    def client_request(self, seq: float) -> None:
        """The client sent a request for this session (wire order)."""
        self.post(ev.ClientRequest(seq))

    async def barrier(self) -> None:
        """Wait until the loop has done everything posted before this call
        (e.g. announcements held back after a cancel, before an answer)."""
        await self._loop.run_in_loop(trio.lowlevel.checkpoint)

    def announce(self, kind: str) -> None:
        """``commands`` or ``catalog`` changed: tell the client (once it has
        the session; held back while muted after a cancel)."""
        if self.announcer.client_knows:
            # Decided in the loop, in order: a cancelled answer may come first.
            self.post_step(lambda: self._loop.perform(self.core.announce(kind)))

    async def announce_now(self) -> None:
        """Everything a load/resume sends, before its response."""
        await self.announcer.send_commands()
        self.options_seen()

    @property
    def ended(self) -> bool:
        """The loop is over: nothing posted from now on would ever be done."""
        return self._loop.ended

    @property
    def closing(self) -> bool:
        """Closed, or on its way: a new open must wait for it to end."""
        return self._loop.ended or self.core.closing

    @property
    def busy(self) -> bool:
        return self.core.busy

    @property
    def settings(self) -> LaunchSettings:
        return self.core.settings

    @property
    def gate(self) -> Gate | None:
        """The session's permission gate (None: no client to ask)."""
        return self.gates.gate

    @property
    def skills(self) -> list[Any]:
        return self.announcer.skills

    @property
    def agy_version(self) -> str | None:
        return self.deps.catalog().agy_version

    # --- configuration -------------------------------------------------------

    def config_options(self) -> list[models.SessionConfigOption]:
        return self.announcer.config_options(self.core.requested)

    def options_seen(self) -> None:
        self.announcer.options_seen(self.core.requested)

    def modes(self) -> models.SessionModeState:
        return self.announcer.modes(self.core.requested)

    async def set_config_option(
        self, config_id: str, value: str, *, announce: bool = False
    ) -> None:
        """Change one option; applied now when idle, else when the turn ends
        (then announced; ``announce``: also when applied now).

        Raises:
            ConfigValueError: unknown option or value.
        """
        apply_option(self.core.requested, config_id, value, self.deps.catalog())  # raises

        async def request() -> None:
            # Onto the settings requested by now, in the loop: changes sent
            # together each count (computed here and there, the last undid the rest).
            new = with_setting(self.core.requested, option_setting(config_id), value)
            await self.feed(ev.SettingsRequested(new, announce))

        await self._loop.run_in_loop(request)

    async def set_directories(self, dirs: tuple[str, ...]) -> bool:
        """The directory list sent again (``session/load``, ``resume``): applied now when
        no turn runs, else after it (agy respawned warm, as a setting). True: now."""
        await self.ask(ev.DirectoriesRequested(dirs))
        return self.additional_dirs == dirs

    async def ask(self, event: ev.DirectoriesRequested | ev.SettingsRequested) -> None:
        """A change the client asked for, fed in the loop (``set_workspace``, a reload)."""
        await self._loop.run_in_loop(lambda: self.feed(event))

    async def set_mode(self, mode_id: str) -> None:
        """Legacy ``session/set_mode`` (same effect as the mode option)."""
        await self.set_config_option("mode", mode_id)

    # --- persistence -----------------------------------------------------------

    def record(self, updated_at: str | None = None) -> SessionRecord:
        return self.book.row(
            session_id=self.session_id,
            cwd=self.cwd,
            additional_dirs=self.additional_dirs,
            conversation_id=self.conversation.id,
            drift=self.conversation.drift,
            title=self.title,
            settings=self.core.settings,
            created_at=self.created_at,
            plan=self.plan,
            updated_at=updated_at,
        )

    async def save(self) -> None:
        await self.book.save(self.record())

    def save_soon(self) -> None:
        if self.nursery is not None and self.deps.store is not None and not self.core.closing:
            self.start_soon(self.save)
