"""Why a turn or session operation failed, as the session reports it, and
what agy's output means as an error: a child's exit, an ERROR result, a
silence, an agy that fails outside any turn (pure).

Translated once, to JSON-RPC codes, by the agent (style.md §7).
"""

from __future__ import annotations

import collections
import re
from typing import TYPE_CHECKING, Any

import attrs

from .. import causes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..agy import AgySpawnError, ChildExited, ResultEvent
    from ..agy.binary import AgyBinary
    from ..translate.mapper import TurnMapper


# agy's words for an unknown model: ``invalid model selection (--model "X" ...``.
_ASKED_MODEL = re.compile(r'--model "([^"]*)"')


class SessionError(Exception):
    """A turn or session operation failed in a way the client must hear about.

    ``cause`` is its catalogue id (`agybridge.causes`): it picks the JSON-RPC
    code; ``fields`` are the structured facts that go to ``_meta.agybridge``
    (path, exit code, signal, model, reset time...)."""

    #: The catalogue id when the raiser does not name one.
    default_cause = "agy_error"

    def __init__(
        self,
        message: str,
        *,
        data: dict[str, object] | None = None,
        cause: str | None = None,
        fields: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.data = data or {}
        self.cause = causes.cause(cause or self.default_cause).id
        self.fields = fields or {}

    def meta(self) -> dict[str, Any]:
        """``_meta`` naming the cause and its fields."""
        return causes.meta(self.cause, **self.fields)


class AgyStartError(SessionError):
    """agy could not be started."""

    default_cause = "agy_fails"


def spawn_error(
    exc: AgySpawnError, argv: Sequence[str], located: AgyBinary | None
) -> AgyStartError:
    """What an agy that could not be spawned tells the client: the program
    itself when it is the problem (it went away since ``--version``, say), the
    working directory when that is gone, else the spawn's own words."""
    if located is not None and located.path is None:
        return AgyStartError(
            located.message(),
            data={"argv": list(argv)},
            cause=located.cause,
            fields={"agyBin": argv[0]},
        )
    if exc.missing_cwd is not None:
        return AgyStartError(
            f"{exc}: pick an existing directory for the session",
            data={"argv": list(argv)},
            cause="cwd_missing",
            fields={"path": exc.missing_cwd},
        )
    return AgyStartError(str(exc), data={"argv": list(argv)}, fields={"agyBin": argv[0]})


class AgyExitedError(SessionError):
    """agy exited during a turn without finishing it."""

    default_cause = "agy_crashed"


class AuthRequiredError(SessionError):
    """agy is not signed in."""

    default_cause = "not_signed_in"


class InvalidModelError(SessionError):
    """agy rejected the configured model."""

    default_cause = "invalid_model"


def classify_agy_error(text: str, *, auth_failed: bool = False) -> SessionError | None:
    """The client-actionable error an agy error text is, if any (contract.md §4)."""
    found = causes.classify_agy_failure(text, auth_failed=auth_failed)
    if found == "invalid_model":
        # notices (datetime, regexes) loads with the first such error, not before
        # initialize is answered (issue 15).
        from ..translate.notices import available_models  # noqa: PLC0415

        models_known = available_models(text)
        message = text.split("\n", 1)[0]
        if models_known:
            message += "; available models: " + ", ".join(models_known)
        asked = _ASKED_MODEL.search(text)
        return InvalidModelError(
            message,
            data={"details": text, "availableModels": models_known},
            fields={"model": asked.group(1) if asked else None, "availableModels": models_known},
        )
    if found == "not_signed_in":
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

    default_cause = "bridge_bug"


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

    default_cause = "stall_timeout"


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
    known = classify_agy_error(text) or _service_error(text, None)
    # A 503 or a quota before the first turn is the same cause as mid-turn.
    return known or SessionError(
        f"agy failed before the turn started: {text}",
        cause=causes.classify_agy_failure(text),
        fields={"detail": text},
    )


def exit_error(message: ChildExited) -> SessionError:
    """What a turn fails with when its agy exits without finishing it: a
    crash (exit code, or the signal by name), unless agy said why on stderr
    first (a quota, an outage, a sign-in; old agy prints no ``AGY_ERROR``)."""
    said = stderr_failure(message.stderr_tail)
    if said is not None:
        return said
    from ..agy.stderr import StderrKind, classify_stderr  # noqa: PLC0415 - with the first exit

    # agy's AGY_ERROR JSON goes to _meta, parsed; the message quotes its words only.
    lines = [classify_stderr(text) for text in message.stderr_tail]
    parsed = [line.details for line in lines if line.kind is StderrKind.AGY_ERROR]
    words = [line.text for line in lines if line.kind is not StderrKind.AGY_ERROR]
    tail = "\n".join(words[-STDERR_LINES_QUOTED:])
    how = causes.exit_description(message.returncode)
    fields = causes.exit_fields(message.returncode)
    if parsed and parsed[-1]:
        fields["agyError"] = _camel_keys(parsed[-1])
    row = causes.cause("agy_crashed")
    return AgyExitedError(
        row.with_fix(row.render(exit=how)) + (f" agy's last stderr lines: {tail}" if tail else ""),
        data={"exitCode": message.returncode, "stderrTail": list(message.stderr_tail)},
        fields=fields,
    )


def _camel_keys(details: dict[str, Any]) -> dict[str, Any]:
    from ..translate.notices import camel_keys  # noqa: PLC0415 - with the first failure

    return camel_keys(details)


def stderr_failure(tail: tuple[str, ...] | list[str]) -> SessionError | None:
    """The failure agy's last stderr lines name (quota, outage, rate limit,
    sign-in), if they name one; an ``AGY_ERROR`` line's fields win."""
    from ..agy.stderr import StderrKind, classify_stderr  # noqa: PLC0415 - with the first exit

    lines = [classify_stderr(text) for text in tail]
    for line in reversed(lines):
        if line.kind is StderrKind.AUTH:
            return auth_required(line.text)
        if line.kind is StderrKind.AGY_ERROR and line.details is not None:
            words = [x.text for x in lines if x.kind is StderrKind.ERROR]
            text = words[-1].removeprefix("error:").strip() if words else ""
            found = _service_error(text or str(line.details.get("short_error", "")), line.details)
            if found is not None:
                return found
    for line in reversed(lines):
        if line.kind is StderrKind.ERROR:
            found = _service_error(line.text.removeprefix("error:").strip(), None)
            if found is not None:
                return found
    return None


def _service_error(text: str, details: dict[str, Any] | None) -> SessionError | None:
    """agy's service could not serve (quota, rate limit, outage): its words
    in the message, the parsed ``AGY_ERROR`` fields in ``_meta`` only."""
    found = causes.classify_agy_failure(text, details)
    if found not in ("quota", "rate_limited", "unavailable"):
        return None
    # notices (datetime, regexes) loads with the first such error (issue 15).
    from ..translate import notices  # noqa: PLC0415

    fields: dict[str, Any] = {"agyError": _camel_keys(details)} if details else {}
    message = f"agy could not run the turn: {text}"
    import datetime as dt  # noqa: PLC0415 - not before initialize is answered (issue 15)

    quota = notices.quota_error(text, details, dt.datetime.now(dt.UTC))
    if found == "quota" and quota is not None and quota.resets_at:
        message += f" (quota resets at {quota.resets_at})"
        fields.update(resetsIn=quota.resets_in, resetsAt=quota.resets_at)
    message = causes.cause(found).with_fix(message)
    return SessionError(message, cause=found, data={"details": text}, fields=fields)


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
    return AgyStalledError(
        message,
        data={"reason": kind, "seconds": seconds, "stderrTail": stderr},
        cause=_silence_cause(kind, notes),
        fields={"seconds": seconds, "quote": notes.garbage},
    )


def _silence_cause(kind: str, notes: ChildNotes) -> str:
    if kind != "startup":
        return "stall_timeout"
    # Not stream-json at all: most likely AGY_BIN is not agy (or too old an agy).
    return "agy_garbage" if notes.garbage is not None else "agy_start_timeout"


def quote(line: str) -> str:
    return line if len(line) <= QUOTE_CHARS else line[: QUOTE_CHARS - 1] + "…"


STALL_NOTICE = (
    "⏳ agy has printed nothing for {minutes} — it may be running a long command. "
    "The turn keeps running; cancel it to stop."
)


def stall_notice_text(seconds: float) -> str:
    minutes = f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
    return STALL_NOTICE.format(minutes=minutes)
