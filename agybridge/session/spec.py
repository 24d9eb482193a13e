"""What a session is on its own (:class:`SessionSpec`): new, or restored from the store.

Apart from `agybridge.session.deps`, which the bridge builds before ``initialize``
is answered: a spec is made by the first ``session/new`` or ``session/load``
(issue 15, lazy start-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from .config import LaunchSettings


@attrs.frozen
class SessionSpec:
    """One session's own parameters (new, or restored from the store)."""

    session_id: str
    cwd: str
    additional_dirs: tuple[str, ...] = ()
    settings: LaunchSettings = attrs.Factory(LaunchSettings)
    #: Zed's display-only terminal extension (client ``_meta.terminal_output``).
    terminals: bool = False
    #: The client shows ACP ``notice`` updates (``clientCapabilities.session.notices``):
    #: the turn's warnings go there instead of into the chat.
    notices: bool = False
    conversation_id: str | None = None
    title: str | None = None
    next_turn: int = 0
    created_at: str | None = None
    mcp_config: Mapping[str, Any] = attrs.field(factory=dict)
    #: Its previous instance ended silent after a cancelled answer, and the
    #: client has not spoken since: this one starts silent too.
    muted: bool = False
    #: What the supervisor does with its running turn when its client goes
    #: away (``keep`` or ``cancel``; None: the supervisor's default).
    on_disconnect: str | None = None
    #: The last plan shown (``plan`` entries as JSON), re-sent on load.
    plan: tuple[Mapping[str, Any], ...] = ()
