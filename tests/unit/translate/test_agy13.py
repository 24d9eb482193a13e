"""agy 1.3.x shapes through the turn mapper: blocked steps, answers inside ERROR results,
the context window from ``init.model``, subagents, notice spacing (contract.md §11).

Real captures are replayed through :class:`TurnMapper` as data; synthetic events cover
the 1.2.x shape and the ambiguous ties. Every update is schema-checked (``feed_all``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agybridge.acp import models
from agybridge.agy import events
from agybridge.translate import blocked, notices, usage
from agybridge.translate.card_text import fenced
from agybridge.translate.mapper import TurnMapper
from agybridge.translate.outcome import OutcomeKind

from ...golden import split_turns
from .test_mapper_more import feed_all, mapper, of_type, result, shown_text, step, tool

Mapped = tuple[TurnMapper, list[models.SessionUpdate]]


def replay(samples_dir: Path, name: str, **fields: Any) -> list[Mapped]:
    """Each turn of a capture through its own mapper, as the session would."""
    lines = (samples_dir / name).read_text().splitlines()
    mapped = []
    previous: events.Usage | None = None
    for index, turn in enumerate(split_turns([line for line in lines if line.strip()])):
        turn_mapper = mapper(message_id=f"m{index}", previous_result_usage=previous, **fields)
        mapped.append((turn_mapper, feed_all(turn_mapper, turn)))
        results = [e for e in turn if isinstance(e, events.ResultEvent)]
        previous = results[-1].result.usage if results else previous
    return mapped


def final_status(updates: list[models.SessionUpdate], call_id: str) -> str | None:
    statuses = [
        u.status
        for u in updates
        if isinstance(u, models.ToolCall | models.ToolCallUpdate)
        and u.tool_call_id == call_id
        and u.status is not None
    ]
    return statuses[-1] if statuses else None


# --- blocked means blocked -------------------------------------------------------------


def test_soft_denied_capture_fails_the_blocked_card(samples_dir: Path) -> None:
    """1.3.1: the run_command that ended DONE without output is failed on its card,
    with the permission and an allow rule for its program; it never showed ✓."""
    [(turn, updates)] = replay(samples_dir, "untether-1.3.1-tools-soft-denied.ndjson")
    statuses = [
        u.status
        for u in updates
        if isinstance(u, models.ToolCall | models.ToolCallUpdate) and u.tool_call_id == "m0-tool-4"
    ]
    assert statuses == ["in_progress", "failed"]
    assert final_status(updates, "m0-tool-2") == "completed"  # the view_file before it
    [card] = [u for u in of_type(updates, models.ToolCallUpdate) if u.tool_call_id == "m0-tool-4"]
    text = card.content[0].content.text
    assert '"command" permission' in text and "`command(echo)`" in text
    assert card.raw_output == {
        "error": {
            "type": "PERMISSION_DENIED",
            "permission": "command",
            "allowRule": "command(echo)",
        }
    }
    notice = shown_text(updates)
    assert notice.startswith("⚠️ agy auto-denied")
    assert "Blocked: `Run echo probe-shell`." in notice
    assert turn.outcome is not None and turn.outcome.kind is OutcomeKind.END_TURN


def test_silent_command_followed_by_more_steps_completes() -> None:
    """A command that printed nothing and was followed by another step ran: ✓."""
    cmd = {"CommandLine": "true"}
    updates = feed_all(
        mapper(),
        [
            tool(2, "ACTIVE", "run_command", cmd),
            tool(2, "DONE", "run_command", cmd),
            step(3, "DONE", "agent_response", text_delta="Done.\n"),
            result(response="Done.\n"),
        ],
    )
    assert final_status(updates, "m1-tool-2") == "completed"
    assert "⚠️" not in shown_text(updates)


def test_permission_check_failed_step_names_the_rule() -> None:
    """1.2.x: the ERROR step names its permission; the card adds the allow rule, the
    CANCELED result is the denial (not a user cancel), and the notice names the card."""
    cmd = {"CommandLine": "git push"}
    error = (
        'permission check failed for command "git push": '
        "user denied permission to run command:\ngit push"
    )
    turn = mapper()
    updates = feed_all(
        turn,
        [
            tool(4, "ACTIVE", "run_command", cmd),
            tool(4, "ERROR", "run_command", cmd, error=events.ToolError("TOOL_ERROR", error)),
            'jetski: no output produced — a tool required the "command" permission that '
            "headless mode cannot prompt for, so it was auto-denied.",
            result("CANCELED", denied_actions=[{"action": "command"}]),
        ],
    )
    [card] = [u for u in of_type(updates, models.ToolCallUpdate) if u.status == "failed"]
    text = card.content[0].content.text
    assert text.startswith(error) and "`command(git)`" in text
    assert "Blocked: `Run git push`." in shown_text(updates)
    assert turn.outcome is not None and turn.outcome.kind is OutcomeKind.END_TURN


def test_untied_denial_is_said_not_guessed() -> None:
    """The last step of the denied kind produced output: no card is failed, and the
    notice says agy did not say which step was blocked."""
    cmd = {"CommandLine": "ls"}
    updates = feed_all(
        mapper(),
        [
            tool(2, "DONE", "run_command", cmd, output="a\n"),
            result(denied_actions=[{"action": "command"}]),
        ],
    )
    assert final_status(updates, "m1-tool-2") == "completed"
    assert "agy did not say which step it blocked: the last step that needs it" in shown_text(
        updates
    )


def test_tie_rules() -> None:
    """The last step of the permission's kind, unless it ran; unknown kinds are untied."""
    steps = [
        blocked.StepSeen(1, "run_command", "Run a", has_output=False, failed=False),
        blocked.StepSeen(2, "view_file", "Read b", has_output=True, failed=False),
        blocked.StepSeen(3, "run_command", "Run c", has_output=False, failed=False),
        blocked.StepSeen(4, "write_to_file", "Write d", has_output=True, failed=False),
    ]
    tie = blocked.tie(steps, ["command", "write_file", "read_url", "teleport", "command"])
    assert tie.blocked == {3: "command"}
    assert set(tie.untied) == {"write_file", "read_url", "teleport"}
    assert blocked.checked_permission('permission check failed for read_url "x": no') == "read_url"
    assert blocked.checked_permission("tool call denied by pre-tool hook: x") is None


# --- an answer inside an ERROR result ----------------------------------------------------

KAOIRO_429 = (
    "API error (attempt 8): RESOURCE_EXHAUSTED (code 429): Individual quota reached. "
    "Please upgrade your subscription to increase your limits. Resets in 0s."
)


def test_error_result_with_the_answer_is_partial(samples_dir: Path) -> None:
    """The answer stands; the warning names what failed after it (the captured 429),
    not "could not run this turn"; the outcome and _meta say partial."""
    [line] = (
        (samples_dir / "kaoiro-1.2.15-terminal-429-result-sanitized.ndjson")
        .read_text()
        .splitlines()
    )
    captured = events.parse_event(line)
    assert isinstance(captured, events.ResultEvent)
    assert captured.result.error == KAOIRO_429
    turn = mapper()
    updates = feed_all(
        turn,
        [
            step(2, "DONE", "agent_response", text_delta="The answer is 4.\n"),
            result("ERROR", response="The answer is 4.\n", error=KAOIRO_429),
        ],
    )
    assert shown_text(updates) == (
        f"The answer is 4.\n\n⚠️ agy stopped after this answer: {KAOIRO_429} "
        "(quota resets at 2026-11-30T12:00:00Z)"
    )
    assert "could not run this turn" not in shown_text(updates)
    assert turn.outcome is not None and turn.outcome.partial
    meta = turn.response_meta()
    assert meta["partial"] is True and meta["agyError"]["error"] == KAOIRO_429


def test_error_result_without_an_answer_is_not_partial() -> None:
    turn = mapper()
    updates = feed_all(turn, [result("ERROR", error=KAOIRO_429)])
    assert shown_text(updates).startswith("⚠️ agy could not run this turn:")
    assert turn.outcome is not None and not turn.outcome.partial
    assert "partial" not in turn.response_meta()


# --- context window, subagents, spacing ------------------------------------------------------


def test_init_model_sets_the_window_before_the_first_usage(samples_dir: Path) -> None:
    """1.3.2's init.model: turn 1's window is the model's, and equals a later turn's."""
    path = "untether-1.3.2-init-model-ok.ndjson"
    [(first, updates)] = replay(samples_dir, path)
    sizes = [u.size for u in of_type(updates, models.UsageUpdate)]
    model = "gemini-3.8-flash"
    assert sizes == [usage.context_window(model)] == [1_048_576]
    # A second turn's mapper is made once the session knows the model from init.
    second = mapper(context_size=usage.context_window(model))
    assert second.context_size == first.context_size
    # The AGYBRIDGE_CONTEXT_WINDOW setting still wins.
    [(_, overridden)] = replay(samples_dir, path, context_window_override=5000)
    assert [u.size for u in of_type(overridden, models.UsageUpdate)] == [5000]


def test_subagent_stays_in_progress_until_its_return(samples_dir: Path) -> None:
    """The plan entry (role and initial prompt) stays in progress past the spawning
    step's DONE and the parent's "waiting" text; the system_message completes it."""
    [(turn, updates)] = replay(samples_dir, "untether-1.3.1-subagent.ndjson")
    seen: list[tuple[str, str]] = []
    for update in updates:
        if isinstance(update, models.Plan):
            seen += [("plan", e.status) for e in update.entries]
        else:
            seen += [("text", shown_text([update]))] if shown_text([update]) else []
    entry = "Subagent Secret Reader: Read notes.txt and reply with the secret word only."
    assert next(iter(turn.plan.values())).content == entry
    statuses = [s for kind, s in seen if kind == "plan"]
    assert statuses == ["in_progress", "completed"]
    completed_at = seen.index(("plan", "completed"))
    assert seen[completed_at + 1] == ("text", "SUB SAID banana\n")
    assert any("Waiting for its response." in s for _, s in seen[:completed_at])


def test_one_blank_line_before_a_notice() -> None:
    """agy's trailing newline is not doubled into three before the bridge's notice."""
    for reply in ("Done.", "Done.\n", "Done.\n\n"):
        updates = feed_all(
            mapper(),
            [
                step(2, "DONE", "agent_response", text_delta=reply),
                result(response=reply, denied_actions=[{"action": "command"}]),
            ],
        )
        text = shown_text(updates)
        assert "Done.\n\n⚠️" in text and "\n\n\n" not in text, repr(text)


def test_notice_names_blocked_cards_and_untied_permissions() -> None:
    text = notices.soft_deny_message(
        ["command", "mcp"], blocked=["Run rm x"], untied={"mcp": "no tool step needs it"}
    )
    assert "Blocked: `Run rm x`." in text
    assert "agy did not say which step the mcp denial blocked: no tool step needs it." in text


def test_backgrounded_command_says_so() -> None:
    """A command agy left running (a later step came before its DONE) says it runs in
    the background, and its DONE without output is not a bare ✓ (kaoiro probe E)."""
    cmd = {"CommandLine": "sleep 20; echo DONE"}
    turn = mapper()
    updates = feed_all(
        turn,
        [
            tool(2, "ACTIVE", "run_command", cmd),
            step(3, "DONE", "agent_response", text_delta="LAUNCHED\n"),
            tool(2, "DONE", "run_command", cmd),
            step(4, "DONE", "system_message"),
            step(5, "DONE", "agent_response", text_delta="RESULT=DONE\n"),
            result(response="LAUNCHED\nRESULT=DONE\n"),
        ],
    )
    card = [u for u in of_type(updates, models.ToolCallUpdate) if u.tool_call_id == "m1-tool-2"]
    assert card[0].status is None and "Running in the background" in shown_card(card[0])
    assert card[-1].status == "completed" and "Finished in the background" in shown_card(card[-1])
    assert shown_text(updates) == "LAUNCHED\nRESULT=DONE\n"


def shown_card(update: models.ToolCallUpdate) -> str:
    return "".join(
        c.content.text
        for c in update.content or []
        if isinstance(c, models.ContentToolCallContent)
        and isinstance(c.content, models.TextContent)
    )


def test_partial_answer_is_never_a_prompt_error() -> None:
    """Even an auth error after agy's answer leaves the answer standing (end_turn)."""
    from agybridge.session.errors import result_error  # noqa: PLC0415 - the session's reading

    turn = mapper()
    feed_all(
        turn,
        [
            step(2, "DONE", "agent_response", text_delta="Here it is.\n"),
            result("ERROR", response="Here it is.\n", error="authentication expired"),
        ],
    )
    assert turn.outcome is not None and turn.outcome.partial
    assert result_error(turn, auth_failed=True) is None
    unanswered = mapper()
    feed_all(unanswered, [result("ERROR", error="authentication expired")])
    assert result_error(unanswered, auth_failed=False) is not None


@given(
    cuts=st.lists(st.integers(min_value=1, max_value=60), max_size=6),
    lead=st.sampled_from(["", " ", "\n"]),
)
def test_structured_line_is_never_shown_however_it_is_split(cuts: list[int], lead: str) -> None:
    """Under --json-schema, however agy splits its JSON line into deltas, the client sees
    the clean fenced object only (no internal key, no raw line)."""
    answer = {"answer": "Hello!\n\n1, 2, 3.", "count": 3}
    line = lead + json.dumps({**answer, "toolAction": "a", "toolSummary": "b"}) + "\n"
    pieces, at = [], 0
    for cut in cuts:
        if at < len(line):
            pieces.append(line[at : at + cut])
            at += cut
    pieces.append(line[at:])
    deltas = [step(2, "ACTIVE", "agent_response", text_delta=p) for p in pieces if p]
    updates = feed_all(
        mapper(structured=True), [*deltas, result(response=line, structured_output=answer)]
    )
    assert shown_text(updates) == fenced(json.dumps(answer, indent=2), "json")


@given(text=st.text(alphabet="ab \n", max_size=12))
def test_notice_follows_any_text_after_one_blank_line(text: str) -> None:
    """Whatever agy's text ends with, the bridge adds only the line ends that make one
    blank line before its notice (none when nothing visible came): never a third."""
    updates = feed_all(
        mapper(),
        [
            step(2, "DONE", "agent_response", text_delta=text or None),
            result(response=text, denied_actions=[{"action": "command"}]),
        ],
    )
    before, _, _ = shown_text(updates).partition("⚠️")
    assert before.startswith(text)
    trailing = len(text) - len(text.rstrip("\n"))
    added = before[len(text) :]
    assert added == ("\n\n"[min(2, trailing) :] if text.strip() else "")
