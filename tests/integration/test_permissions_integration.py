"""Real permission prompts through the wire: agy's hook -> the bridge -> the editor.

The fake agy runs the bridge's PreToolUse hook helper for every tool step
(its ``permission-tool`` scenario: a command, a write in the workspace, a
read); the raw client answers ``session/request_permission`` as told. Every
wire message is schema-validated and nothing may be left running.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from agybridge.permissions import HookRoot

from ..acp_wire import Harness, RawClient, WireValidator
from ..extension_schema import call

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
PROMPT = "[fake-agy:permission-tool]"


async def open_session(client: RawClient) -> str:
    await client.initialize()
    return await client.new_session()


async def run_prompt(client: RawClient, session_id: str, text: str = PROMPT) -> dict[str, Any]:
    return await client.response(await client.start_prompt(session_id, text))


def hook_verdicts(harness: Harness) -> list[tuple[str, str]]:
    return [(e["hook"]["tool"], e["hook"]["verdict"]) for e in harness.launches() if "hook" in e]


def final_status(client: RawClient, session_id: str, tool_call_id: str) -> str | None:
    status = None
    for update in client.updates(session_id):
        if update.get("toolCallId") == tool_call_id and update.get("status"):
            status = update["status"]
    return status


async def test_allow_once_runs_the_actions_and_reads_need_no_question(
    harness: Harness,
) -> None:
    """Each command and write is asked once with the four options and a pending
    card carrying agy's full arguments; the read inside the workspace is not."""
    validator = WireValidator()
    target = harness.tmp_path / "fake-agy-permission.txt"
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            session_id = await open_session(client)
            response = await run_prompt(client, session_id)
            assert response["result"]["stopReason"] == "end_turn"
            asked = client.permission_requests
            assert [r["params"]["toolCall"]["kind"] for r in asked] == ["execute", "edit"]
            options = [o["kind"] for o in asked[0]["params"]["options"]]
            assert options == ["allow_once", "allow_always", "reject_once", "reject_always"]
            command_call = asked[0]["params"]["toolCall"]
            assert command_call["rawInput"]["CommandLine"] == "echo hello_headless_demo"
            assert "Cwd" in command_call["rawInput"]  # the hook's full arguments
            write_call = asked[1]["params"]["toolCall"]
            [diff] = [c for c in write_call["content"] if c["type"] == "diff"]
            assert diff["path"] == str(target) and diff.get("oldText") is None
            # Each card was announced (pending) before its question.
            pending = [u for u in client.updates(session_id) if u.get("status") == "pending"]
            assert {u["toolCallId"] for u in pending} >= {command_call["toolCallId"]}
            assert target.exists()
            assert "hello_headless_demo" in client.message_text(session_id)
        verdicts = hook_verdicts(harness)
        assert verdicts == [
            ("run_command", "allow"),
            ("write_to_file", "allow"),
            ("view_file", "allow"),
        ]
        argv = harness.session_argvs()[0]
        assert "--dangerously-skip-permissions" in argv
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_reject_once_fails_the_step_and_the_turn_goes_on(harness: Harness) -> None:
    """A rejected command ends as a failed tool call; the turn still ends normally."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            client.permission_choice = "reject_once"
            session_id = await open_session(client)
            response = await run_prompt(client, session_id)
            assert response["result"]["stopReason"] == "end_turn"
            command_id = client.permission_requests[0]["params"]["toolCall"]["toolCallId"]
            assert final_status(client, session_id, command_id) == "failed"
            assert not (harness.tmp_path / "fake-agy-permission.txt").exists()
        assert ("run_command", "deny") in hook_verdicts(harness)
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_allow_always_is_not_asked_again(harness: Harness) -> None:
    """After "always allow" the same command and write are not asked again."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            client.permission_choice = "allow_always"
            session_id = await open_session(client)
            assert (await run_prompt(client, session_id))["result"]["stopReason"] == "end_turn"
            asked_first = len(client.permission_requests)
            assert asked_first == 2
            assert (await run_prompt(client, session_id))["result"]["stopReason"] == "end_turn"
            assert len(client.permission_requests) == asked_first
        assert [v for _, v in hook_verdicts(harness)] == ["allow"] * 6
        await harness.assert_no_leftovers()
    assert validator.problems == []


#: The issue's five: after "always allow" of the first, the second is asked again.
WIDENING = [
    ("git grep TODO", 'git grep -O"sh -c id" TODO'),
    ("git log -1", "git log --output=/tmp/agybridge-never-written"),
    ("docker run --rm hello-world", "docker run --rm -v /:/host alpine chroot /host"),
    ("pip install requests", "pip install https://example.invalid/x.tar.gz"),
    ("go run main.go", "go run ../elsewhere/x.go"),
]


async def test_always_allow_does_not_cover_commands_that_widen_it(harness: Harness) -> None:
    """Each of the issue's five pairs: the option text says what "always" covers, the
    approved command is not asked again, the widening variant is."""
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            client.permission_choice = "allow_always"
            await client.initialize()
            for approved, widened in WIDENING:
                session_id = await client.new_session()
                prompt = "[fake-agy:gated-command] "
                await run_prompt(client, session_id, prompt + approved)
                [asked] = client.permission_requests
                always = asked["params"]["options"][1]["name"]
                prefix = " ".join(approved.split()[:2])
                assert always.startswith(f"Always allow `{prefix}` commands with "), always
                assert "inside the workspace" in always
                await run_prompt(client, session_id, prompt + approved)
                assert len(client.permission_requests) == 1
                await run_prompt(client, session_id, prompt + widened)
                assert len(client.permission_requests) == 2, (approved, widened)
                assert (
                    client.permission_requests[1]["params"]["toolCall"]["rawInput"]["CommandLine"]
                    == widened
                )
                client.permission_requests.clear()
        assert [v for _, v in hook_verdicts(harness)] == ["allow"] * 15
        await harness.assert_no_leftovers()


async def test_cancel_while_a_permission_is_pending(harness: Harness) -> None:
    """session/cancel with a question open: the hook is answered deny at once,
    the prompt answers cancelled within a second, nothing is left running."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            client.permission_choice = "hold"
            session_id = await open_session(client)
            request_id = await client.start_prompt(session_id, PROMPT)
            await client.wait_for(lambda: client.permission_requests or None, "a question")
            started = trio.current_time()
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.response(request_id)
            elapsed = trio.current_time() - started
            assert response["result"]["stopReason"] == "cancelled"
            assert elapsed < 1.0, elapsed
            # The client answers its open question "cancelled", as ACP requires.
            await client.answer_permission(client.permission_requests[0], None)
        # The broker answered the waiting hook with deny at once (agy, being
        # interrupted at the same moment, may or may not read it).
        log = (harness.tmp_path / "agybridge.log").read_text()
        assert "denied 1 pending permission request(s): the user cancelled the turn" in log
        assert hook_verdicts(harness) in ([], [("run_command", "deny")])
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_missing_gate_falls_back_to_safe_mode(harness: Harness) -> None:
    """agy does not load the hook (FAKE_AGY_IGNORE_HOOKS): the session runs with
    agy's own checks, never with them off, and says why once."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, FAKE_AGY_IGNORE_HOOKS="1") as client:
            session_id = await open_session(client)
            response = await run_prompt(client, session_id)
            assert response["result"]["stopReason"] == "end_turn"
            text = client.message_text(session_id)
            assert "permission gate is not available" in text
            assert "safe mode" in text
            assert client.permission_requests == []
        turn_argvs = harness.session_argvs()
        # The agy that ran the turn had agy's own checks on.
        assert "--dangerously-skip-permissions" not in turn_argvs[-1]
        await harness.assert_no_leftovers()
    assert validator.problems == []


def test_hooks_json_names_the_helper(tmp_path: Path) -> None:
    """The hook root the bridge writes is strict JSON with an integer timeout."""
    root = HookRoot.create(base_dir=str(tmp_path))
    try:
        data = json.loads(Path(root.hooks_json).read_text())
        [gate] = data.values()
        [group] = gate["PreToolUse"]
        assert group["matcher"] == "*"
        assert isinstance(group["hooks"][0]["timeout"], int)
    finally:
        root.remove()


async def allow_a_soft_denied_command(client: RawClient) -> str:
    """Safe mode, a client that allows: a prompt whose command agy denies asks
    once to allow "command"; the session's id."""
    client.permission_choice = "allow"
    session_id = await open_session(client)
    response = await run_prompt(client, session_id, "[fake-agy:soft-deny] rm it")
    assert response["result"]["stopReason"] == "end_turn"
    [asked] = client.permission_requests
    assert '"command"' in asked["params"]["toolCall"]["title"]
    return session_id


async def test_safe_mode_allow_and_retry(harness: Harness) -> None:
    """Safe mode: agy auto-denies a command; the user is offered to allow it for
    the session, and the prompt runs again behind the gate, with the command
    allowed and agy's other checks still in force."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, AGYBRIDGE_MODE="safe") as client:
            session_id = await allow_a_soft_denied_command(client)
            text = client.message_text(session_id)
            assert "auto-denied" in text  # the first attempt, explained
            assert "hello_headless_demo" in text  # the retry ran the command
            # Later turns keep the allowance without asking again.
            again = await run_prompt(client, session_id, "[fake-agy:soft-deny] once more")
            assert again["result"]["stopReason"] == "end_turn"
            assert len(client.permission_requests) == 1
        argvs = harness.session_argvs()
        assert "--dangerously-skip-permissions" not in argvs[0]
        assert "--dangerously-skip-permissions" in argvs[-1]
        assert ("run_command", "allow") in hook_verdicts(harness)
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_safe_mode_reject_keeps_the_denial(harness: Harness) -> None:
    """Declining the offer changes nothing: no retry, agy's checks stay on."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, AGYBRIDGE_MODE="safe") as client:
            client.permission_choice = "reject"
            session_id = await open_session(client)
            response = await run_prompt(client, session_id, "[fake-agy:soft-deny] rm it")
            assert response["result"]["stopReason"] == "end_turn"
            assert len(client.permission_requests) == 1
            # (The denial notice names the blocked card, `Run echo hello_headless_demo`.)
            assert "The command printed" not in client.message_text(session_id)
        assert all("--dangerously-skip-permissions" not in a for a in harness.session_argvs())
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_safe_mode_retries_once_when_agy_keeps_denying(harness: Harness) -> None:
    """Issue 27: an auto-approving client and an agy that denies every time (a
    denial no allowance lifts): one question, one retry, then a final answer
    that says why, instead of asking and relaunching again and again."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            validator=validator, AGYBRIDGE_MODE="safe", FAKE_AGY_DENY_ALWAYS="1"
        ) as client:
            session_id = await allow_a_soft_denied_command(client)
            text = client.message_text(session_id)
            assert (
                'agy denied the "command" permission again after you allowed it and the '
                "prompt was retried, so agybridge does not ask again in this turn"
            ) in text
            # The command never ran (its card is named, blocked, in the notices).
            assert "The command printed" not in text
        argvs = harness.session_argvs()
        assert [("--dangerously-skip-permissions" in a) for a in argvs[:2]] == [False, True]
        await harness.assert_no_leftovers()
    assert validator.problems == []


@pytest.mark.parametrize(("mode", "lazy_init"), [("safe", "0"), ("safe", "1"), ("ask", "0")])
async def test_agys_own_always_proceed_is_told_once_where_it_voids_the_mode(
    harness: Harness, mode: str, lazy_init: str
) -> None:
    """Issue 27: agy's own settings approve everything (``toolPermission``
    always-proceed, reported as init.permission_mode). In safe mode that means
    nothing is denied: the chat says so once per session with how to fix it,
    and runtime shows it. In ask mode the bridge asked for always-proceed
    itself (its gate decides): nothing to tell. An init printed only once the
    prompt arrived (contract.md §3.1, ``lazy_init``) is told in that turn too."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            validator=validator,
            AGYBRIDGE_MODE=mode,
            FAKE_AGY_TOOL_PERMISSION="always-proceed",
            FAKE_AGY_LAZY_INIT=lazy_init,
        ) as client:
            client.permission_choice = "allow_once"
            session_id = await open_session(client)
            await run_prompt(client, session_id, "[fake-agy:soft-deny] rm it")
            text = client.message_text(session_id)
            assert "hello_headless_demo" in text  # nothing denied
            told = (
                "agy's own settings approve every action (agy reports its permission mode as "
                "`always-proceed`), so the Safe mode denies nothing"
            )
            assert text.count(told) == (mode == "safe"), text
            if mode == "safe":
                assert 'set `toolPermission` to `"request-review"`' in text
                assert client.permission_requests == []
            mark = client.mark()
            await run_prompt(client, session_id, "[fake-agy:echo] again")
            assert "approve every action" not in client.message_text(session_id, since=mark)
            state = (await call(client, "_agybridge/session/runtime", {"sessionId": session_id}))[
                "result"
            ]
            assert state["agyPermissionMode"] == "always-proceed"
            assert state["agyPermissionOverride"] is (mode == "safe")
        await harness.assert_no_leftovers()
    assert validator.problems == []
