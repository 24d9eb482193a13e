"""ACP v1 wire types the bridge reads or writes, as attrs classes.

Field names are snake_case here and camelCase on the wire (``acp/codec.py``
does the renaming); ``meta`` is ``_meta``. Only fields whose default is None
are omitted when unset, so discriminators are always written. Names follow
the official schema's ``$defs`` (``../shared/acp/schema/v1/schema.json``).

This module defines what ``initialize`` and ``authenticate`` need; every other
type lives in ``session_models.py`` and is loaded, through this module, when it
is first used (agybridge/lazy.py): a bridge answers ``initialize`` without
building them (lazy start-up). Callers use ``models.X`` either way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ..lazy import exports
from .meta import Meta as Meta

# --- initialize ------------------------------------------------------------


@attrs.frozen
class FileSystemCapabilities:
    read_text_file: bool = False
    write_text_file: bool = False


@attrs.frozen
class ClientCapabilities:
    fs: FileSystemCapabilities = attrs.Factory(FileSystemCapabilities)
    terminal: bool = False
    #: ``AuthCapabilities``: ``{"terminal": true}`` allows terminal auth methods.
    auth: dict[str, Any] | None = None
    #: ``ElicitationCapabilities``: ``{"form": {}}`` allows ``elicitation/create`` forms.
    elicitation: dict[str, Any] | None = None
    #: ``ClientSessionCapabilities``: ``{"notices": {}}`` shows ``notice`` updates.
    session: dict[str, Any] | None = None
    meta: Meta | None = None

    @property
    def elicits_forms(self) -> bool:
        """The client takes form ``elicitation/create`` (``form`` present and an
        object: null or absent advertises nothing)."""
        return isinstance(self.elicitation, dict) and isinstance(self.elicitation.get("form"), dict)

    @property
    def shows_notices(self) -> bool:
        """The client presents ``notice`` updates (``session.notices`` an object)."""
        return isinstance(self.session, dict) and isinstance(self.session.get("notices"), dict)


@attrs.frozen
class Implementation:
    name: str
    version: str
    title: str | None = None


@attrs.frozen
class InitializeRequest:
    protocol_version: int
    client_capabilities: ClientCapabilities = attrs.Factory(ClientCapabilities)
    client_info: Implementation | None = None
    meta: Meta | None = None


@attrs.frozen
class PromptCapabilities:
    image: bool = False
    audio: bool = False
    embedded_context: bool = False


@attrs.frozen
class McpCapabilities:
    http: bool = False
    sse: bool = False


@attrs.frozen
class SessionCapabilities:
    """Each capability is an object: ``{}`` = supported, absent = not."""

    close: dict[str, Any] | None = None
    list: dict[str, Any] | None = None
    resume: dict[str, Any] | None = None
    delete: dict[str, Any] | None = None
    additional_directories: dict[str, Any] | None = None


@attrs.frozen
class AgentCapabilities:
    load_session: bool = False
    prompt_capabilities: PromptCapabilities = attrs.Factory(PromptCapabilities)
    mcp_capabilities: McpCapabilities = attrs.Factory(McpCapabilities)
    session_capabilities: SessionCapabilities = attrs.Factory(SessionCapabilities)
    meta: Meta | None = None


@attrs.frozen
class InitializeResponse:
    protocol_version: int
    agent_capabilities: AgentCapabilities
    agent_info: Implementation
    auth_methods: list[dict[str, Any]] = attrs.Factory(list)
    meta: Meta | None = None


@attrs.frozen
class AuthenticateRequest:
    method_id: str
    meta: Meta | None = None


STOP_END_TURN = "end_turn"
STOP_CANCELLED = "cancelled"
STOP_REFUSAL = "refusal"

if TYPE_CHECKING:
    from .session_models import AgentMessageChunk as AgentMessageChunk
    from .session_models import AgentThoughtChunk as AgentThoughtChunk
    from .session_models import AudioContent as AudioContent
    from .session_models import AvailableCommand as AvailableCommand
    from .session_models import AvailableCommandsUpdate as AvailableCommandsUpdate
    from .session_models import CommandInput as CommandInput
    from .session_models import ConfigOptionUpdate as ConfigOptionUpdate
    from .session_models import ContentBlock as ContentBlock
    from .session_models import ContentToolCallContent as ContentToolCallContent
    from .session_models import Cost as Cost
    from .session_models import CurrentModeUpdate as CurrentModeUpdate
    from .session_models import DiffContent as DiffContent
    from .session_models import EmbeddedResource as EmbeddedResource
    from .session_models import ExtensionEvent as ExtensionEvent
    from .session_models import ImageContent as ImageContent
    from .session_models import ListSessionsRequest as ListSessionsRequest
    from .session_models import ListSessionsResponse as ListSessionsResponse
    from .session_models import NewSessionRequest as NewSessionRequest
    from .session_models import NewSessionResponse as NewSessionResponse
    from .session_models import Notice as Notice
    from .session_models import OpenSessionRequest as OpenSessionRequest
    from .session_models import Plan as Plan
    from .session_models import PlanEntry as PlanEntry
    from .session_models import PromptRequest as PromptRequest
    from .session_models import PromptResponse as PromptResponse
    from .session_models import ResourceLink as ResourceLink
    from .session_models import SessionConfigOption as SessionConfigOption
    from .session_models import SessionConfigSelectOption as SessionConfigSelectOption
    from .session_models import SessionIdParams as SessionIdParams
    from .session_models import SessionInfo as SessionInfo
    from .session_models import SessionInfoUpdate as SessionInfoUpdate
    from .session_models import SessionMode as SessionMode
    from .session_models import SessionModeState as SessionModeState
    from .session_models import SessionNotification as SessionNotification
    from .session_models import SessionStateResponse as SessionStateResponse
    from .session_models import SessionUpdate as SessionUpdate
    from .session_models import SetConfigOptionRequest as SetConfigOptionRequest
    from .session_models import SetConfigOptionResponse as SetConfigOptionResponse
    from .session_models import SetModeRequest as SetModeRequest
    from .session_models import TerminalContent as TerminalContent
    from .session_models import TextContent as TextContent
    from .session_models import ToolCall as ToolCall
    from .session_models import ToolCallContent as ToolCallContent
    from .session_models import ToolCallLocation as ToolCallLocation
    from .session_models import ToolCallUpdate as ToolCallUpdate
    from .session_models import UnknownContent as UnknownContent
    from .session_models import UsageUpdate as UsageUpdate
    from .session_models import UserMessageChunk as UserMessageChunk

__getattr__ = exports(
    __name__,
    {
        ".session_models": (
            "TextContent",
            "ImageContent",
            "AudioContent",
            "ResourceLink",
            "EmbeddedResource",
            "UnknownContent",
            "ContentBlock",
            "NewSessionRequest",
            "SessionIdParams",
            "SessionConfigSelectOption",
            "SessionConfigOption",
            "SessionMode",
            "SessionModeState",
            "NewSessionResponse",
            "SessionStateResponse",
            "OpenSessionRequest",
            "ListSessionsRequest",
            "SessionInfo",
            "ListSessionsResponse",
            "SetConfigOptionRequest",
            "SetConfigOptionResponse",
            "SetModeRequest",
            "PromptRequest",
            "PromptResponse",
            "AgentMessageChunk",
            "UserMessageChunk",
            "AgentThoughtChunk",
            "ToolCallLocation",
            "ContentToolCallContent",
            "DiffContent",
            "TerminalContent",
            "ToolCallContent",
            "ToolCall",
            "ToolCallUpdate",
            "PlanEntry",
            "Plan",
            "Cost",
            "UsageUpdate",
            "SessionInfoUpdate",
            "ConfigOptionUpdate",
            "CurrentModeUpdate",
            "CommandInput",
            "AvailableCommand",
            "AvailableCommandsUpdate",
            "Notice",
            "ExtensionEvent",
            "SessionUpdate",
            "SessionNotification",
        ),
    },
)
