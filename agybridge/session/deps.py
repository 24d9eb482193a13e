"""What every session of a bridge shares (:class:`SessionDeps`, frozen); what
each is on its own is :class:`~agybridge.session.spec.SessionSpec`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

import attrs

from .config import Catalog

if TYPE_CHECKING:  # annotations only: the settings need neither (issue 15, lazy start-up)
    from ..acp.models import ClientCapabilities, SessionUpdate
    from ..agy import EscalationPolicy
    from ..agy.binary import AgyRuns
    from ..store import AsyncStore
    from ..translate.mapper import TurnMapper

#: Asks the client something (``session/request_permission``): (method, params).
AskClient = Callable[[str, Any], Awaitable[Any]]
#: What to ask the client about to be asked, from its capabilities: (method,
#: params), or None when that client cannot be asked this.
Phrase: TypeAlias = "Callable[[ClientCapabilities], tuple[str, Any] | None]"
#: Asks the session's client a question phrased for it: (session id, phrase)
#: -> (the method sent, the answer), or None when nothing was sent.
AskQuestion: TypeAlias = "Callable[[str, Phrase], Awaitable[tuple[str, Any] | None]]"
#: Runs ``work`` on the running turn's mapper inside the session's loop and
#: sends the updates it returns, so the turn's state has one writer and
#: nothing is sent for a turn that has been answered; False without a turn.
TurnWork: TypeAlias = "Callable[[TurnMapper], list[SessionUpdate]]"
InTurn: TypeAlias = "Callable[[TurnWork], Awaitable[bool]]"
#: A session's runtime snapshot (``_agybridge/session/runtime``'s answer) from
#: the session (a ``Session``: not named, as naming it here would make an import
#: cycle of the session package).
Runtime: TypeAlias = Callable[[Any], dict[str, Any]]

#: AGYBRIDGE_STARTUP_TIMEOUT_S, AGYBRIDGE_STALL_NOTICE_S, AGYBRIDGE_STALL_TIMEOUT_S.
DEFAULT_STARTUP_TIMEOUT_S = 60.0
DEFAULT_STALL_NOTICE_S = 300.0


@attrs.frozen
class Timeouts:
    #: agy starting: first valid output after the prompt, the gate check.
    startup_s: float = DEFAULT_STARTUP_TIMEOUT_S
    #: A running turn with no agy output for this long: tell the user once.
    stall_notice_s: float = DEFAULT_STALL_NOTICE_S
    #: ... and fail it after this long (0: never; for unattended use).
    stall_timeout_s: float = 0.0
    #: An idle session's agy is stopped after this long (0: never); the
    #: session stays, and its next prompt starts agy again (resuming).
    idle_s: float = 0.0


@attrs.frozen
class SessionDeps:
    """Shared by every session of one bridge."""

    agy_bin: str
    policy: EscalationPolicy
    max_line_bytes: int
    env: Mapping[str, str] | None = None
    context_window_override: int | None = None
    catalog: Callable[[], Catalog] = Catalog
    store: AsyncStore | None = None
    staging_base: str | None = None
    keep_staging: bool = False
    #: session/close deletes the stored session too (AGYBRIDGE_DELETE_ON_CLOSE).
    delete_on_close: bool = False
    #: None: no client to ask, so no permission gate (tests).
    ask_client: AskClient | None = None
    #: None: agy's questions are not put to the client (agy settles them itself).
    ask_question: AskQuestion | None = None
    timeouts: Timeouts = attrs.Factory(Timeouts)
    #: Clients come and go and may take a session from each other (the daemon);
    #: a stdio bridge has one client for its whole life.
    many_clients: bool = False
    #: The bridge's log file (AGYBRIDGE_LOG_FILE; None: none), for
    #: ``_agybridge/session/logs``.
    log_file: str | None = None
    #: Whether agy runs at all, checked before the first session's agy
    #: (None: not checked, e.g. in tests that use their own stand-in).
    agy_runs: AgyRuns | None = None
    #: Builds the ``_agybridge/runtime_update`` sent after each turn (None: none).
    runtime: Runtime | None = None
