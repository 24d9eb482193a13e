"""The permission gate of one session: agy's PreToolUse hook -> the editor.

Theory of operation (hooks-and-tools.md part A). In the gated modes (``ask``,
``accept-edits``, ``plan``) agy runs with ``--dangerously-skip-permissions``
and a private ``--add-dir`` root whose ``.agents/hooks.json`` calls the
bridge's hook helper before every tool: the hook is then agy's only check.
The helper reaches this session's :class:`~agybridge.permissions.Broker`
over a private socket; :meth:`Gate.decide` applies the policy (reads inside
the roots need no question, remembered "always" answers, no tampering with
the gate) and otherwise announces the tool call as ``pending`` — with agy's
full arguments, so an edit shows its real diff — and asks the editor with
``session/request_permission``.

In the ungated modes (``safe``, ``autonomous``) the same hook runs as an
*observer* (:attr:`Gate.observing`): it notes the edit target's before-state
for the mutation log and allows, leaving the decision to agy's own checks.

Fail closed: the gate is verified with ``agy -p /hooks`` before the first
turn; if agy does not list it, the session falls back to ``safe`` (agy's own
checks) and says why. Every failure on the way (broker down, no answer in
time, the editor gone) is a deny. ``session/cancel`` denies every pending
request at once.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from ..acp import codec, models
from ..agy.signin import SignIn
from ..permissions import (
    Assessment,
    Broker,
    Decision,
    HookRequest,
    HookRoot,
    HookRootError,
    Policy,
    Verdict,
    child_env,
)
from ..translate.mapper import TurnMapper
from ..translate.proposals import proposed_diff
from ..translate.questions import QUESTION_TOOL, chosen_option
from ..translate.tools import edit_target
from ..workspace.hooks_check import check_hooks_loaded
from ..workspace.reads import read_text_file
from .deps import AskClient, AskQuestion, InTurn, TurnWork
from .questions import QuestionDesk

logger = logging.getLogger(__name__)

#: agy's permission names (contract.md §4, hooks-and-tools.md §A9) -> its tools.
PERMISSION_TOOLS: dict[str, frozenset[str]] = {
    "command": frozenset({"run_command", "send_command_input", "manage_task"}),
    "read_url": frozenset({"read_url_content", "open_browser_url", "read_browser_page"}),
    "execute_url": frozenset({"open_browser_url", "execute_browser_javascript"}),
    "write_file": frozenset(
        {
            "write_to_file",
            "replace_file_content",
            "multi_replace_file_content",
            "sed_file",
            "notebook_edit",
        }
    ),
    "read_file": frozenset({"view_file", "list_dir", "grep_search", "find_by_name"}),
    "mcp": frozenset({"call_mcp_tool"}),
}
SAFE_DENY_REASON = (
    "this action needs the user's approval, and the session is in safe mode "
    "(agybridge asks only in Ask mode)"
)
#: ``agy -p /hooks`` starts agy without a model turn (contract.md §6 timing).
VERIFY_TIMEOUT_S = 60.0
CANCELLED_REASON = "the user cancelled the turn"

SendUpdate = Callable[[models.SessionUpdate], Awaitable[None]]
#: Told (step index, file) before an edit step is let through.
NoteWrite = Callable[[int, str], Awaitable[None]]


class Gate:
    """One session's hook root, broker and policy; see the module docstring."""

    def __init__(
        self,
        *,
        session_id: str,
        roots: tuple[str, ...],
        mode: str,
        ask_client: AskClient,
        send_update: SendUpdate,
        in_turn: InTurn,
        note_write: NoteWrite | None = None,
        ask_question: AskQuestion | None = None,
        hook_timeout_s: int = 600,
        verify_timeout_s: float = VERIFY_TIMEOUT_S,
    ) -> None:
        self.session_id = session_id
        self._roots = roots
        self._mode = mode
        self._ask_client = ask_client
        self._send_update = send_update
        self._in_turn = in_turn
        self._note_write = note_write
        #: agy's questions go to the editor (None: agy settles them itself).
        self._questions = (
            QuestionDesk(session_id, ask_question, in_turn) if ask_question is not None else None
        )
        self._hook_timeout_s = hook_timeout_s
        self._verify_timeout_s = verify_timeout_s
        self.root: HookRoot | None = None
        self.policy: Policy | None = None
        self._broker: Broker | None = None
        #: Set once verification finished; ``verified`` says how.
        self.ready = trio.Event()
        self.verified = False
        self.failure: str | None = None
        #: The verification found agy signed out (its failure is then not the gate's).
        self.signed_out = False
        self._refusing = False
        self._unnumbered = 0
        #: Safe mode after "allow and retry": tools allowed for the session.
        self._session_tools: set[str] = set()
        self._safe_policy: Policy | None = None
        #: The agy child runs ungated (safe, autonomous): the hook only observes.
        self.observing = False

    # --- lifecycle ---------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        """Create the hook root and start the broker (before agy is spawned).

        Raises:
            HookRootError: no private directory could be made.
        """
        self.root = await trio.to_thread.run_sync(
            functools.partial(HookRoot.create, hook_timeout_s=self._hook_timeout_s)
        )
        self.policy = Policy((*self._roots,), self._mode, protected=self.root.protected_paths)
        # agy's own defaults, for safe mode behind the gate: reads and edits
        # inside the workspace pass, the rest needs approval (§A9).
        self._safe_policy = Policy(
            (*self._roots,), "accept-edits", protected=self.root.protected_paths
        )
        self._broker = Broker(
            self.root.socket_path, self.root.token, self.decide, wait_s=self.root.max_wait_s
        )
        await nursery.start(self._broker.run)

    def close(self) -> None:
        """Remove the hook root (sync; the broker ends with the nursery)."""
        if self.root is not None:
            self.root.remove()

    def agy_env(self, base: Mapping[str, str] | None, *, observer: bool = False) -> dict[str, str]:
        assert self.root is not None
        return child_env(self.root, base, observer=observer)

    @property
    def hook_dir(self) -> str | None:
        return self.root.hook_dir if self.root is not None else None

    async def verify(self, agy_bin: str, env: Mapping[str, str] | None) -> None:
        """Check that agy loads the gate (``agy -p /hooks``); sets :attr:`ready`.

        Never raises: a failure is kept in :attr:`failure` for the session to
        fall back to ``safe`` and tell the user.
        """
        self.signed_out = False
        try:
            assert self.root is not None
            with trio.fail_after(self._verify_timeout_s):
                check = await check_hooks_loaded(agy_bin, self.root, self.agy_env(env))
            self.failure = check.failure
            self.signed_out = check.sign_in.state is SignIn.SIGNED_OUT
        except trio.TooSlowError:
            self.failure = f"agy -p /hooks did not answer within {self._verify_timeout_s:g} s"
        except AssertionError as exc:
            self.failure = f"could not run agy -p /hooks: {exc}"
        self.verified = self.failure is None
        if self.failure:
            # Signed out is the session's error to report (-32000), not a gate warning.
            log = logger.info if self.signed_out else logger.warning
            log("session %s: permission gate not verified: %s", self.session_id, self.failure)
        self.ready.set()

    def allow_for_session(self, permissions: set[str]) -> set[str]:
        """Let agy use these permissions for the rest of the session (safe
        mode's "allow and retry"); returns the tools that covers."""
        tools: set[str] = set().union(*(PERMISSION_TOOLS.get(p, frozenset()) for p in permissions))
        self._session_tools |= tools
        return tools

    def allow_question(
        self, permissions: set[str], call_id: str
    ) -> tuple[models.ToolCall, dict[str, Any]]:
        """Safe mode, agy auto-denied ``permissions``: the pending card and the
        ``session/request_permission`` params asking whether to allow them
        for the session (and retry)."""
        names = ", ".join(f'"{p}"' for p in sorted(permissions))
        title = f"Allow agy the {names} permission for this session and retry"
        card = models.ToolCall(
            tool_call_id=call_id,
            title=title,
            kind="other",
            status="pending",
            raw_input={"permissions": sorted(permissions)},
        )
        params = {
            "sessionId": self.session_id,
            "toolCall": {"toolCallId": call_id, "title": title, "status": "pending"},
            "options": [
                {
                    "optionId": "allow",
                    "name": "Allow for this session and retry",
                    "kind": "allow_always",
                },
                {"optionId": "reject", "name": "Don't allow", "kind": "reject_once"},
            ],
        }
        return card, params

    async def ask_allowed(self, params: dict[str, Any]) -> bool:
        """Ask :meth:`allow_question`'s question; any failure to get an
        answer is a no."""
        try:
            answer = await self._ask_client("session/request_permission", params)
        except trio.Cancelled:
            raise
        except Exception as exc:
            logger.warning("session %s: allow-and-retry question failed: %s", self.session_id, exc)
            answer = None
        return chosen_option(answer) == "allow"

    @property
    def session_allows(self) -> bool:
        return bool(self._session_tools)

    def set_mode(self, mode: str) -> None:
        self._mode = mode
        if self.policy is not None:
            self.policy.mode = mode

    def set_roots(self, roots: tuple[str, ...]) -> None:
        """The session's roots changed (a new directory list): the rules apply
        to them from now on; "always" answers are kept."""
        self._roots = roots
        if self.policy is not None:
            self.policy = self.policy.with_roots(roots)
        if self._safe_policy is not None:
            self._safe_policy = self._safe_policy.with_roots(roots)

    # --- decisions ---------------------------------------------------------

    def refuse_pending(self) -> None:
        """``session/cancel``: deny every pending request now, and new ones
        until the next turn starts."""
        self._refusing = True
        if self._broker is not None:
            count = self._broker.deny_all_pending(CANCELLED_REASON)
            if count:
                logger.info(
                    "session %s: denied %d pending permission request(s): %s",
                    self.session_id,
                    count,
                    CANCELLED_REASON,
                )

    def accept_requests(self) -> None:
        self._refusing = False

    async def decide(self, request: HookRequest) -> Decision:
        """The answer for one hook call (cancelled by the broker on deadline,
        cancel or a hook that went away: then the hook gets a deny)."""
        if self._refusing:
            return Decision.deny(CANCELLED_REASON)
        assert self.policy is not None
        step = request.step_idx
        if step is None:  # agy always sends it (§A3); never correlate by guess
            self._unnumbered -= 1
            step = self._unnumbered
        if request.tool_name == QUESTION_TOOL and self._questions is not None:
            return await self._questions.ask(request, step)  # in every mode: not a permission
        target = edit_target(request.tool_name, request.args)
        if target is not None and self._note_write is not None:
            # Before agy writes: the "before" side of the session's mutation log.
            await self._note_write(step, target)
        if self.observing:
            # agy's own checks (or none, autonomous) decide, as without the hook;
            # only the bridge's gate itself stays out of reach.
            assert self._safe_policy is not None
            tamper = self._safe_policy.assess(request)
            if tamper.verdict is Verdict.DENY:
                return Decision.deny(tamper.reason)
            return Decision.allow()
        if self._mode == "safe":
            assessment = self._safe_assess(request)
        else:
            assessment = self.policy.assess(request)
        if assessment.verdict is not Verdict.ASK:
            if not await self._in_turn(lambda mapper: _marked_gated(mapper, step)):
                return Decision.deny("no turn is running")
            if assessment.verdict is Verdict.DENY:
                return Decision.deny(assessment.reason)
            return Decision.allow()
        current: str | None = None
        if target is not None:
            try:
                current = await trio.to_thread.run_sync(read_text_file, target)
            except ValueError:
                current = None
        proposal = proposed_diff(request.tool_name, request.args, current)
        announced: list[tuple[str, models.ToolCallUpdate]] = []

        def announce(mapper: TurnMapper) -> list[models.SessionUpdate]:
            call_id, updates, tool_call = mapper.tools.announce_pending(
                step, request.tool_name, dict(request.args), proposal
            )
            announced.append((call_id, tool_call))
            return updates

        if not await self._in_turn(announce):
            return Decision.deny("no turn is running")
        call_id, tool_call = announced[0]
        scope = assessment.scope or f"`{request.tool_name}`"
        rejected = assessment.rejected_scope or scope
        options = [
            {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
            {"optionId": "allow_always", "name": f"Always allow {scope}", "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
            {
                "optionId": "reject_always",
                "name": f"Always reject {rejected}",
                "kind": "reject_always",
            },
        ]
        try:
            answer = await self._ask_client(
                "session/request_permission",
                {
                    "sessionId": self.session_id,
                    "toolCall": codec.unstructure(tool_call),
                    "options": options,
                },
            )
        except trio.Cancelled:
            raise
        except Exception as exc:  # the editor failed or went away: fail closed
            logger.warning("session %s: permission request failed: %s", self.session_id, exc)
            return Decision.deny("the editor did not answer the permission request")
        choice = chosen_option(answer)
        if choice in ("allow_always", "reject_always"):
            self.policy.remember(assessment.key, choice == "allow_always")
        if choice in ("allow_once", "allow_always"):
            update = models.ToolCallUpdate(tool_call_id=call_id, status="in_progress")
            if not await self._in_turn(lambda _mapper: [update]):
                return Decision.deny(CANCELLED_REASON)
            return Decision.allow()
        if choice is None:
            return Decision.deny("the user cancelled the permission request")
        return Decision.deny("the user rejected this action")

    def _safe_assess(self, request: HookRequest) -> Assessment:
        """agy's own rules, plus what the user allowed for the session: safe
        mode never asks (what would need a question is denied)."""
        assert self._safe_policy is not None
        assessment = self._safe_policy.assess(request)
        if assessment.verdict is Verdict.DENY:
            return assessment
        if assessment.verdict is Verdict.ALLOW or request.tool_name in self._session_tools:
            return attrs.evolve(assessment, verdict=Verdict.ALLOW)
        return attrs.evolve(assessment, verdict=Verdict.DENY, reason=SAFE_DENY_REASON)


def _marked_gated(mapper: TurnMapper, step: int) -> list[models.SessionUpdate]:
    mapper.tools.mark_gated(step)
    return []


__all__ = [
    "PERMISSION_TOOLS",
    "AskClient",
    "Gate",
    "HookRootError",
    "InTurn",
    "TurnWork",
]
