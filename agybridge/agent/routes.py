"""The agent's route table: ``method → params model → handler``, one row per
method (the ACP Python SDK's ``MessageRouter`` is the model).

Every ACP method the agent serves is here and nowhere else: the agent looks a
request's route up once, in wire order; ``initialize`` advertises the
``_agybridge/*`` rows that carry a version (advertised.py). The table loads
nothing it names: a params model is imported when a request is checked
against it, the session methods with the first request that needs them
(issue 15: ``initialize`` is answered without the session machinery).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from . import params
from .request import Handler, Kind, Request, Route

if TYPE_CHECKING:
    from ..acp import models
    from .session_methods import SessionMethods

P = TypeVar("P")


class Agent(Protocol):
    """What the routes reach their handlers through (`AcpAgent`)."""

    async def initialize(self, params: models.InitializeRequest, request: Request) -> Any: ...

    async def authenticate(self, params: models.AuthenticateRequest, request: Request) -> Any: ...

    async def settings_options(self, params: dict[str, Any], request: Request) -> Any: ...

    @property
    def sessions(self) -> SessionMethods:
        """The methods that need sessions (loaded on first use)."""
        ...


def route(
    method: str,
    checked: Callable[[Any], P],
    serve: Callable[[Agent], Handler[P]],
    kind: Kind = Kind.REQUEST,
    *,
    version: int | None = None,
) -> Route[Agent, P]:
    return Route(method, checked, serve, kind, version)


#: Version of each extension method (bumped on incompatible change).
EXTENSION_VERSION = 1


def extension(
    name: str, serve: Callable[[Agent], Handler[dict[str, Any]]], kind: Kind = Kind.REQUEST
) -> Route[Agent, dict[str, Any]]:
    """An ``_agybridge/*`` method whose params are an object: each field is
    checked by the method that reads it (extensions.py)."""
    return route(f"_agybridge/{name}", params.object_params, serve, kind, version=EXTENSION_VERSION)


#: Standard methods the bridge cannot serve: the catalogue's cause that says why
#: (their -32601 carries its message).
NOT_OFFERED = {"logout": "logout_unsupported"}

ROUTES: dict[str, Route[Agent, Any]] = {
    r.method: r
    for r in (
        route("initialize", params.initialize_request, lambda a: a.initialize),
        route("authenticate", params.authenticate, lambda a: a.authenticate),
        route("session/new", params.new_session, lambda a: a.sessions.new_session),
        route("session/prompt", params.prompt, lambda a: a.sessions.prompt, Kind.PROMPT),
        route(
            "session/close", params.session_id, lambda a: a.sessions.close_session, Kind.LIFECYCLE
        ),
        route(
            "session/set_config_option",
            params.set_config_option,
            lambda a: a.sessions.set_config_option,
        ),
        route("session/set_mode", params.set_mode, lambda a: a.sessions.set_mode),
        route("session/list", params.list_sessions, lambda a: a.sessions.list_sessions),
        route(
            "session/load", params.open_session, lambda a: a.sessions.load_session, Kind.LIFECYCLE
        ),
        route(
            "session/resume",
            params.open_session,
            lambda a: a.sessions.resume_session,
            Kind.LIFECYCLE,
        ),
        route(
            "session/delete", params.session_id, lambda a: a.sessions.delete_session, Kind.LIFECYCLE
        ),
        # The extensions (docs/extensions.md), in the order initialize lists them.
        extension("session/runtime", lambda a: a.sessions.extensions.runtime),
        extension("session/history", lambda a: a.sessions.extensions.history),
        extension("session/mutations", lambda a: a.sessions.extensions.mutations),
        extension("session/diff", lambda a: a.sessions.extensions.diff),
        extension("session/rollback", lambda a: a.sessions.extensions.rollback, Kind.ROLLBACK),
        extension("session/set_workspace", lambda a: a.sessions.extensions.set_workspace),
        extension("session/logs", lambda a: a.sessions.extensions.logs),
        extension("mcp/list", lambda a: a.sessions.extensions.mcp_list),
        extension("mcp/test", lambda a: a.sessions.extensions.mcp_test),
        extension("skills/list", lambda a: a.sessions.extensions.skills_list),
        extension("settings/options", lambda a: a.settings_options),
        extension("settings/reload", lambda a: a.sessions.extensions.settings_reload),
        # The last failed prompt again, a turn in the queue like session/prompt.
        route(
            "_agybridge/session/retry",
            params.session_id,
            lambda a: a.sessions.retry,
            Kind.PROMPT,
            version=EXTENSION_VERSION,
        ),
        # The agent's own: a text prompt that goes ahead of those waiting.
        route(
            "_agybridge/session/steer",
            params.steer,
            lambda a: a.sessions.prompt,
            Kind.STEER,
            version=EXTENSION_VERSION,
        ),
    )
}
