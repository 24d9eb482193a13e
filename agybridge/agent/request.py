"""One ACP request in flight, and the route that serves it.

`Route` is one row of the agent's route table (routes.py): a method, the
check that turns its params into their model (once, params.py), the handler
that serves the model, and what the request is to its session (`Kind`: how
it is made known to the session in wire order).

`Request` is everything the agent learns about a request in wire order
(``AcpAgent.request_received``, in the reader) and needs when its task runs
and ends: its route, its session, whether its params failed the check made in
wire order, whether it waits behind a load/resume/close/delete of its session,
whether it was cancelled meanwhile, the rollback that holds back later prompts.
The agent makes one per request in wire order and picks it up once, when the
request's task starts.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from ..jsonrpc import RequestContext, RpcError

if TYPE_CHECKING:
    from ..workspace.mutations import MutationLog

P = TypeVar("P")
#: Whatever a route's handlers are reached through (routes.py: the agent).
T = TypeVar("T")


class Kind(enum.Enum):
    """What a request is to its session (``params.sessionId``), in wire order."""

    #: Made known to its session as a client request (ends the quiet after a cancel).
    REQUEST = "request"
    #: Opens or ends the session (load, resume, close, delete): applied in
    #: wire order, and later requests of the session wait behind it (ordering.py).
    LIFECYCLE = "lifecycle"
    #: A turn in the session's FIFO queue; ``$/cancel_request`` answers it cancelled.
    PROMPT = "prompt"
    #: A turn ahead of the prompts waiting (``_agybridge/session/steer``).
    STEER = "steer"
    #: Holds back the prompts sent after it until the files are restored.
    ROLLBACK = "rollback"

    @property
    def is_turn(self) -> bool:
        return self in (Kind.PROMPT, Kind.STEER)


Handler = Callable[[P, "Request"], Awaitable[Any]]


@attrs.frozen
class Route(Generic[T, P]):
    """``method`` → ``params`` (the params model, checked once) → handler."""

    method: str
    #: The request's params as their model: -32602 naming the field otherwise.
    params: Callable[[Any], P]
    #: The handler, reached through the agent (a session method's handler is
    #: loaded with the session machinery, on first use: issue 15).
    serve: Callable[[T], Handler[P]]
    kind: Kind = Kind.REQUEST
    #: An ``_agybridge/*`` extension's version, as ``initialize`` advertises it.
    version: int | None = None


@attrs.define(eq=False)
class Request:
    """One request, from its arrival (wire order) to its answer."""

    ctx: RequestContext
    #: None: no such method (-32601).
    route: Route[Any, Any] | None
    #: As sent (the route's model leaves out the compatibility fields: compat.py).
    params: Any
    #: ``params.sessionId``, when it is a string.
    session_id: str | None
    #: The params failed the check made in wire order (``params.check_text``).
    problem: RpcError | None = None
    #: Sent before any ``initialize``: -32600 whenever its task runs.
    too_early: bool = False
    #: Sent behind a load, resume, close or delete of its session: it holds a
    #: place in the session's lifecycle order until those are done.
    behind: bool = False
    #: Cancelled (``$/cancel_request`` or ``session/cancel``) while behind.
    cancelled: bool = False
    #: A rollback in flight: the session's mutation log it holds back.
    rollback: MutationLog | None = None

    @property
    def seq(self) -> int:
        """Wire position (comparable with a notification's)."""
        return self.ctx.seq

    @property
    def kind(self) -> Kind | None:
        return self.route.kind if self.route is not None else None

    def cancel_behind(self) -> None:
        """A cancel for a turn still waiting behind: it is answered cancelled
        once it arrives (a turn that arrived is cancelled by its session)."""
        if self.behind:
            self.cancelled = True
