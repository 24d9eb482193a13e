"""What agy's output means for a session (used by the session loop).

Reading the files a turn's events name (the mapper asks which), the errors a
child's exit, an ERROR result or a silence turn into, and an agy that fails
outside any turn. Everything but :func:`observe_for` is pure.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence

import attrs
import trio

from ..agy import ChildExited, ResultEvent
from ..translate.mapper import TurnMapper
from ..translate.outcome import OutcomeKind
from ..translate.tool_calls import NO_OBSERVATION, Observation
from ..workspace.reads import observe
from .errors import AgyExitedError, SessionError, classify_agy_error

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


async def observe_for(
    files: list[str],
    images: list[str],
    attachment: object,
    roots: Callable[[], Sequence[str]],
) -> Observation:
    """Read the ``files`` and ``images`` an event names (``paths_to_read``
    of its mapper; in a worker thread); edit targets snapshotted as the line
    was read come as its ``attachment``."""
    early = attachment if isinstance(attachment, dict) else {}
    files = [path for path in files if path not in early]
    seen = NO_OBSERVATION
    if files or images:
        seen = await trio.to_thread.run_sync(observe, files, images, list(roots()))
    if early:
        seen = attrs.evolve(seen, files={**seen.files, **early})
    return seen


def result_error(mapper: TurnMapper, *, auth_failed: bool) -> SessionError | None:
    """The client-actionable error an ERROR result is, if any."""
    outcome = mapper.outcome
    if outcome is None or outcome.kind is not OutcomeKind.AGY_ERROR or mapper.quota is not None:
        return None
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
