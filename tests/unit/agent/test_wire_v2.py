"""The ACP v2 edge (agent/wire_v2.py) in-process: v1 updates, permission
questions and agy's question forms become messages the pinned v2 draft schema
(tests/data/acp_v2) accepts, and diffs become Git patches."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agybridge.acp import models
from agybridge.agent.updates import encode_updates
from agybridge.agent.wire_v2 import V2Edge, git_patch, wanted
from agybridge.config import Settings
from agybridge.jsonrpc import RequestContext, RpcError
from agybridge.translate.questions import elicitation_params, parse_questions

from ...acp_wire import TESTS_DIR, WireValidator

SCHEMA = json.loads((TESTS_DIR / "data/acp_v2/schema.json").read_text(encoding="utf-8"))
SID = "s1"


@pytest.fixture(scope="module")
def v2() -> WireValidator:
    return WireValidator(SCHEMA)


class Sent:
    """What the edge wrote itself (its ``send_encoded``)."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    async def __call__(self, data: bytes) -> None:
        self.lines += [json.loads(line) for line in data.splitlines()]


def v2_updates(edge: V2Edge, *updates: models.SessionUpdate) -> list[dict[str, Any]]:
    data = edge.updates(SID, encode_updates(SID, updates))
    return [json.loads(line) for line in data.splitlines()]


def test_only_an_opted_in_bridge_and_a_v2_client_speak_v2() -> None:
    assert wanted({"protocolVersion": 2}, True) and wanted({"protocolVersion": 3}, True)
    assert not wanted({"protocolVersion": 2}, False)
    assert not wanted({"protocolVersion": 1}, True) and not wanted({"protocolVersion": True}, True)
    assert Settings.from_env({"AGYBRIDGE_ACP_V2": "1"}).acp_v2
    assert not Settings.from_env({}).acp_v2


def test_updates_take_the_draft_shapes(v2: WireValidator) -> None:
    """Chunks get message ids (a new one after a tool call), tool_call becomes the
    first tool_call_update with a structured diff, plan becomes plan_update,
    command input gets its type, mode updates are dropped."""
    edge = V2Edge(Sent())
    text = models.TextContent(text="hi")
    diff = models.DiffContent(path="/w/a.txt", old_text="a\n", new_text="b\n")
    lines = v2_updates(
        edge,
        models.AgentMessageChunk(content=text),
        models.AgentMessageChunk(content=text),
        models.ToolCall(tool_call_id="t1", title="Edit a.txt", kind="edit", content=[diff]),
        models.AgentMessageChunk(content=text),
        models.Plan(entries=[models.PlanEntry(content="step")]),
        models.CurrentModeUpdate(current_mode_id="ask"),
        models.AvailableCommandsUpdate(
            available_commands=[
                models.AvailableCommand("mode", "Switch", models.CommandInput(hint="name"))
            ]
        ),
    )
    for line in lines:
        assert v2.errors_for("UpdateSessionNotification", line["params"]) == [], line
    updates = [line["params"]["update"] for line in lines]
    assert [u["sessionUpdate"] for u in updates] == [
        "agent_message_chunk",
        "agent_message_chunk",
        "tool_call_update",
        "agent_message_chunk",
        "plan_update",
        "available_commands_update",
    ]
    ids = [u["messageId"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert ids[0] == ids[1] != ids[2]
    [change] = updates[2]["content"][0]["changes"]
    assert change == {"operation": "modify", "path": "/w/a.txt", "fileType": "text"}
    assert updates[4]["plan"]["type"] == "items"
    assert updates[5]["availableCommands"][0]["input"] == {"type": "text", "hint": "name"}


def test_git_patches() -> None:
    assert git_patch("/w/new.txt", None, "one\n") == (
        "diff --git /w/new.txt /w/new.txt\nnew file mode 100644\n"
        "--- /dev/null\n+++ /w/new.txt\n@@ -0,0 +1 @@\n+one\n"
    )
    assert git_patch("/w/a.txt", "a\nb", "a\nc") == (
        "diff --git /w/a.txt /w/a.txt\n--- /w/a.txt\n+++ /w/a.txt\n@@ -1,2 +1,2 @@\n a\n"
        "-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"
    )


async def test_a_permission_question_has_a_title_and_a_subject(v2: WireValidator) -> None:
    """The v1 question's tool call becomes the subject, its title the prompt's;
    the session requires action while it is open."""
    sent = Sent()
    edge = V2Edge(sent)
    asked: list[Any] = []

    async def request(method: str, params: Any) -> Any:
        asked.append(params)
        return {"outcome": {"outcome": "cancelled"}}

    params = {
        "sessionId": SID,
        "toolCall": {"toolCallId": "t1", "title": "Run ls", "kind": "execute"},
        "options": [{"optionId": "allow_once", "name": "Allow", "kind": "allow_once"}],
    }
    answer = await edge.ask("session/request_permission", params, request)
    assert answer == {"outcome": {"outcome": "cancelled"}}
    [v2_params] = asked
    assert v2.errors_for("RequestPermissionRequest", v2_params) == []
    assert v2_params["title"] == "Run ls" and v2_params["subject"]["type"] == "tool_call"
    states = [line["params"]["update"]["state"] for line in sent.lines]
    assert states == ["requires_action", "running"]


def test_agys_question_form_is_a_v2_elicitation(v2: WireValidator) -> None:
    questions = parse_questions({"questions": [{"question": "Colour?", "options": ["r", "b"]}]})
    params = elicitation_params(SID, "t1", questions)
    assert v2.errors_for("CreateElicitationRequest", params) == []


async def test_a_turn_that_fails_after_its_answer_ends_idle_with_the_error(
    v2: WireValidator,
) -> None:
    """The prompt was answered {} (its turn sent an update): a later v1 error
    cannot be its answer any more, so the turn ends idle carrying it in _meta;
    a prompt refused before its turn started gets the error itself."""
    sent = Sent()
    edge = V2Edge(sent)
    prompt = {"sessionId": SID, "prompt": [{"type": "text", "text": "hi"}]}
    ctx = RequestContext(7, "session/prompt", 1)
    assert edge.request_received("session/prompt", prompt, ctx) == ("session/prompt", prompt)

    async def fails_mid_turn(method: str, params: Any) -> Any:
        chunk = models.AgentMessageChunk(content=models.TextContent(text="par"))
        await sent(edge.updates(SID, encode_updates(SID, [chunk])))
        raise RpcError(-32042, "agy crashed", {"details": "agy crashed"})

    assert await edge.serve(ctx, fails_mid_turn) is None
    assert ctx.answered
    assert sent.lines[0] == {"jsonrpc": "2.0", "id": 7, "result": {}}
    kinds = [line["params"]["update"]["sessionUpdate"] for line in sent.lines[1:]]
    assert kinds == ["user_message", "state_update", "agent_message_chunk", "state_update"]
    idle = sent.lines[-1]["params"]
    assert v2.errors_for("UpdateSessionNotification", idle) == []
    assert idle["update"]["stopReason"] == "end_turn"
    assert idle["update"]["_meta"]["agybridge"]["error"]["message"] == "agy crashed"

    refused_ctx = RequestContext(8, "session/prompt", 2)
    edge.request_received("session/prompt", prompt, refused_ctx)

    async def refuses(method: str, params: Any) -> Any:
        raise RpcError(-32002, "unknown session s1")

    with pytest.raises(RpcError, match="unknown session"):
        await edge.serve(refused_ctx, refuses)
    assert not refused_ctx.answered
