"""The vocabulary of the turn core (``turns.py``): its states, the events it
is fed and the actions it returns. Plain data, no behaviour."""

from __future__ import annotations

import enum

import attrs

from .config import LaunchSettings
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
    pass


@attrs.frozen
class ClientRequest:
    """The client sent a request for this session (wire position ``seq``)."""

    seq: float


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


@attrs.frozen
class TurnResult:
    """The running turn's mapper has its outcome (agy's ``result``)."""

    incarnation: int
    #: An ERROR result whose AGY_ERROR details may still be on their way.
    needs_details: bool = False
    #: The result is an error the client must get as one (auth, model).
    error: SessionError | None = None
    #: Safe mode auto-denied something: ask whether to allow it and retry.
    offer_retry: bool = False


@attrs.frozen
class ErrorDetails:
    """The AGY_ERROR line for the running turn's ERROR result arrived."""

    incarnation: int
    #: The client-actionable error the result is, if any (auth, model).
    error: SessionError | None = None


@attrs.frozen
class ChildFailedBeforeTurn:
    """agy reported a failure outside a turn (e.g. an unknown model)."""

    incarnation: int
    error: SessionError


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
    #: The check found agy signed out: the turn fails with this (-32000)
    #: before any gate notice, and the next turn checks again.
    auth_error: SessionError | None = None


@attrs.frozen
class SettingsRequested:
    settings: LaunchSettings
    #: Tell the client when applied at once too (the change did not come
    #: with an answer that carries the options: a slash command).
    announce: bool = False


@attrs.frozen
class AllowAnswered:
    seq: float
    allowed: bool


@attrs.frozen
class InternalError:
    """The bridge failed while serving the running turn (or outside any)."""

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
    | ChildSpawned
    | ChildSpawnFailed
    | ChildOutput
    | TurnResult
    | ErrorDetails
    | ChildFailedBeforeTurn
    | ChildExited
    | GateVerified
    | SettingsRequested
    | AllowAnswered
    | InternalError
    | DeadlinePassed
    | IdlePassed
)

# --- actions (out) -------------------------------------------------------------


@attrs.frozen
class AnswerPrompt:
    seq: float
    stop: Stop | None = None
    error: SessionError | None = None


@attrs.frozen
class StartTurn:
    """A new turn (or attempt): fresh mapper; announce the turn to the client."""

    seq: float
    attempt: int


@attrs.frozen
class SendUserTurn:
    seq: float
    incarnation: int


@attrs.frozen
class SpawnChild:
    incarnation: int
    resume: bool
    gated: bool


@attrs.frozen
class RetireChild:
    incarnation: int
    reason: str


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
class ApplySettings:
    old: LaunchSettings
    new: LaunchSettings
    #: Tell the client (the change was requested during the turn that just
    #: ended, or by a slash command).
    announce: bool


@attrs.frozen
class GateFallbackNotice:
    seq: float


@attrs.frozen
class AskAllowRetry:
    seq: float


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


@attrs.frozen
class Closed:
    pass


Action = (
    AnswerPrompt
    | StartTurn
    | SendUserTurn
    | SpawnChild
    | RetireChild
    | VerifyGate
    | RefusePermissions
    | AcceptPermissions
    | ApplySettings
    | GateFallbackNotice
    | AskAllowRetry
    | RecordTurn
    | ArmDeadline
    | ArmIdle
    | StallNotice
    | SendAnnouncements
    | Closed
)


@attrs.define
class Turn:
    seq: float
    state: TurnState = TurnState.STARTING
    attempt: int = 1
    incarnation: int | None = None
    #: agy said something about this attempt (it read the prompt).
    heard: bool = False
    #: The prompt reached agy in some attempt: the turn goes in the journal.
    reached_agy: bool = False
    stall_noticed: bool = False
    #: How the turn ends once its retiring child is gone.
    pending_stop: Stop | None = None
    pending_error: SessionError | None = None


@attrs.define
class Child:
    incarnation: int
    gated: bool
    live: bool = False
    output_seen: bool = False
