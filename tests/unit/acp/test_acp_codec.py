"""The ACP wire codec (camelCase, tagged unions, strict JSON types) and prompt conversion."""

from __future__ import annotations

import json
import types
import typing
from typing import Any

import attrs
import cattrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge.acp import codec, models
from agybridge.acp.content import describe_resource_link

# --- names ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "wire"),
    [
        ("session_id", "sessionId"),
        ("tool_call_id", "toolCallId"),
        ("raw_input", "rawInput"),
        ("embedded_context", "embeddedContext"),
        ("meta", "_meta"),
        ("text", "text"),
    ],
)
def test_to_camel(name: str, wire: str) -> None:
    """snake_case fields become camelCase on the wire; ``meta`` becomes ``_meta``."""
    assert codec.to_camel(name) == wire


def notification(update: models.SessionUpdate) -> dict[str, Any]:
    return codec.unstructure(models.SessionNotification(session_id="s", update=update))["update"]


# (description, value, wire form)
UNSTRUCTURE_CASES: list[tuple[str, Any, Any]] = [
    (
        "text chunk: tags present, None fields omitted",
        notification(models.AgentMessageChunk(content=models.TextContent(text=""))),
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": ""}},
    ),
    (
        "camelCase and _meta on a chunk",
        notification(
            models.AgentMessageChunk(
                content=models.ImageContent(data="AA==", mime_type="image/png"),
                message_id="m1",
                meta={"k": 1},
            )
        ),
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "image", "data": "AA==", "mimeType": "image/png"},
            "messageId": "m1",
            "_meta": {"k": 1},
        },
    ),
    (
        "tool call: non-None defaults (kind, status) always written",
        notification(models.ToolCall(tool_call_id="t", title="x")),
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t",
            "title": "x",
            "kind": "other",
            "status": "pending",
        },
    ),
    (
        "tool call update with every content kind",
        notification(
            models.ToolCallUpdate(
                tool_call_id="t",
                content=[
                    models.ContentToolCallContent(models.TextContent(text="out")),
                    models.DiffContent(path="/a", new_text="new"),
                    models.DiffContent(path="/a", new_text="new", old_text="old"),
                    models.TerminalContent(terminal_id="term"),
                ],
                locations=[models.ToolCallLocation(path="/a", line=3)],
                raw_input={"CommandLine": "ls"},
                raw_output={"output": "x"},
                meta={"terminal_info": {"terminal_id": "term"}},
            )
        ),
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "t",
            "content": [
                {"type": "content", "content": {"type": "text", "text": "out"}},
                {"type": "diff", "path": "/a", "newText": "new"},
                {"type": "diff", "path": "/a", "newText": "new", "oldText": "old"},
                {"type": "terminal", "terminalId": "term"},
            ],
            "locations": [{"path": "/a", "line": 3}],
            "rawInput": {"CommandLine": "ls"},
            "rawOutput": {"output": "x"},
            "_meta": {"terminal_info": {"terminal_id": "term"}},
        },
    ),
    (
        "plan entries keep priority and status",
        notification(models.Plan(entries=[models.PlanEntry(content="a")])),
        {
            "sessionUpdate": "plan",
            "entries": [{"content": "a", "priority": "medium", "status": "pending"}],
        },
    ),
    (
        "usage update",
        notification(models.UsageUpdate(used=5, size=10)),
        {"sessionUpdate": "usage_update", "used": 5, "size": 10},
    ),
    (
        "prompt response",
        codec.unstructure(models.PromptResponse(stop_reason="end_turn", meta={"usage": {}})),
        {"stopReason": "end_turn", "_meta": {"usage": {}}},
    ),
    (
        "initialize response: nested capabilities and an empty list are written",
        codec.unstructure(
            models.InitializeResponse(
                protocol_version=1,
                agent_capabilities=models.AgentCapabilities(),
                agent_info=models.Implementation(name="agybridge", version="0"),
            )
        ),
        {
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": False,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {},
            },
            "agentInfo": {"name": "agybridge", "version": "0"},
            "authMethods": [],
        },
    ),
]


@pytest.mark.parametrize(
    ("value", "wire"), [c[1:] for c in UNSTRUCTURE_CASES], ids=[c[0] for c in UNSTRUCTURE_CASES]
)
def test_unstructure(value: Any, wire: Any) -> None:
    """Values are written in the exact wire shape."""
    assert value == wire


# --- structuring ----------------------------------------------------------------------


def test_prompt_blocks_by_type() -> None:
    """Content blocks are told apart by ``type``; unknown or missing types are kept raw."""
    request = codec.structure(
        {
            "sessionId": "s",
            "prompt": [
                {"type": "text", "text": "hi", "futureField": 1},
                {"type": "resource_link", "uri": "file:///a", "name": "a", "mimeType": "text/x"},
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///b", "text": "b"}},
                {"type": "video", "url": "x"},
                {"noType": True},
            ],
            "unknownTopLevel": {},
        },
        models.PromptRequest,
    )
    assert request == models.PromptRequest(
        session_id="s",
        prompt=[
            models.TextContent(text="hi"),
            models.ResourceLink(uri="file:///a", name="a", mime_type="text/x"),
            models.ImageContent(data="AA==", mime_type="image/png"),
            models.EmbeddedResource(resource={"uri": "file:///b", "text": "b"}),
            models.UnknownContent(raw={"type": "video", "url": "x"}),
            models.UnknownContent(raw={"noType": True}),
        ],
    )


def test_session_updates_by_discriminator() -> None:
    """``sessionUpdate`` and tool-call content ``type`` select the classes."""
    wire = {
        "sessionId": "s",
        "update": {
            "sessionUpdate": "tool_call",
            "toolCallId": "t",
            "title": "x",
            "content": [
                {"type": "diff", "path": "/a", "newText": "b"},
                {"type": "terminal", "terminalId": "t"},
                {"type": "content", "content": {"type": "text", "text": "hi"}},
            ],
        },
    }
    assert codec.structure(wire, models.SessionNotification) == models.SessionNotification(
        session_id="s",
        update=models.ToolCall(
            tool_call_id="t",
            title="x",
            content=[
                models.DiffContent(path="/a", new_text="b"),
                models.TerminalContent(terminal_id="t"),
                models.ContentToolCallContent(models.TextContent(text="hi")),
            ],
        ),
    )


@pytest.mark.parametrize(
    "update",
    [
        {"sessionUpdate": "no_such_update"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "t", "content": [{"type": "bogus"}]},
    ],
)
def test_unknown_update_discriminators_are_errors(update: dict[str, Any]) -> None:
    """Only content blocks have a raw fallback; other unknown tags fail to structure."""
    with pytest.raises(cattrs.BaseValidationError):
        codec.structure({"sessionId": "s", "update": update}, models.SessionNotification)


# (class, wire data with one wrong JSON type, expected error path)
STRICT_CASES: list[tuple[type, dict[str, Any], str]] = [
    (models.PromptRequest, {"sessionId": 3, "prompt": []}, "$.sessionId"),
    (
        models.PromptRequest,
        {"sessionId": "s", "prompt": [{"type": "text", "text": 5}]},
        "$.prompt[0].text",
    ),
    (
        models.PromptRequest,
        {
            "sessionId": "s",
            "prompt": [{"type": "resource_link", "uri": "u", "name": "n", "mimeType": 3}],
        },
        "$.prompt[0].mimeType",
    ),
    (
        models.PromptRequest,
        {
            "sessionId": "s",
            "prompt": [{"type": "resource_link", "uri": "u", "name": "n", "size": True}],
        },
        "$.prompt[0].size",
    ),
    (
        models.PromptRequest,
        {
            "sessionId": "s",
            "prompt": [{"type": "resource_link", "uri": "u", "name": "n", "size": "3"}],
        },
        "$.prompt[0].size",
    ),
    (models.PromptRequest, {"sessionId": "s", "prompt": [], "_meta": 3}, "$._meta"),
    (models.InitializeRequest, {"protocolVersion": "1"}, "$.protocolVersion"),
    (models.InitializeRequest, {"protocolVersion": True}, "$.protocolVersion"),
    (models.InitializeRequest, {"protocolVersion": 1.0}, "$.protocolVersion"),
    (
        models.InitializeRequest,
        {"protocolVersion": 1, "clientCapabilities": {"terminal": 1}},
        "$.clientCapabilities.terminal",
    ),
    (
        models.InitializeRequest,
        {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": "yes"}}},
        "$.clientCapabilities.fs.readTextFile",
    ),
    (
        models.NewSessionRequest,
        {"cwd": "/w", "mcpServers": [], "additionalDirectories": ["/a", 2]},
        "$.additionalDirectories[1]",
    ),
    (models.NewSessionRequest, {"cwd": "/w"}, "$.mcpServers"),
]


@pytest.mark.parametrize(("cls", "data", "path"), STRICT_CASES)
def test_strict_json_types(cls: type, data: dict[str, Any], path: str) -> None:
    """No implicit conversions: a wrong JSON type is an error at its camelCase path."""
    with pytest.raises(cattrs.BaseValidationError) as caught:
        codec.structure(data, cls)
    problems = codec.describe_error(caught.value)
    assert [p.rpartition(" @ ")[2] for p in problems] == [path]


def test_structure_needs_an_object() -> None:
    """Params that are not a JSON object are refused before structuring."""
    with pytest.raises(TypeError, match="expected a JSON object, got list"):
        codec.structure([], models.PromptRequest)


@pytest.mark.parametrize(
    ("cls", "data", "path"),
    [
        (models.PromptRequest, {"sessionId": "s", "prompt": "hi"}, "$.prompt"),
        (models.PromptRequest, {"sessionId": "s", "prompt": {}}, "$.prompt"),
        (models.NewSessionRequest, {"cwd": "/w", "mcpServers": {}}, "$.mcpServers"),
        (
            models.NewSessionRequest,
            {"cwd": "/w", "mcpServers": [], "additionalDirectories": "/abc"},
            "$.additionalDirectories",
        ),
    ],
)
def test_arrays_must_be_arrays(cls: type, data: dict[str, Any], path: str) -> None:
    """A string or object where the schema wants an array is an error at its path."""
    with pytest.raises(cattrs.BaseValidationError) as caught:
        codec.structure(data, cls)
    assert any(p.endswith(f"@ {path}") for p in codec.describe_error(caught.value))


def test_non_object_prompt_block_is_invalid() -> None:
    """A prompt block that is not a JSON object is a structuring error at its index."""
    with pytest.raises(cattrs.BaseValidationError) as caught:
        codec.structure({"sessionId": "s", "prompt": ["hello"]}, models.PromptRequest)
    assert any(p.endswith("@ $.prompt[0]") for p in codec.describe_error(caught.value))


def test_unknown_content_is_written_back_unchanged() -> None:
    """An unknown block is written exactly as it was read."""
    raw = {"type": "video", "url": "x"}
    chunk = models.UserMessageChunk(content=models.UnknownContent(raw=raw))
    assert notification(chunk)["content"] == raw


# --- round trips ----------------------------------------------------------------------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
_objects = st.none() | st.dictionaries(st.text(max_size=8), _json, max_size=3)
_texts = st.text(max_size=30)
_optional_texts = st.none() | _texts

text_blocks = st.builds(models.TextContent, text=_texts, annotations=_objects, meta=_objects)
link_blocks = st.builds(
    models.ResourceLink,
    uri=_texts,
    name=_texts,
    mime_type=_optional_texts,
    title=_optional_texts,
    description=_optional_texts,
    size=st.none() | st.integers(0, 2**40),
    annotations=_objects,
    meta=_objects,
)
image_blocks = st.builds(models.ImageContent, data=_texts, mime_type=_texts, uri=_optional_texts)
audio_blocks = st.builds(models.AudioContent, data=_texts, mime_type=_texts)
resource_blocks = st.builds(
    models.EmbeddedResource,
    resource=st.fixed_dictionaries({"uri": _texts, "text": _texts}),
)
blocks = text_blocks | link_blocks | image_blocks | audio_blocks | resource_blocks
prompt_requests = st.builds(
    models.PromptRequest, session_id=_texts, prompt=st.lists(blocks, max_size=5), meta=_objects
)


@pytest.mark.parametrize(
    ("strategy", "cls"),
    [
        (text_blocks, models.TextContent),
        (link_blocks, models.ResourceLink),
        (prompt_requests, models.PromptRequest),
    ],
    ids=["TextContent", "ResourceLink", "PromptRequest"],
)
@given(data=st.data())
def test_round_trip(data: st.DataObject, strategy: st.SearchStrategy[Any], cls: type) -> None:
    """We write a value as JSON, read it back, and get the same value."""
    value = data.draw(strategy)
    wire = json.loads(json.dumps(codec.unstructure(value)))
    assert codec.structure(wire, cls) == value


# --- the reflective path ---------------------------------------------------------------


#: JSON values as code builds them: arrays may be tuples.
_any_json = st.recursive(
    _json,
    lambda children: (
        st.lists(children, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


def _values(tp: Any) -> st.SearchStrategy[Any]:
    """Values of the field type ``tp`` (the types the initialize models use)."""
    args = typing.get_args(tp)
    if attrs.has(tp):
        return _instances(tp)
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        return st.one_of([_values(arg) for arg in args])
    if typing.get_origin(tp) is dict:
        return st.dictionaries(st.text(max_size=5), _any_json, max_size=3)
    if typing.get_origin(tp) is list:
        return st.lists(_values(args[0]), max_size=3)
    simple = {
        type(None): st.none(),
        bool: st.booleans(),
        int: st.integers(-(2**53), 2**53),
        str: _texts,
    }
    return simple[tp]


def _instances(cls: type) -> st.SearchStrategy[Any]:
    attrs.resolve_types(cls)
    return st.builds(cls, **{field.name: _values(field.type) for field in attrs.fields(cls)})


#: The models `initialize` and `authenticate` use (acp/models.py itself, not the lazy ones).
INITIALIZE_MODELS = sorted(
    (cls for cls in vars(models).values() if attrs.has(cls) and cls.__module__ == models.__name__),
    key=lambda cls: cls.__name__,
)


def test_the_initialize_models_are_found() -> None:
    assert {models.InitializeRequest, models.InitializeResponse} <= set(INITIALIZE_MODELS)


@pytest.mark.parametrize("cls", INITIALIZE_MODELS, ids=lambda cls: cls.__name__)
@given(data=st.data())
def test_plain_unstructure_is_the_converters(data: st.DataObject, cls: type) -> None:
    """The reflective path (initialize's answer) writes what the converter writes."""
    value = data.draw(_instances(cls))
    assert codec.unstructure_plain(value) == codec.unstructure(value)


# --- resource links --------------------------------------------------------------------

LINK = models.ResourceLink(
    uri="file:///home/u/p/a.py",
    name="a.py",
    mime_type="text/x-python",
    title="App",
    description="entry point",
    size=120,
)


def test_describe_resource_link() -> None:
    """A resource link becomes a short block naming everything known about it."""
    assert describe_resource_link(LINK) == (
        "[Resource: a.py]\nURI: file:///home/u/p/a.py\nTitle: App\nMIME type: text/x-python\n"
        "Description: entry point\nSize: 120 bytes"
    )
    bare = models.ResourceLink(uri="https://x.test/doc", name="doc", size=0)
    assert describe_resource_link(bare) == "[Resource: doc]\nURI: https://x.test/doc\nSize: 0 bytes"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(
    stop=st.sampled_from(["end_turn", "cancelled", "max_tokens", "refusal"]),
    meta=st.none() | st.dictionaries(st.text(max_size=8), _JSON, max_size=4),
)
def test_the_prompt_answers_shortcut_equals_the_converter(stop: str, meta: Any) -> None:
    response = models.PromptResponse(stop_reason=stop, meta=meta)
    assert codec.unstructure_prompt_response(response) == codec.unstructure(response)


@pytest.mark.parametrize("block", ["hello", None, 5, [1]])
def test_non_object_prompt_block_is_described_in_json_terms(block: Any) -> None:
    """The problem names what the client sent wrong, not the bridge's Python
    classes ("expected agybridge.acp.session_models.TextContent | ...")."""
    with pytest.raises(cattrs.BaseValidationError) as caught:
        codec.structure({"sessionId": "s", "prompt": [block]}, models.PromptRequest)
    [problem] = codec.describe_error(caught.value)
    assert problem.startswith("expected a content block object, got ")
    assert problem.endswith("@ $.prompt[0]")
    assert "agybridge" not in problem


@pytest.mark.parametrize(
    ("cls", "data", "problem"),
    [
        (
            models.InitializeRequest,
            {"protocolVersion": "1"},
            "expected an integer, got a string @ $.protocolVersion",
        ),
        (
            models.InitializeRequest,
            {"protocolVersion": 1, "clientCapabilities": None},
            "expected an object, got null @ $.clientCapabilities",
        ),
        (
            models.InitializeRequest,
            {"protocolVersion": 1, "clientCapabilities": {"auth": []}},
            "expected an object, got an array @ $.clientCapabilities.auth",
        ),
        (
            models.InitializeRequest,
            {"protocolVersion": 1, "clientInfo": "zed"},
            "expected an object, got a string @ $.clientInfo",
        ),
        (models.ListSessionsRequest, {"cursor": 5}, "expected a string, got a number @ $.cursor"),
        (
            models.NewSessionRequest,
            {"cwd": "/w", "mcpServers": [5]},
            "expected an object, got a number @ $.mcpServers[0]",
        ),
        (
            models.NewSessionRequest,
            {"cwd": "/w", "mcpServers": None},
            "expected an array, got null @ $.mcpServers",
        ),
    ],
)
def test_wrong_json_types_are_described_in_json_terms(
    cls: type, data: dict[str, Any], problem: str
) -> None:
    """A client reads "expected an object, got null", not the bridge's Python types
    ("expected dict[str, typing.Any] | None", "expected ClientCapabilities")."""
    with pytest.raises(cattrs.BaseValidationError) as caught:
        codec.structure(data, cls)
    assert codec.describe_error(caught.value) == [problem]
