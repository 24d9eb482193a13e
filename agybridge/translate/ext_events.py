"""The ``_agybridge/*`` extension notifications a turn produces, and its
warnings as ACP ``notice`` updates (pure; docs/extensions.md "Notifications").

Both are opt-in on the client's side, so a client that asks for neither sees
the same bytes as before: the extension notifications ride with the session's
updates as :class:`~agybridge.acp.models.ExtensionEvent` and the wire encoder
drops them for a client that did not ask (``initialize``
``_meta.agybridge.notifications``); the mapper turns a warning into a
``notice`` instead of chat text only for a client whose
``clientCapabilities.session.notices`` says it shows them.

The names and fields follow the Chrys ACP front-end's ``_chrys/*``
notifications where agybridge means the same thing (``usage_update``,
``warning``, ``error``, ``sub_agent_invocation_start``).
"""

from __future__ import annotations

from typing import Any

from .. import causes
from ..acp import models
from ..acp.notifications import (
    ERROR,
    SUB_AGENT_FINISHED,
    SUB_AGENT_START,
    USAGE_UPDATE,
    WARNING,
)
from ..agy import Usage
from . import usage

#: The code of the warning that agy ran tool steps the permission gate never
#: saw (no catalogue row: it is not a failure of the turn).
GATE_BYPASSED = "gate_bypassed"
_GATE_BYPASSED_TITLE = "agy ran tools without going through the permission gate"


def usage_event(
    turn_usage: Usage | None, context_used: int | None, context_size: int
) -> models.ExtensionEvent:
    """A turn's token figures, sent when it ends (``_chrys/usage_update``'s names)."""
    params: dict[str, Any] = usage.to_meta(turn_usage) if turn_usage is not None else {}
    params["maxContextTokens"] = context_size
    if context_used is not None:
        params["contextTokens"] = context_used
        params["pct"] = round(100 * context_used / context_size, 1) if context_size else None
    return models.ExtensionEvent(USAGE_UPDATE, params)


def problem_event(cause: str, message: str, *, error: bool) -> models.ExtensionEvent:
    """A warning (the turn ran, something in it did not) or the error a turn
    ended with: ``code`` is the cause's id (docs/errors.md); an error says
    whether retrying can help."""
    if error:
        recoverable = causes.cause(cause).transient
        return models.ExtensionEvent(
            ERROR, {"code": cause, "message": message, "recoverable": recoverable}
        )
    return models.ExtensionEvent(WARNING, {"code": cause, "message": message})


def title(cause: str) -> str:
    """A notice's title for ``cause``: what happened, in one line (the catalogue's "when")."""
    if cause == GATE_BYPASSED:
        return _GATE_BYPASSED_TITLE
    return causes.cause(cause).when


def notice(title: str, description: str, *, error: bool) -> models.Notice:
    """A warning or a turn's error as a ``notice`` (the client shows it beside the chat)."""
    return models.Notice(
        severity="error" if error else "warning", title=title, description=description
    )


def sub_agent_started(
    invocation_id: str, agent_name: str, prompt: str | None, step_index: int
) -> models.ExtensionEvent:
    """agy spawned a subagent (``invoke_subagent``)."""
    params: dict[str, Any] = {
        "agentName": agent_name,
        "invocationId": invocation_id,
        "toolName": "invoke_subagent",
        "stepIndex": step_index,
    }
    if prompt:
        params["prompt"] = prompt
    return models.ExtensionEvent(SUB_AGENT_START, params)


def sub_agent_finished(invocation_id: str, agent_name: str, how: str) -> models.ExtensionEvent:
    """A subagent's work is over: ``returned`` (agy's ``system_message`` marked
    its return), ``failed`` (the spawning step failed) or ``turnEnded`` (the
    turn ended before a return was seen)."""
    return models.ExtensionEvent(
        SUB_AGENT_FINISHED, {"agentName": agent_name, "invocationId": invocation_id, "outcome": how}
    )
