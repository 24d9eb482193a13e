"""The turn's plan (translate/plan.py): agy's plan tools, subagents and background work.

Fed through the mapper, as the session feeds it, so that stderr lines, tool and
subagent steps and the result each reach the plan; every update is checked
against the official ACP schema (``feed_all``).
"""

from __future__ import annotations

from agybridge.acp import models
from agybridge.agy.stderr import classify_stderr
from agybridge.translate.plan import TurnPlan

from ...acp_wire import assert_updates_valid
from ...extension_schema import check_notification
from .test_mapper_more import feed_all, mapper, of_type, result, step, tool


def entries(*rows: tuple[str, str]) -> models.Plan:
    return models.Plan(
        entries=[models.PlanEntry(content=c, priority="medium", status=s) for c, s in rows]
    )


SUBAGENTS = {
    "Subagents": [
        {"Role": "researcher", "Prompt": "Find the bug\nthen more"},
        {"TypeName": "coder"},
    ]
}


def test_plan_from_background_work() -> None:
    """Subagents, tasks, schedules and background waits form one plan, sent whole each time."""
    turn = mapper()
    updates = feed_all(
        turn,
        [
            tool(2, "ACTIVE", "invoke_subagent", SUBAGENTS),
            "root agent idle; waiting up to 5s for 1 background task(s)",
            tool(3, "ACTIVE", "manage_task", {"Action": "status", "TaskId": "t1"}),
            tool(4, "DONE", "schedule", {"Prompt": "check CI"}),
            tool(2, "DONE", "invoke_subagent", SUBAGENTS),
            tool(3, "DONE", "manage_task", {"Action": "status", "TaskId": "t1"}),
            result(),
        ],
    )
    researcher, coder = "Subagent researcher: Find the bug", "Subagent coder"
    background, task, scheduled = (
        "Background work: 1 task(s)",
        "Background task t1: status",
        "Scheduled: check CI",
    )
    assert of_type(updates, models.Plan) == [
        entries((researcher, "in_progress")),
        entries((researcher, "in_progress"), (coder, "in_progress")),
        entries((researcher, "in_progress"), (coder, "in_progress"), (background, "in_progress")),
        entries(
            (researcher, "in_progress"),
            (coder, "in_progress"),
            (background, "in_progress"),
            (task, "in_progress"),
        ),
        entries(
            (researcher, "in_progress"),
            (coder, "in_progress"),
            (background, "in_progress"),
            (task, "in_progress"),
            (scheduled, "pending"),
        ),
        # The spawning step's DONE is not the subagents' return (contract.md §11).
        entries(
            (researcher, "in_progress"),
            (coder, "in_progress"),
            (background, "in_progress"),
            (task, "completed"),
            (scheduled, "pending"),
        ),
        # The result completes what is still running; scheduled work stays pending.
        entries(
            (researcher, "completed"),
            (coder, "completed"),
            (background, "completed"),
            (task, "completed"),
            (scheduled, "pending"),
        ),
    ]
    # The session keeps the final plan for replay.
    assert (
        list(turn.plan.values())
        == entries(
            (researcher, "completed"),
            (coder, "completed"),
            (background, "completed"),
            (task, "completed"),
            (scheduled, "pending"),
        ).entries
    )
    # Plan tools are still tool calls.
    assert [u.tool_call_id for u in of_type(updates, models.ToolCall)] == [
        "m1-tool-2",
        "m1-tool-3",
        "m1-tool-4",
    ]


def test_background_tasks_terminated_on_exit() -> None:
    """agy's "terminating N background task(s)" line completes the background entry."""
    updates = feed_all(
        mapper(),
        [
            "root agent idle; waiting up to 5s for 2 background task(s)",
            "terminating 2 background task(s) on exit",
            result(),
        ],
    )
    assert of_type(updates, models.Plan) == [
        entries(("Background work: 2 task(s)", "in_progress")),
        entries(("Background work: 2 task(s)", "completed")),
    ]


def test_subagent_step_info_feeds_the_plan() -> None:
    """``subagent`` steps with subagent_info add their roles to the plan."""
    info = {"subagents": [{"type_name": "explorer", "role": "scout"}, {"type_name": "coder"}]}
    updates = feed_all(mapper(), [step(5, "ACTIVE", "subagent", subagent_info=info), result()])
    assert of_type(updates, models.Plan) == [
        entries(("Subagent scout", "in_progress")),
        entries(("Subagent scout", "in_progress"), ("Subagent coder", "in_progress")),
        entries(("Subagent scout", "completed"), ("Subagent coder", "completed")),
    ]


def test_manage_task_without_task_id_plan_text() -> None:
    """A task action with no task id reads naturally in the plan."""
    updates = feed_all(mapper(), [tool(3, "ACTIVE", "manage_task", {"Action": "list"})])
    [plan] = of_type(updates, models.Plan)
    assert plan.entries[0].content == "Background task: list"


def test_stderr_after_the_result_is_ignored() -> None:
    """Notices that arrive after the turn's result change nothing."""
    turn = mapper()
    feed_all(turn, [result()])
    assert turn.feed_stderr(classify_stderr("terminating 1 background task(s) on exit")) == []


def test_a_plan_is_sent_only_when_it_changes() -> None:
    """Setting an entry to what it is, or ending a turn with nothing running, sends nothing."""
    plan = TurnPlan()
    assert plan.finish() == []
    assert plan.set("a", "Task", "in_progress") == [entries(("Task", "in_progress"))]
    assert plan.set("a", "Task", "in_progress") == []
    assert plan.finish() == [entries(("Task", "completed"))]
    assert plan.finish() == []
    assert plan.from_stderr("agy: nothing about background work") == []


def test_subagent_events_name_each_start_and_how_it_ended() -> None:
    """With the extension events on: a start per subagent, then ``failed`` for one whose
    spawning step failed and ``turnEnded`` for one whose return was never seen; every
    event schema-valid (docs/extensions.schema.json)."""
    turn = mapper(extension_events=True)
    info = {"subagents": [{"type_name": "explorer", "role": "scout", "initial_prompt": "Look"}]}
    updates = [
        *turn.feed(step(5, "ACTIVE", "subagent", subagent_info=info)),
        *turn.feed(step(6, "ERROR", "subagent", subagent_info={"subagents": [{}]})),
        *turn.feed(result()),
    ]
    assert_updates_valid([u for u in updates if not isinstance(u, models.ExtensionEvent)])
    events = [u for u in updates if isinstance(u, models.ExtensionEvent)]
    for event in events:
        check_notification(event.method, {"sessionId": "s", **event.params})
    assert [(e.method.rpartition("/")[2], e.params.get("outcome")) for e in events] == [
        ("sub_agent_invocation_start", None),
        ("sub_agent_invocation_start", None),
        ("sub_agent_finished", "failed"),
        ("sub_agent_finished", "turnEnded"),
        ("usage_update", None),
    ]
    assert events[0].params == {
        "agentName": "scout",
        "invocationId": "5.0",
        "toolName": "invoke_subagent",
        "stepIndex": 5,
        "prompt": "Look",
    }
    assert events[3].params["invocationId"] == "5.0"
