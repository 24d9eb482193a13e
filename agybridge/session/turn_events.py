"""The vocabulary of the turn core (``turns.py``): its states, the events it
is fed, the actions it returns and what its queries answer. Plain data, no
behaviour (the core's own records are in ``core_state.py``)."""

from __future__ import annotations

import enum

import attrs

from .config import LaunchSettings
from .config_events import ApplyDirectories as ApplyDirectories
from .config_events import ApplySettings as ApplySettings
from .config_events import DirectoriesRequested as DirectoriesRequested
from .config_events import SettingsRequested as SettingsRequested
from .errors import SessionError


class TurnState(enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    AWAITING_DETAILS = "awaiting_details"
    ASKING = "asking"
    RETIRING = "retiring"


class GateState(enum.Enum):
    NONE = "none"  # no gate (no client to ask, or it could not be created)
    UNVERIFIED = "unverified"
    VERIFYING = "verifying"
    VERIFIED = "verified"
    FAILED = "failed"


class Stop(enum.Enum):
    END_TURN = "end_turn"
    CANCELLED = "cancelled"


# --- events (in) ---------------------------------------------------------------


@attrs.frozen
class PromptArrived:
    """A ``session/prompt`` was read (wire order); it holds a place in the queue.

    ``steer``: an ``_agybridge/session/steer`` — it goes ahead of the prompts
    already waiting (behind earlier steers).
    """

    seq: float
    steer: bool = False


@attrs.frozen
class PromptReady:
    """The prompt's content is converted and staged: it may run."""

    seq: float


@attrs.frozen
class PromptDropped:
    """The prompt's request task is done: it was answered without a turn (bad
    params, a bridge command), or its answer was taken (or abandoned)."""

    seq: float


@attrs.frozen
class Cancel:
    """``session/cancel`` at wire position ``seq``: every earlier prompt."""

    seq: float


@attrs.frozen
class CancelPrompt:
    """``$/cancel_request`` for one prompt, or its request task went away."""

    seq: float


@attrs.frozen
class Close:
    """The session closes."""


@attrs.frozen
class ClientRequest:
    """The client sent a request for this session (wire position ``seq``)."""

    seq: float


@attrs.frozen
class GateStarted:
    """The session's permission gate exists (``ok``) or could not be created."""

    ok: bool


@attrs.frozen
class ChildSpawned:
    incarnation: int


@attrs.frozen
class ChildSpawnFailed:
    incarnation: int
    error: SessionError


@attrs.frozen
class ChildOutput:
    """agy printed a valid event; ``heard``: it is about the turn it was sent."""

    incarnation: int
    heard: bool = False


class Outcome(enum.Enum):
    """How the running turn's mapper read agy's ``result``."""

    END_TURN = "end_turn"
    AGY_ERROR = "agy_error"  # an ERROR result (its text shown as a message)
    CANCELLED = "cancelled"  # agy's answer to SIGINT


@attrs.frozen
class ChildResult:
    """agy printed a ``result``: the end of the turn it was sent, or a failure
    outside any turn (e.g. an unknown model: no init, one ERROR result)."""

    incarnation: int
    #: agy's status was SUCCESS.
    success: bool
    #: How the running turn's mapper read it (None: no turn was mapping it).
    outcome: Outcome | None = None
    #: An ERROR result whose AGY_ERROR details have not arrived yet.
    details_pending: bool = False
    #: The permissions agy's own policy denied (safe mode's soft denials).
    denied: frozenset[str] = frozenset()
    #: The client-actionable error the result is (auth, model), or one outside a turn.
    error: SessionError | None = None


@attrs.frozen
class AgyErrorLine:
    """An ``AGY_ERROR`` line on stderr of a child running a turn."""

    incarnation: int
    #: The client-actionable error it makes of the turn's result, if any.
    error: SessionError | None = None


@attrs.frozen
class ChildExited:
    incarnation: int
    #: What a turn running on it fails with if nobody stopped it.
    error: SessionError
    #: Exit status 0: between turns that is no failure to report.
    clean: bool = False
    #: For a turn awaiting its error details: the error its result is.
    result_error: SessionError | None = None


@attrs.frozen
class GateVerified:
    ok: bool
    #: agy is signed out: the turn fails with this (-32000), checked again next turn.
    auth_error: SessionError | None = None


@attrs.frozen
class AllowAnswered:
    """The user answered safe mode's "allow for the session and retry"."""

    seq: float
    allowed: bool
    #: Why the gate could not be used for it (the allowance then fails).
    gate_failure: str | None = None


@attrs.frozen
class InternalError:
    """The bridge failed (a bug) while serving prompt ``seq``'s turn (None:
    whatever turn runs, if any)."""

    error: SessionError
    seq: float | None = None


@attrs.frozen
class ActionFailed:
    """Performing ``action`` raised ``error`` (h11's ``send_failed``): the core
    decides which prompt it fails."""

    action: Action
    error: SessionError


@attrs.frozen
class IdlePassed:
    """The session was idle for the idle timeout since :class:`ArmIdle` ``token``."""

    token: int


class Deadline(enum.Enum):
    STARTUP = "startup"  # agy printed nothing valid after the prompt was sent
    DETAILS = "details"  # AGY_ERROR details that trail an ERROR result
    STALL_NOTICE = "stall_notice"
    STALL_TIMEOUT = "stall_timeout"


@attrs.frozen
class DeadlinePassed:
    kind: Deadline
    seq: float
    incarnation: int
    #: What the turn fails with, if this deadline fails it (built by the driver,
    #: which knows what agy printed).
    error: SessionError | None = None


Event = (
    PromptArrived
    | PromptReady
    | PromptDropped
    | Cancel
    | CancelPrompt
    | Close
    | ClientRequest
    | GateStarted
    | ChildSpawned
    | ChildSpawnFailed
    | ChildOutput
    | ChildResult
    | AgyErrorLine
    | ChildExited
    | GateVerified
    | SettingsRequested
    | DirectoriesRequested
    | AllowAnswered
    | InternalError
    | ActionFailed
    | DeadlinePassed
    | IdlePassed
)

# --- actions (out) -------------------------------------------------------------


@attrs.frozen
class AnswerPrompt:
    seq: float
    stop: Stop | None = None
    error: SessionError | None = None
    #: An ``end_turn`` answer: given only once the work before it succeeded
    #: (else the core amends it with :class:`AmendAnswer`). Any other answer is
    #: given whatever fails before it.
    amendable: bool = attrs.field(default=False, eq=False)


@attrs.frozen
class AmendAnswer:
    """The prompt's ``end_turn`` answer, if it is not given yet, says ``error``
    instead (a bug hit its turn's last work: journalling, handing over)."""

    seq: float
    error: SessionError


@attrs.frozen
class StartTurn:
    """A new turn (or attempt): fresh mapper; announce the turn to the client."""

    seq: float
    attempt: int
    #: It cannot be sent yet (agy or the gate is not ready): tell the client
    #: now, not with agy's first output.
    waiting: bool = False


@attrs.frozen
class SendUserTurn:
    seq: float
    incarnation: int
    #: agy runs behind the permission gate (its ungated tools are flagged).
    gated: bool = False


@attrs.frozen
class SpawnChild:
    incarnation: int
    resume: bool
    gated: bool
    settings: LaunchSettings = attrs.field(factory=LaunchSettings, eq=False)  # launched with
    #: The session's first agy: if it cannot be started, neither can the session.
    first: bool = False
    #: Ungated, the hook runs as an observer: it keeps files' before-state, allows all.
    observed: bool = False


@attrs.frozen
class RetireChild:
    incarnation: int
    reason: str
    #: The turn it runs, if any, is being cancelled (agy's ERROR result answers SIGINT).
    cancelling: float | None = None


@attrs.frozen
class VerifyGate:
    pass


@attrs.frozen
class RefusePermissions:
    """Deny every pending permission question now (the turn is being cancelled)."""


@attrs.frozen
class AcceptPermissions:
    pass


@attrs.frozen
class GateFallbackNotice:
    seq: float


@attrs.frozen
class AskAllowRetry:
    seq: float
    permissions: frozenset[str] = frozenset()  # denied, not yet retried in this turn


@attrs.frozen
class RetryRefused:
    """agy denied ``permissions`` again after they were allowed and retried:
    final for this turn (say why)."""

    seq: float
    permissions: frozenset[str]


@attrs.frozen
class ShowAllowAnswer:
    """Show the answer on the "allow and retry" card (the turn still asks)."""

    seq: float
    allowed: bool
    gate_failure: str | None = None


@attrs.frozen
class StartFailed:
    """The session's first agy could not be started: the session ends, and
    ``session/new`` fails with ``error``."""

    error: SessionError


@attrs.frozen
class RecordTurn:
    seq: float


@attrs.frozen
class ArmDeadline:
    kind: Deadline
    seq: float
    incarnation: int


@attrs.frozen
class ArmIdle:
    """The session is idle with a live agy: start the idle timeout (a newer
    ``token`` replaces an older one)."""

    token: int


@attrs.frozen
class StallNotice:
    seq: float


@attrs.frozen
class SendAnnouncements:
    kinds: frozenset[str]
    #: The settings the client last asked for (what the options show).
    settings: LaunchSettings = attrs.field(factory=LaunchSettings, eq=False)


@attrs.frozen
class Closed:
    """Nothing of the session runs any more."""


Action = (
    AnswerPrompt
    | AmendAnswer
    | StartTurn
    | SendUserTurn
    | SpawnChild
    | RetireChild
    | VerifyGate
    | RefusePermissions
    | AcceptPermissions
    | ApplySettings
    | ApplyDirectories
    | GateFallbackNotice
    | AskAllowRetry
    | RetryRefused
    | ShowAllowAnswer
    | StartFailed
    | RecordTurn
    | ArmDeadline
    | ArmIdle
    | StallNotice
    | SendAnnouncements
    | Closed
)


@attrs.frozen
class CoreStatus:
    """What a session's core is doing (``TurnCore.status``), for status views."""

    gate: GateState
    #: The running turn's state (None: no turn runs) and attempt.
    turn_state: TurnState | None
    attempt: int
    #: Prompts waiting behind the running turn, in the order they will run.
    queued: tuple[float, ...]
