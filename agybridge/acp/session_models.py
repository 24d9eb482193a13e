"""ACP v1 wire types of the session methods and ``session/update``: content
blocks, tool calls, plans, the session requests and responses.

Part of `agybridge.acp.models` (which re-exports every name here): a bridge
answers ``initialize`` without building these classes (lazy start-up);
`models` loads this module when one of them is first used.
"""

from __future__ import annotations

from typing import Any, ClassVar, final

import attrs

from .meta import Meta


@attrs.frozen
class SessionIdParams:
    """``session/cancel`` and ``session/close`` carry just the session id."""

    session_id: str
    meta: Meta | None = None


# --- content ---------------------------------------------------------------


@final  # the wire encoder's text fast path keys on the exact class
@attrs.frozen
class TextContent:
    TAG: ClassVar[str] = "text"
    text: str
    annotations: dict[str, Any] | None = None
    meta: Meta | None = None


@attrs.frozen
class ImageContent:
    TAG: ClassVar[str] = "image"
    data: str
    mime_type: str
    uri: str | None = None
    annotations: dict[str, Any] | None = None
    meta: Meta | None = None


@attrs.frozen
class AudioContent:
    TAG: ClassVar[str] = "audio"
    data: str
    mime_type: str
    annotations: dict[str, Any] | None = None
    meta: Meta | None = None


@attrs.frozen
class ResourceLink:
    TAG: ClassVar[str] = "resource_link"
    uri: str
    name: str
    mime_type: str | None = None
    title: str | None = None
    description: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    meta: Meta | None = None


@attrs.frozen
class EmbeddedResource:
    TAG: ClassVar[str] = "resource"
    #: ``{uri, text, mimeType?}`` or ``{uri, blob, mimeType?}``, kept raw.
    resource: dict[str, Any]
    annotations: dict[str, Any] | None = None
    meta: Meta | None = None


@attrs.frozen
class UnknownContent:
    """A content block type this bridge does not know (kept raw)."""

    raw: dict[str, Any]


ContentBlock = (
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource | UnknownContent
)

# --- sessions --------------------------------------------------------------


@attrs.frozen
class NewSessionRequest:
    cwd: str
    #: Accepted and validated as objects; agy runs no MCP servers headless
    #: (contract.md §8.9), so they are not yet passed on.
    mcp_servers: list[dict[str, Any]]
    additional_directories: list[str] | None = None
    meta: Meta | None = None


@attrs.frozen
class SessionConfigSelectOption:
    value: str
    name: str
    description: str | None = None


@attrs.frozen
class SessionConfigOption:
    """A ``select`` option (the only kind offered: boolean options need a
    client capability)."""

    id: str
    name: str
    current_value: str
    options: list[SessionConfigSelectOption]
    description: str | None = None
    category: str | None = None
    type: str = "select"


@attrs.frozen
class SessionMode:
    id: str
    name: str
    description: str | None = None


@attrs.frozen
class SessionModeState:
    current_mode_id: str
    available_modes: list[SessionMode]


@attrs.frozen
class NewSessionResponse:
    session_id: str
    modes: SessionModeState | None = None
    config_options: list[SessionConfigOption] | None = None
    meta: Meta | None = None


@attrs.frozen
class SessionStateResponse:
    """``session/load`` and ``session/resume`` answers."""

    modes: SessionModeState | None = None
    config_options: list[SessionConfigOption] | None = None
    meta: Meta | None = None


@attrs.frozen
class OpenSessionRequest:
    """``session/load`` and ``session/resume`` (mcpServers optional on resume)."""

    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]] | None = None
    additional_directories: list[str] | None = None
    meta: Meta | None = None


@attrs.frozen
class ListSessionsRequest:
    cwd: str | None = None
    cursor: str | None = None
    #: Not in the v1 schema: an exact-match filter this agent also accepts.
    additional_directories: list[str] | None = None
    meta: Meta | None = None


@attrs.frozen
class SessionInfo:
    session_id: str
    cwd: str
    additional_directories: list[str] | None = None
    title: str | None = None
    updated_at: str | None = None
    meta: Meta | None = None


@attrs.frozen
class ListSessionsResponse:
    sessions: list[SessionInfo]
    next_cursor: str | None = None


@attrs.frozen
class SetConfigOptionRequest:
    session_id: str
    config_id: str
    value: str
    meta: Meta | None = None


@attrs.frozen
class SetConfigOptionResponse:
    config_options: list[SessionConfigOption]
    meta: Meta | None = None


@attrs.frozen
class SetModeRequest:
    session_id: str
    mode_id: str
    meta: Meta | None = None


@attrs.frozen
class PromptRequest:
    session_id: str
    prompt: list[ContentBlock]
    meta: Meta | None = None


@attrs.frozen
class PromptResponse:
    stop_reason: str
    meta: Meta | None = None


# --- session/update --------------------------------------------------------


@final  # the wire encoder's text fast path keys on the exact class
@attrs.frozen
class AgentMessageChunk:
    TAG: ClassVar[str] = "agent_message_chunk"
    content: ContentBlock
    message_id: str | None = None
    meta: Meta | None = None


@final  # the wire encoder's text fast path keys on the exact class
@attrs.frozen
class UserMessageChunk:
    TAG: ClassVar[str] = "user_message_chunk"
    content: ContentBlock
    message_id: str | None = None
    meta: Meta | None = None


@final  # the wire encoder's text fast path keys on the exact class
@attrs.frozen
class AgentThoughtChunk:
    TAG: ClassVar[str] = "agent_thought_chunk"
    content: ContentBlock
    message_id: str | None = None
    meta: Meta | None = None


@attrs.frozen
class ToolCallLocation:
    path: str
    line: int | None = None
    meta: Meta | None = None


@attrs.frozen
class ContentToolCallContent:
    TAG: ClassVar[str] = "content"
    content: ContentBlock


@attrs.frozen
class DiffContent:
    """A file change; ``old_text`` None means a new file."""

    TAG: ClassVar[str] = "diff"
    path: str
    new_text: str
    old_text: str | None = None
    meta: Meta | None = None


@attrs.frozen
class TerminalContent:
    TAG: ClassVar[str] = "terminal"
    terminal_id: str
    meta: Meta | None = None


ToolCallContent = ContentToolCallContent | DiffContent | TerminalContent


@attrs.frozen
class ToolCall:
    TAG: ClassVar[str] = "tool_call"
    tool_call_id: str
    title: str
    kind: str = "other"
    status: str = "pending"
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None
    raw_output: Any = None
    meta: Meta | None = None


@attrs.frozen
class ToolCallUpdate:
    """Only the fields that changed; a present field replaces the old value."""

    TAG: ClassVar[str] = "tool_call_update"
    tool_call_id: str
    title: str | None = None
    kind: str | None = None
    status: str | None = None
    content: list[ToolCallContent] | None = None
    locations: list[ToolCallLocation] | None = None
    raw_input: Any = None
    raw_output: Any = None
    meta: Meta | None = None


@attrs.frozen
class PlanEntry:
    content: str
    priority: str = "medium"
    status: str = "pending"
    meta: Meta | None = None


@attrs.frozen
class Plan:
    """Always the complete plan: the client replaces what it had."""

    TAG: ClassVar[str] = "plan"
    entries: list[PlanEntry]
    meta: Meta | None = None


@attrs.frozen
class Cost:
    amount: float
    currency: str


@attrs.frozen
class UsageUpdate:
    TAG: ClassVar[str] = "usage_update"
    used: int
    size: int
    cost: Cost | None = None
    meta: Meta | None = None


@attrs.frozen
class SessionInfoUpdate:
    TAG: ClassVar[str] = "session_info_update"
    title: str | None = None
    updated_at: str | None = None
    meta: Meta | None = None


@attrs.frozen
class ConfigOptionUpdate:
    TAG: ClassVar[str] = "config_option_update"
    config_options: list[SessionConfigOption]
    meta: Meta | None = None


@attrs.frozen
class CurrentModeUpdate:
    TAG: ClassVar[str] = "current_mode_update"
    current_mode_id: str
    meta: Meta | None = None


@attrs.frozen
class CommandInput:
    hint: str


@attrs.frozen
class AvailableCommand:
    name: str
    description: str
    input: CommandInput | None = None


@attrs.frozen
class AvailableCommandsUpdate:
    TAG: ClassVar[str] = "available_commands_update"
    available_commands: list[AvailableCommand]
    meta: Meta | None = None


@attrs.frozen
class Notice:
    """Advice for the user beside the chat, not part of its history (stable in
    the ACP schema of ``@agentclientprotocol/sdk`` 2.4): sent only to a client
    whose ``clientCapabilities.session.notices`` says it shows them."""

    TAG: ClassVar[str] = "notice"
    severity: str
    title: str
    description: str | None = None
    meta: Meta | None = None


@attrs.frozen
class ExtensionEvent:
    """An ``_agybridge/*`` extension notification riding with a session's
    updates (in order with them): the wire encoder writes it as its own
    notification, with the session's id, to a client that asked for them in
    ``initialize`` and drops it for any other (docs/extensions.md). Not an ACP
    session update: the tag names no ``sessionUpdate`` the schema knows and is
    never written."""

    TAG: ClassVar[str] = "_agybridge_event"
    method: str
    #: A JSON object (typed loosely: the converter never reads one; a
    #: ``dict[str, Any]`` here would take over how the converter describes
    #: every malformed object).
    params: Any


SessionUpdate = (
    AgentMessageChunk
    | UserMessageChunk
    | AgentThoughtChunk
    | ToolCall
    | ToolCallUpdate
    | Plan
    | UsageUpdate
    | SessionInfoUpdate
    | ConfigOptionUpdate
    | CurrentModeUpdate
    | AvailableCommandsUpdate
    | Notice
    | ExtensionEvent
)


@attrs.frozen
class SessionNotification:
    session_id: str
    update: SessionUpdate
    meta: Meta | None = None
