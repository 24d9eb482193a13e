"""How a turn ended and what its prompt response reports beside the stop reason (pure).

The mapper fixes a :class:`TurnOutcome` on agy's ``result`` (:func:`ending`:
what the result's status means, and the notice of why a turn did not end
well, with its catalogue cause); the session
answers the prompt from it (``end_turn`` or ``cancelled``; an agy error was
already shown as a message). :func:`response_meta` builds that answer's
``_meta``: token figures, the context meter, agy's error details (a quota
error with its reset time), denied permissions, the structured output and
what agy sent that the bridge could not map. It changes with what a client
reads off a prompt response, which the event mapping does not.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .. import causes
from ..agy import events
from . import notices, usage


class OutcomeKind(enum.Enum):
    END_TURN = "end_turn"
    #: agy reported an ERROR result; the error text was shown as a message.
    AGY_ERROR = "agy_error"
    CANCELLED = "cancelled"


@attrs.frozen
class TurnOutcome:
    kind: OutcomeKind
    status: str
    error: str | None = None
    #: An ERROR result that came after agy's answer: the answer stands, the
    #: error was shown as a warning after it (contract.md §11).
    partial: bool = False


@attrs.frozen
class Notice:
    """A bridge notice of why a turn did not end well (shown after ``⚠️``)."""

    text: str
    #: Its catalogue id (``_meta.agybridge.cause``) and structured fields.
    cause: str
    fields: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Ending:
    """What a ``result`` means for the turn (:func:`ending`)."""

    outcome: TurnOutcome
    quota: notices.QuotaError | None = None
    #: agy's error says its print timeout fired (its stderr line may not have come).
    print_timeout: bool = False
    notice: Notice | None = None


def ending(
    result: events.Result,
    *,
    denied: bool,
    cancel_requested: bool,
    answered: bool,
    print_timeout_shown: bool,
    agy_error_details: Mapping[str, Any] | None,
    now: dt.datetime,
) -> Ending:
    """How the turn ends given agy's ``result``: ``denied``, a permission was
    denied this turn; ``answered``, agy's own text came; ``print_timeout_shown``,
    the print timeout's notice was already given (from agy's stderr)."""
    status = result.status
    if status == events.STATUS_SUCCESS:
        return Ending(TurnOutcome(OutcomeKind.END_TURN, status))
    if status in ("CANCELED", "CANCELLED") and denied and not cancel_requested:
        # agy 1.2.x ends a soft-denied turn CANCELED: its denial, not the user's cancel.
        return Ending(TurnOutcome(OutcomeKind.END_TURN, status))
    if cancel_requested or status in ("CANCELED", "CANCELLED", "INTERRUPTED"):
        return Ending(TurnOutcome(OutcomeKind.CANCELLED, status, result.error))
    error = result.error or f"agy ended the turn with status {status}"
    # agy gave its answer, then failed (e.g. a 429 after its own retries):
    # the answer stands; the error is what came after it (contract.md §11).
    partial = answered or bool((result.response or "").strip())
    outcome = TurnOutcome(OutcomeKind.AGY_ERROR, status, error, partial=partial)
    found = causes.classify_agy_failure(error, agy_error_details)
    if print_timeout_shown:
        return Ending(outcome)  # its notice says it; agy's "print timeout" error adds nothing
    if found == "print_timeout":  # the stderr line has not come (another pipe)
        notice = Notice(notices.PRINT_TIMEOUT_MESSAGE, found)
        return Ending(outcome, print_timeout=True, notice=notice)
    row = causes.cause(found)
    if found == "interrupted":
        return Ending(outcome, notice=Notice(row.with_fix(row.message), found))
    quota = notices.quota_error(error, agy_error_details, now)
    fields: dict[str, Any] = {"detail": error}
    if quota is not None:
        fields = {"resetsIn": quota.resets_in, "resetsAt": quota.resets_at}
        found = found if found != "agy_error" else "quota"
    if partial:
        failed = quota.message(after_answer=True) if quota else error
        text = f"agy stopped after this answer: {failed}"
        return Ending(outcome, quota, notice=Notice(text, found, {"detail": error, **fields}))
    if quota is not None:
        return Ending(outcome, quota, notice=Notice(row.with_fix(quota.message()), found, fields))
    return Ending(outcome, notice=Notice(row.with_fix(f"agy error: {error}"), found, fields))


def response_meta(
    *,
    structured_output: Any,
    turn_usage: events.Usage | None,
    context_used: int | None,
    context_size: int,
    quota: notices.QuotaError | None,
    agy_error_details: dict[str, Any] | None,
    denied: Sequence[str],
    unrecognised: Mapping[str, int],
    partial: bool = False,
    cause: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The prompt response's ``_meta`` for one turn (token figures, errors...);
    ``cause`` is the catalogue's ``_meta`` of a turn that did not end well."""
    meta: dict[str, Any] = dict(cause or {})
    if structured_output is not None:
        meta["structuredOutput"] = structured_output
    if turn_usage is not None:
        meta["usage"] = usage.to_meta(turn_usage)
    if context_used is not None:
        meta["context"] = {"used": context_used, "size": context_size}
    if quota is not None and agy_error_details and quota.details is None:
        quota = attrs.evolve(quota, details=agy_error_details)
    if quota is not None:
        meta["agyError"] = quota.meta()
    elif agy_error_details:
        meta["agyError"] = notices.camel_keys(agy_error_details)
    if denied:
        meta["deniedPermissions"] = sorted({p for p in denied if p})
    if unrecognised:
        meta["unrecognisedAgyOutput"] = dict(unrecognised)
    if partial:
        # ACP has no stop reason for "answered, then failed": end_turn plus this.
        meta["partial"] = True
    return meta
