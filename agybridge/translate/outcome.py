"""How a turn ended and what its prompt response reports beside the stop reason (pure).

The mapper fixes a :class:`TurnOutcome` on agy's ``result``; the session
answers the prompt from it (``end_turn`` or ``cancelled``; an agy error was
already shown as a message). :func:`response_meta` builds that answer's
``_meta``: token figures, the context meter, agy's error details (a quota
error with its reset time), denied permissions, the structured output and
what agy sent that the bridge could not map. It changes with what a client
reads off a prompt response, which the event mapping does not.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

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
    return meta
