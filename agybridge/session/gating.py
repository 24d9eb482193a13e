"""The session's permission gate as a port of the session loop (see
``gate.py`` for the gate itself): it creates the gate, verifies it, lets
permission questions through or refuses them, and runs safe mode's "allow
for this session and retry" question.

The turn core decides when the gate is verified, when agy runs behind it, and
what the user's answer to "allow and retry" means; this port does the I/O and
posts what happened back to the loop as facts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import trio

from ..acp import models
from ..translate.notices import SETTINGS_PATH
from . import turn_events as ev
from .config import MODES
from .deps import SessionDeps
from .errors import auth_required
from .prompts import AttemptScopes

if TYPE_CHECKING:
    from ..translate.mapper import TurnMapper
    from .gate import Gate, InTurn, NoteWrite, SendUpdate

logger = logging.getLogger(__name__)

Post = Callable[[ev.Event], None]
StartSoon = Callable[[Callable[[], Awaitable[None]], AttemptScopes | None], None]


class GatePort:
    """One session's gate; see the module docstring."""

    def __init__(
        self,
        *,
        session_id: str,
        deps: SessionDeps,
        send: SendUpdate,
        in_turn: InTurn,
        note_write: NoteWrite,
        post: Post,
        start_soon: StartSoon,
    ) -> None:
        self._session_id = session_id
        self._deps = deps
        self._send = send
        self._in_turn = in_turn
        self._note_write = note_write
        self._post = post
        self._start_soon = start_soon
        #: None: no client to ask, so no gate (or not started yet).
        self.gate: Gate | None = None
        #: The current agy's own settings make the session's mode meaningless
        #: (`agy_started`); the chat is told once per session, when a turn
        #: can carry it.
        self.mode_overridden = False
        self._mode_warned = False
        self._mode_notice: str | None = None

    async def start(self, nursery: trio.Nursery, roots: tuple[str, ...], mode: str) -> bool | None:
        """Create the gate with its broker running: whether it works (None:
        no client to ask, so no gate). One that cannot be created is kept
        with its ``failure``."""
        ask_client = self._deps.ask_client
        if ask_client is None:
            return None
        # Imported on the first session, not at start-up: initialize needs none of it.
        from ..permissions import HookRootError  # noqa: PLC0415
        from .gate import Gate  # noqa: PLC0415

        gate = self.gate = Gate(
            session_id=self._session_id,
            roots=roots,
            mode=mode,
            ask_client=ask_client,
            send_update=self._send,
            in_turn=self._in_turn,
            note_write=self._note_write,
            ask_question=self._deps.ask_question,
            verify_timeout_s=self._deps.timeouts.startup_s,
        )
        try:
            await gate.start(nursery)
        except (HookRootError, OSError) as exc:
            gate.failure = f"could not create the permission gate: {exc}"
            gate.ready.set()
            logger.warning("session %s: %s", self._session_id, gate.failure)
        return gate.failure is None

    def close(self) -> None:
        if self.gate is not None:
            self.gate.close()

    def agy_env(
        self, gated: bool, *, observed: bool = False
    ) -> tuple[str | None, Mapping[str, str] | None]:
        """The hook directory and environment agy is launched with: gated, with
        the hook as an observer, or without it. At most one agy runs at a time,
        so the gate takes the role of the one being launched."""
        env = self._deps.env
        gate = self.gate
        if gate is None or not (gated or (observed and gate.failure is None)):
            return None, env
        gate.observing = not gated
        return gate.hook_dir, gate.agy_env(env, observer=not gated)

    @property
    def failure(self) -> str | None:
        return self.gate.failure if self.gate is not None else None

    def verify(self) -> None:
        """Check that agy loads the gate (in the background); the loop hears
        how it went, and whether agy is signed out."""
        gate = self.gate
        assert gate is not None

        async def verify() -> None:
            await gate.verify(self._deps.agy_bin, self._deps.env)
            signed_out = auth_required(gate.failure or "") if gate.signed_out else None
            self._post(ev.GateVerified(gate.failure is None, signed_out))

        self._start_soon(verify, None)

    def permissions(self, action: ev.RefusePermissions | ev.AcceptPermissions) -> None:
        if self.gate is not None and isinstance(action, ev.RefusePermissions):
            self.gate.refuse_pending()
        elif self.gate is not None:
            self.gate.accept_requests()

    def set_mode(self, mode: str) -> None:
        if self.gate is not None:
            self.gate.set_mode(mode)

    async def ask_allow(
        self, action: ev.AskAllowRetry, mapper: TurnMapper, attempt: AttemptScopes
    ) -> None:
        """Safe mode, agy auto-denied something: show the question's card,
        ask in the background, and post the answer to the loop."""
        gate = self.gate
        assert gate is not None
        seq = action.seq
        card, params = gate.allow_question(set(action.permissions), _allow_call_id(mapper))
        await self._send(card)

        async def ask() -> None:
            allowed = await gate.ask_allowed(params)
            if allowed and not gate.ready.is_set():
                await gate.verify(self._deps.agy_bin, self._deps.env)
            failure = gate.failure if allowed else None
            self._post(ev.GateVerified(gate.failure is None))
            self._post(ev.AllowAnswered(seq, allowed, failure))

        self._start_soon(ask, attempt)

    async def show_allow_answer(self, action: ev.ShowAllowAnswer, mapper: TurnMapper) -> None:
        """The user's answer on the question's card; allowed, the permissions
        are the session's from now on (the core retries the turn behind the gate)."""
        gate = self.gate
        assert gate is not None
        ok = action.allowed and action.gate_failure is None
        # "Don't allow" is the user's choice, not a failure: only a gate that could not
        # allow it turns the card red.
        status = "failed" if action.gate_failure is not None else "completed"
        await self._send(models.ToolCallUpdate(tool_call_id=_allow_call_id(mapper), status=status))
        if action.gate_failure is not None:
            await self._send(
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
            logger.info(
                "session %s: allowed %s for the session; retrying", self._session_id, denied
            )

    async def retry_refused(self, action: ev.RetryRefused, mapper: TurnMapper) -> None:
        """agy denied again what the user allowed for this turn's retry: say
        that this is final for the turn, why, and what would change it."""
        names = ", ".join(f'"{p}"' for p in sorted(action.permissions))
        text = (
            f"\n\n⚠️ agy denied the {names} permission again after you allowed it and "
            "the prompt was retried, so agybridge does not ask again in this turn. agy's "
            "own settings keep denying it (a `deny` rule under permissions in "
            "~/.gemini/antigravity-cli/settings.json, a strict tool permission, or a path "
            "agy always protects): change that setting, or use the Ask mode."
        )
        await self._send(
            models.AgentMessageChunk(
                content=models.TextContent(text=text), message_id=f"{mapper.message_id}-final"
            )
        )
        logger.info(
            "session %s: %s denied again after allow and retry; final for this turn",
            self._session_id,
            names,
        )

    def agy_started(self, permission_mode: str | None, mode: str, argv: Sequence[str]) -> None:
        """agy's ``init`` said its own permission mode (contract.md §3.1, §11).
        ``always-proceed`` without our ``--dangerously-skip-permissions`` is
        agy's own settings (or an ``agy`` wrapper): its checks deny nothing,
        so a mode that relies on them (safe, or a gated mode fallen back to
        safe) is not what it says. Told once per session in the chat."""
        # Asked for by us (autonomous, or behind the gate), it is expected.
        self.mode_overridden = (
            permission_mode == "always-proceed" and "--dangerously-skip-permissions" not in argv
        )
        if self._mode_warned or not self.mode_overridden:
            return
        self._mode_warned = True
        name = MODES.get(mode, (mode, ""))[0]
        self._mode_notice = (
            f"⚠️ agy's own settings approve every action (agy reports its permission mode "
            f"as `always-proceed`), so the {name} mode denies nothing: agy runs commands "
            'and changes files without asking. This comes from `"toolPermission": '
            f'"always-proceed"` in {SETTINGS_PATH} (or an `agy` wrapper that adds '
            "--dangerously-skip-permissions). To fix it, set `toolPermission` to "
            '`"request-review"` there, or switch this session to the Ask mode, where '
            "agybridge asks you before each action.\n\n"
        )
        logger.warning(
            "session %s: agy runs with permission mode always-proceed in %s mode",
            self._session_id,
            mode,
        )

    def take_mode_notice(self) -> str | None:
        """The pending permission-mode notice, once."""
        notice, self._mode_notice = self._mode_notice, None
        return notice


def _allow_call_id(mapper: TurnMapper) -> str:
    return f"{mapper.message_id}-allow"
