"""Why a turn or session operation failed, as the session reports it, and
what agy's output means as an error: a child's exit, an ERROR result, a
silence, an agy that fails outside any turn (pure).

Translated once, to JSON-RPC codes, by the agent (style.md §7).
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from ..agy import ChildExited, ResultEvent
    from ..translate.mapper import TurnMapper


class SessionError(Exception):
    """A turn or session operation failed in a way the client must hear about."""

    def __init__(self, message: str, *, data: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data or {}


class AgyStartError(SessionError):
    """agy could not be started."""


class AgyExitedError(SessionError):
    """agy exited during a turn without finishing it."""


class AuthRequiredError(SessionError):
    """agy is not signed in."""


class InvalidModelError(SessionError):
    """agy rejected the configured model."""


def classify_agy_error(text: str, *, auth_failed: bool = False) -> SessionError | None:
    """The client-actionable error an agy error text is, if any (contract.md §4)."""
    if text.startswith("invalid model selection"):
        # notices (datetime, regexes) loads with the first such error, not before
        # initialize is answered (issue 15).
        from ..translate.notices import available_models  # noqa: PLC0415

        models_known = available_models(text)
        message = text.split("\n", 1)[0]
        if models_known:
            message += "; available models: " + ", ".join(models_known)
        return InvalidModelError(message, data={"details": text, "availableModels": models_known})
    from ..agy.stderr import is_auth_text  # noqa: PLC0415 - beside the notices import above

    if auth_failed or is_auth_text(text):
        return auth_required(text)
    return None


#: What to do about it: the editor's sign-in action runs ``agybridge login``.
AUTH_REQUIRED_MESSAGE = (
    "agy is not signed in: sign in with your editor's login action, or run "
    "`agybridge login` (or `agy`) in a terminal, then retry"
)


def auth_required(details: str) -> AuthRequiredError:
    """The -32000 error for a signed-out agy; ``details`` = agy's own words."""
    return AuthRequiredError(AUTH_REQUIRED_MESSAGE, data={"details": details})


class InternalSessionError(SessionError):
    """The bridge itself failed while serving a turn (a bug): -32603."""


def internal_error(exc: Exception) -> InternalSessionError:
    """The client-facing error for a bug ``exc`` hit while serving."""
    return InternalSessionError(
        f"internal error in agybridge: {type(exc).__name__}: {exc}",
        data={"exception": type(exc).__name__},
    )


#: How much of a garbage line an error quotes.
QUOTE_CHARS = 200
STDERR_LINES_QUOTED = 5


class AgyStalledError(SessionError):
    """agy printed nothing (valid) for longer than the bridge waits."""


@attrs.define
class ChildNotes:
    """What one agy process printed that is not an event, for error messages."""

    garbage: str | None = None
    stderr: collections.deque[str] = attrs.Factory(
        lambda: collections.deque(maxlen=STDERR_LINES_QUOTED)
    )


def result_error(mapper: TurnMapper, *, auth_failed: bool) -> SessionError | None:
    """The client-actionable error an ERROR result is, if any."""
    from ..translate.outcome import OutcomeKind  # noqa: PLC0415 - with the first turn

    outcome = mapper.outcome
    if outcome is None or outcome.kind is not OutcomeKind.AGY_ERROR or mapper.quota is not None:
        return None
    if outcome.partial:
        return None  # agy answered first: the answer stands, the error was a warning
    return classify_agy_error(outcome.error or "", auth_failed=auth_failed)


def failure_before_turn(event: ResultEvent) -> SessionError:
    """A pre-turn failure (e.g. unknown model: no init, one ERROR result,
    exit 1; contract.md §3.1), reported to the next prompt."""
    text = event.result.error or f"agy failed with status {event.result.status}"
    return classify_agy_error(text) or SessionError(f"agy failed before the turn started: {text}")


def exit_error(message: ChildExited) -> AgyExitedError:
    """What a turn fails with when its agy exits without finishing it."""
    tail = "\n".join(message.stderr_tail[-STDERR_LINES_QUOTED:])
    return AgyExitedError(
        f"agy exited unexpectedly (exit code {message.returncode}) before finishing the turn"
        + (f": {tail}" if tail else ""),
        data={"exitCode": message.returncode, "stderrTail": list(message.stderr_tail)},
    )


def silence_error(kind: str, seconds: float, notes: ChildNotes | None) -> AgyStalledError:
    """``kind`` is ``startup`` (no valid event since the prompt was sent) or
    ``stall`` (no output at all during the turn)."""
    notes = notes or ChildNotes()
    if kind == "startup":
        if notes.garbage is not None:
            did = f"agy printed only output that is not stream-json: {notes.garbage!r}"
        else:
            did = "agy printed nothing"
        message = (
            f"agy did not start within {seconds:g} s ({did}). "
            "Run `agybridge doctor` to check the agy installation "
            "(AGYBRIDGE_STARTUP_TIMEOUT_S sets this limit)."
        )
    else:
        message = (
            f"agy printed nothing for {seconds:g} s, so the turn was stopped "
            "(AGYBRIDGE_STALL_TIMEOUT_S sets this limit)."
        )
    stderr = list(notes.stderr)
    if stderr:
        message += " Last stderr lines: " + " | ".join(stderr)
    return AgyStalledError(message, data={"reason": kind, "seconds": seconds, "stderrTail": stderr})


def quote(line: str) -> str:
    return line if len(line) <= QUOTE_CHARS else line[: QUOTE_CHARS - 1] + "…"


STALL_NOTICE = (
    "⏳ agy has printed nothing for {minutes} — it may be running a long command. "
    "The turn keeps running; cancel it to stop."
)


def stall_notice_text(seconds: float) -> str:
    minutes = f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
    return STALL_NOTICE.format(minutes=minutes)
