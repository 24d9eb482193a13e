"""PreToolUse hooks in the fake agy (fake_agy._fake_hooks), against
hooks-and-tools.md part A: where hooks.json is read and how strictly, what a handler gets
on stdin, how its answer (allow, deny, ``{}``, exit status, timeout) decides the tool step,
the ``-p /hooks`` listing, and the interplay with agy's own headless permission check.

Hook handlers are small Python scripts written into each test's tmp dir; they record
what they saw in a JSON-lines file and answer according to a mode argument.
"""

from __future__ import annotations

import json
import os
import select
import shlex
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_agy._fake_hooks import (
    DEFAULT_MODEL_NAME,
    HandlerRun,
    HooksFileError,
    matches,
    parse_hooks_file,
    verdict_of,
)
from fake_agy._fake_scenarios import (
    EDIT_SUFFIX,
    PERMISSION_CONTENT,
    PERMISSION_FILE,
    QUESTION,
    QUESTION_ANSWERED_PREFIX,
    QUESTION_OPTIONS,
    QUESTION_SKIPPED_REPLY,
    SECOND_OPTIONS,
    SECOND_QUESTION,
    SOFT_DENY_NOTICE,
    TOOL_COMMAND,
    TOOL_OUTPUT,
)
from tests.fake_agy.test_fake_agy import (
    DEADLINE_S,
    STREAM,
    Done,
    Event,
    Harness,
    Live,
    marked_pids,
    split_turns,
    user,
)

SKIP = "--dangerously-skip-permissions"
GATE_ID = "jsonhook__gate_PreToolUse_0_0"

#: The handler: records its input, then answers according to its mode (argv[1]).
HOOK_SCRIPT = r"""
import json, os, subprocess, sys, time
mode, log = sys.argv[1], sys.argv[2]
payload = json.loads(sys.stdin.read())
record = {"mode": mode, "payload": payload, "cwd": os.getcwd(), "pid": os.getpid(),
          "conversation": os.environ.get("ANTIGRAVITY_CONVERSATION_ID"),
          "marker": os.environ.get("FAKE_AGY_TEST_MARKER")}
with open(log, "a") as f:
    f.write(json.dumps(record) + "\n")
if mode.startswith("wait:"):
    while not os.path.exists(mode[5:]):
        time.sleep(0.01)
    mode = "allow"
if mode == "allow":
    print('{"decision":"allow"}')
elif mode.startswith("deny:"):
    print(json.dumps({"decision": "deny", "reason": mode[5:]}))
elif mode.startswith("raw:"):
    sys.stdout.write(mode[4:])
elif mode.startswith("exit:"):
    _, code, err = mode.split(":", 2)
    sys.stderr.write(err)
    print('{"decision":"allow"}')
    sys.exit(int(code))
elif mode == "hang":
    subprocess.run(["sleep", "60"])  # a grandchild: the group kill must reach it
    print('{"decision":"allow"}')
"""

Config = dict[str, Any]


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    try:
        yield harness
    finally:
        harness.cleanup()


class Hooks:
    """Writes hooks.json files whose handlers are HOOK_SCRIPT, and reads their records."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.script = tmp / "hook.py"
        self.script.write_text(HOOK_SCRIPT)
        self.log = tmp / "hook-calls.jsonl"

    def command(self, mode: str) -> str:
        argv = [sys.executable, str(self.script), mode, str(self.log)]
        return " ".join(shlex.quote(arg) for arg in argv)

    def handler(self, mode: str, **extra: Any) -> Config:
        return {"type": "command", "command": self.command(mode), **extra}

    def gate(self, mode: str, matcher: str = "*", name: str = "gate", **extra: Any) -> Config:
        """One hook ``name`` with one PreToolUse handler in mode ``mode``."""
        return {
            name: {"PreToolUse": [{"matcher": matcher, "hooks": [self.handler(mode, **extra)]}]}
        }

    @staticmethod
    def write(directory: Path, config: Config | str, sub: str = ".agents") -> Path:
        path = directory / sub / "hooks.json" if sub else directory / "hooks.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(config if isinstance(config, str) else json.dumps(config))
        return path

    def calls(self) -> list[Config]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def hooks(tmp_path: Path) -> Hooks:
    return Hooks(tmp_path)


def tool_updates(done: Done) -> list[Event]:
    return [s for s in done.steps() if s["step_type"] == "tool"]


def final_tool_states(done: Done) -> dict[str, Event]:
    """The last update of each tool step, by tool name."""
    return {s["tool_name"]: s for s in tool_updates(done) if s["state"] != "ACTIVE"}


def listing(done: Done) -> list[Config]:
    assert done.code == 0, done.stderr
    [envelope] = done.events
    return envelope["command"]["data"]["hooks"]  # type: ignore[no-any-return]


def hooks_command(fake: Harness, *roots: Path, ignore_hooks: str = "") -> Done:
    args = ["-p", "/hooks", "--output-format", "json"]
    for root in roots:
        args += ["--add-dir", str(root)]
    return fake.run(args, FAKE_AGY_IGNORE_HOOKS=ignore_hooks)


def debug_lines(fake: Harness) -> list[str]:
    return [entry["debug"] for entry in fake.log_entries() if "debug" in entry]


# --- hooks.json loading (§A1, §A2) -----------------------------------------------------

GOOD_HANDLER = {"type": "command", "command": "true", "timeout": 5}
GOOD = {"gate": {"PreToolUse": [{"matcher": "*", "hooks": [GOOD_HANDLER]}]}}

#: (file text, loaded?) per case: strict JSON, int32 timeout, Go's lenient field matching.
LOADING_CASES: dict[str, tuple[str, bool]] = {
    "good": (json.dumps(GOOD), True),
    "trailing-comma": (json.dumps(GOOD)[:-1] + ",}", False),
    "comment": ("// gate\n" + json.dumps(GOOD), False),
    "bom": ("\ufeff" + json.dumps(GOOD), False),
    "nan": (json.dumps(GOOD).replace("5}", "NaN}"), False),
    "float-timeout": (json.dumps(GOOD).replace('"timeout": 5', '"timeout": 5.0'), False),
    "exponent-timeout": (json.dumps(GOOD).replace('"timeout": 5', '"timeout": 5e0'), False),
    "string-timeout": (json.dumps(GOOD).replace('"timeout": 5', '"timeout": "5"'), False),
    "huge-timeout": (json.dumps(GOOD).replace('"timeout": 5', '"timeout": 4294967296'), False),
    "string-enabled": (json.dumps({"gate": {**GOOD["gate"], "enabled": "yes"}}), False),
    "array-top-level": (json.dumps([GOOD]), False),
    "hooks-not-array": (json.dumps({"gate": {"PreToolUse": [{"hooks": {}}]}}), False),
    "unknown-keys": (
        json.dumps({"gate": {**GOOD["gate"], "env": {"A": "1"}, "cwd": "/", "background": 1}}),
        True,
    ),
    "unknown-event": (json.dumps({"gate": {**GOOD["gate"], "NotAnEvent": [1]}}), True),
    "lowercase-event": (json.dumps({"gate": {"pretooluse": GOOD["gate"]["PreToolUse"]}}), True),
}


@pytest.mark.parametrize("case", sorted(LOADING_CASES))
def test_hooks_file_loading_rules(fake: Harness, case: str) -> None:
    """A file agy's decoder rejects is dropped whole, silently (one debug line only)."""
    text, loaded = LOADING_CASES[case]
    path = Hooks.write(fake.cwd, text)
    done = hooks_command(fake, fake.cwd)
    assert done.stderr == ""
    names = [hook["name"] for hook in listing(done)]
    assert names == (["gate"] if loaded else [])
    failures = [line for line in debug_lines(fake) if line.startswith("failed to parse")]
    if loaded:
        assert not failures
        assert "loaded 1 named hooks from 1 hooks.json file(s)" in debug_lines(fake)
    else:
        assert len(failures) == 1 and failures[0].startswith(
            f"failed to parse hooks.json at {path}: "
        )
        assert "loaded 0 named hooks from 0 hooks.json file(s)" in debug_lines(fake)


def test_event_names_are_case_insensitive_and_listed_canonically(fake: Harness) -> None:
    """`pretooluse` loads as PreToolUse (Go's case-insensitive field match)."""
    Hooks.write(fake.cwd, {"gate": {"PRETOOLUSE": [{"matcher": "", "hooks": [GOOD_HANDLER]}]}})
    [hook] = listing(hooks_command(fake, fake.cwd))
    assert hook["actions"] == [
        {"event": "PreToolUse", "type": "command", "command": "true", "timeout_seconds": 5}
    ]


def test_a_bad_file_does_not_drop_the_others(fake: Harness, tmp_path: Path) -> None:
    """Only the failing file is dropped: user-level and other roots still load."""
    other = tmp_path / "other"
    Hooks.write(fake.cwd, "{not json")
    Hooks.write(other, {"second": GOOD["gate"]})
    Hooks.write(fake.home / ".gemini" / "config", {"user": GOOD["gate"]}, sub="")
    hooks = listing(hooks_command(fake, fake.cwd, other))
    assert [h["name"] for h in hooks] == ["second", "user"]


@pytest.mark.parametrize("sub", [".agents", ".agent", "_agents", "_agent"])
def test_every_customization_root_of_an_add_dir_is_read(fake: Harness, sub: str) -> None:
    """<root>/{.agents,.agent,_agents,_agent}/hooks.json ([SAW], §A2)."""
    path = Hooks.write(fake.cwd, GOOD, sub=sub)
    [hook] = listing(hooks_command(fake, fake.cwd))
    assert hook["source"] == str(path)


def test_the_process_cwd_is_not_a_root(fake: Harness) -> None:
    """A .agents/hooks.json in the cwd loads only when the cwd is an --add-dir (§A2)."""
    Hooks.write(fake.cwd, GOOD)
    assert listing(hooks_command(fake)) == []
    assert [h["name"] for h in listing(hooks_command(fake, fake.cwd))] == ["gate"]


def test_a_relative_add_dir_loads_no_hooks(fake: Harness) -> None:
    """agy 1.2.8 loaded 0 hooks for a relative --add-dir (index; see _fake_hooks)."""
    Hooks.write(fake.cwd / "sub", GOOD)
    done = fake.run(["-p", "/hooks", "--output-format", "json", "--add-dir", "sub"])
    assert listing(done) == []
    assert "ignoring relative --add-dir 'sub' for hooks" in debug_lines(fake)


def test_user_level_hooks_come_from_home(fake: Harness) -> None:
    """$HOME/.gemini/config/hooks.json loads without any --add-dir (§A2)."""
    path = Hooks.write(fake.home / ".gemini" / "config", GOOD, sub="")
    [hook] = listing(hooks_command(fake))
    assert (hook["name"], hook["source"]) == ("gate", str(path))


def test_ignore_hooks_knob_loads_nothing(fake: Harness, hooks: Hooks) -> None:
    """FAKE_AGY_IGNORE_HOOKS=1: /hooks lists none and no handler runs (§A5 trap)."""
    Hooks.write(fake.cwd, hooks.gate("deny:never"))
    Hooks.write(fake.home / ".gemini" / "config", GOOD, sub="")
    assert listing(hooks_command(fake, fake.cwd, ignore_hooks="1")) == []
    done = fake.run(
        [*STREAM, "--add-dir", str(fake.cwd), SKIP],
        [user("[fake-agy:tool]")],
        FAKE_AGY_IGNORE_HOOKS="1",
    )
    assert final_tool_states(done)["run_command"]["state"] == "DONE"
    assert hooks.calls() == []


# --- /hooks introspection (§A2) --------------------------------------------------------


def test_hooks_command_json_envelope(fake: Harness, tmp_path: Path) -> None:
    """The captured envelope: no init, no turn, num_turns 0, TSV response, command data."""
    config = {
        "zeta": {"enabled": False, "Stop": [{"command": "./stop.sh"}]},
        "gate": {
            "PreToolUse": [
                {
                    "matcher": "run_command|view_file",
                    "hooks": [{"command": "/bin/gate", "timeout": 600}],
                }
            ],
            "PostToolUse": [
                {"matcher": "", "hooks": [{"type": "command", "command": "./post.sh"}]}
            ],
            "PreInvocation": [{"type": "command"}],
        },
    }
    path = Hooks.write(fake.cwd, config)
    done = hooks_command(fake, fake.cwd)
    assert done.code == 0 and done.stderr == ""
    [envelope] = done.events
    assert envelope == {
        "conversation_id": "",
        "status": "SUCCESS",
        "response": (
            "gate\tenabled\tPreInvocation\t-\tcommand\t\n"
            "gate\tenabled\tPreToolUse\trun_command|view_file\tcommand\t/bin/gate\n"
            "gate\tenabled\tPostToolUse\t-\tcommand\t./post.sh\n"
            "zeta\tdisabled\tStop\t-\tcommand\t./stop.sh\n"
        ),
        "duration_seconds": 0,
        "num_turns": 0,
        "usage": {
            "input_tokens": 0,
            "output_tokens": 0,
            "thinking_tokens": 0,
            "cache_read_tokens": 0,
            "total_tokens": 0,
        },
        "command": {
            "name": "hooks",
            "data": {
                "hooks": [
                    {
                        "name": "gate",
                        "enabled": True,
                        "source": str(path),
                        "actions": [
                            {"event": "PreInvocation", "type": "command"},
                            {
                                "event": "PreToolUse",
                                "matcher": "run_command|view_file",
                                "type": "command",
                                "command": "/bin/gate",
                                "timeout_seconds": 600,
                            },
                            {"event": "PostToolUse", "type": "command", "command": "./post.sh"},
                        ],
                    },
                    {
                        "name": "zeta",
                        "enabled": False,
                        "source": str(path),
                        "actions": [{"event": "Stop", "type": "command", "command": "./stop.sh"}],
                    },
                ]
            },
        },
    }
    assert not (fake.state_dir.exists() and any(fake.state_dir.iterdir()))  # no conversation


def test_hooks_command_stream_json_and_text(fake: Harness) -> None:
    """stream-json: a command_result line, then the result; text: the TSV lines."""
    Hooks.write(fake.cwd, GOOD)
    args = ["-p", "/hooks", "--add-dir", str(fake.cwd)]
    done = fake.run([*args, "--output-format", "stream-json"])
    assert done.code == 0
    first, second = done.events
    assert first["event"] == "command_result"
    assert second["event"] == "result" and second["result"]["command"] == first["command"]
    assert second["result"]["num_turns"] == 0
    [hook] = first["command"]["data"]["hooks"]
    assert hook["name"] == "gate"
    done = fake.run(args)
    assert done.stdout == "gate\tenabled\tPreToolUse\t*\tcommand\ttrue\n"


def test_hooks_is_a_prompt_when_slash_commands_are_disabled(fake: Harness) -> None:
    """--disable-slash-commands: `/hooks` goes to the model like any text (§1.1)."""
    done = fake.run(
        ["-p", "/hooks", "--output-format", "json", "--disable-slash-commands"],
    )
    [envelope] = done.events
    assert envelope["num_turns"] == 1 and "command" not in envelope


# --- matchers (§A1) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("matcher", "expected"),
    [
        ("", {"run_command", "write_to_file", "view_file"}),
        ("*", {"run_command", "write_to_file", "view_file"}),
        ("run_command", {"run_command"}),
        ("view_file|write_to_file", {"write_to_file", "view_file"}),
        ("_file$", {"write_to_file", "view_file"}),
        ("browser_.*", set()),
        ("[", set()),
    ],
)
def test_matcher_is_a_regex_on_the_tool_name(
    fake: Harness, hooks: Hooks, matcher: str, expected: set[str]
) -> None:
    """The handler runs for the tools its matcher matches; "" and "*" match all."""
    Hooks.write(fake.cwd, hooks.gate("allow", matcher=matcher))
    done = fake.run(
        [*STREAM, "--add-dir", str(fake.cwd), SKIP], [user("[fake-agy:permission-tool]")]
    )
    assert done.results()[0]["status"] == "SUCCESS"
    assert {call["payload"]["toolCall"]["name"] for call in hooks.calls()} == expected


def test_matcher_helper() -> None:
    """Unanchored search, like Go's regexp.MatchString; bad patterns match nothing."""
    assert matches(None, "x") and matches("", "x") and matches("*", "x")
    assert matches("command", "run_command") and not matches("^command", "run_command")
    assert not matches("(", "run_command")


# --- the stdin payload (§A3) ------------------------------------------------------------


def test_payload_carries_the_full_arguments(fake: Harness, hooks: Hooks, tmp_path: Path) -> None:
    """One camelCase object per tool step: full args, stepIdx = step_index, the ids and
    paths; the handler runs in its hooks.json dir with ANTIGRAVITY_CONVERSATION_ID set."""
    gate_root = tmp_path / "gate-root"
    path = Hooks.write(gate_root, hooks.gate("allow"))
    args = [*STREAM, "--add-dir", str(fake.cwd), "--add-dir", str(gate_root), SKIP]
    done = fake.run(
        [*args, "--model", "Gemini 3.1 Pro (Low)"], [user("[fake-agy:permission-tool]")]
    )
    cid = done.events[0]["conversation_id"]
    steps = {s["tool_name"]: s["step_index"] for s in tool_updates(done)}
    calls = hooks.calls()
    assert [c["payload"]["toolCall"]["name"] for c in calls] == [
        "run_command",
        "write_to_file",
        "view_file",
    ]
    target = fake.cwd / PERMISSION_FILE
    brain = fake.state_dir / "brain" / cid
    expected_args = {
        "run_command": {
            "CommandLine": TOOL_COMMAND,
            "Cwd": str(fake.cwd),
            "WaitMsBeforeAsync": 2000,
            "toolAction": "Running a shell command",
            "toolSummary": f"Running {TOOL_COMMAND}",
        },
        "write_to_file": {
            "TargetFile": str(target),
            "CodeContent": PERMISSION_CONTENT,
            "Overwrite": False,
            "Description": "Record the permission check.",
        },
        "view_file": {"AbsolutePath": str(target)},
    }
    for call in calls:
        payload = call["payload"]
        name = payload["toolCall"]["name"]
        assert list(payload) == [
            "toolCall",
            "stepIdx",
            "conversationId",
            "workspacePaths",
            "modelName",
            "transcriptPath",
            "artifactDirectoryPath",
        ]
        assert payload == {
            "toolCall": {"name": name, "args": expected_args[name]},
            "stepIdx": steps[name],
            "conversationId": cid,
            "workspacePaths": [str(fake.cwd), str(gate_root)],
            "modelName": "gemini-3.1-pro-low",
            "transcriptPath": str(brain / ".system_generated/logs/transcript_full.jsonl"),
            "artifactDirectoryPath": str(brain),
        }
        assert call["conversation"] == cid
        assert call["cwd"] == str(path.parent)
        assert call["marker"] == fake.marker  # the fake's environment is inherited


def test_payload_of_an_edit_and_the_default_model(fake: Harness, hooks: Hooks) -> None:
    """replace_file_content's full args (§B2); modelName without --model."""
    Hooks.write(fake.cwd, hooks.gate("allow", matcher="replace_file_content"))
    (fake.cwd / "notes.txt").write_text("first line\nsecond line\n")
    done = fake.run(
        [*STREAM, "--add-dir", str(fake.cwd), SKIP],
        [user("[fake-agy:edit] notes.txt")],
        FAKE_AGY_EDIT_DELAY="0",
    )
    assert done.code == 0
    [call] = hooks.calls()
    assert call["payload"]["modelName"] == DEFAULT_MODEL_NAME
    assert call["payload"]["toolCall"] == {
        "name": "replace_file_content",
        "args": {
            "TargetFile": str(fake.cwd / "notes.txt"),
            "TargetContent": "first line",
            "ReplacementContent": f"first line{EDIT_SUFFIX}",
            "StartLine": 1,
            "EndLine": 1,
            "AllowMultiple": False,
            "Instruction": "Append a marker to the first line.",
            "Description": "Mark the first line as edited.",
        },
    }


#: Scenario -> the tools whose steps go through the hooks (finish never does, §A5).
HOOKED_TOOLS = {
    "tool": ["run_command"],
    "tool-error": ["run_command"],
    "soft-deny": ["run_command"],
    "edit": ["write_to_file", "replace_file_content"],
    "multi-tool": ["view_file", "grep_search", "run_command", "write_to_file"],
    "permission-tool": ["run_command", "write_to_file", "view_file"],
    "gated-command": ["run_command"],
    "image-out": ["generate_image"],
    "big-output": ["run_command"],
    "unknown-events": ["run_command"],
    "schema": [],
}


@pytest.mark.parametrize("scenario", sorted(HOOKED_TOOLS))
def test_every_tool_step_has_one_hook_call(fake: Harness, hooks: Hooks, scenario: str) -> None:
    """Per-step correlation (§A10.5): each gated tool step had exactly one hook call with
    its step_index, before it finished."""
    Hooks.write(fake.cwd, hooks.gate("allow"))
    done = fake.run(
        [*STREAM, "--add-dir", str(fake.cwd), SKIP],
        [user(f"[fake-agy:{scenario}]")],
        FAKE_AGY_EDIT_DELAY="0",
    )
    assert done.code == 0, done.stderr
    gated = [
        (s["tool_name"], s["step_index"])
        for s in tool_updates(done)
        if s["state"] == "ACTIVE" and s["tool_name"] != "finish"
    ]
    calls = [(c["payload"]["toolCall"]["name"], c["payload"]["stepIdx"]) for c in hooks.calls()]
    assert calls == gated
    assert [name for name, _ in calls] == HOOKED_TOOLS[scenario]


# --- the answer (§A4, §A5, §A6) ---------------------------------------------------------

#: mode -> (tool runs?, tool_info.error.message when blocked, the model's reply).
OUTCOMES: dict[str, tuple[bool, str | None, str | None]] = {
    "allow": (True, None, None),
    "raw:": (True, None, None),
    "raw:  \n": (True, None, None),
    "raw:" + '{"decision":"deny_unless_prior_grant"}': (True, None, None),
    "deny:not in the allowed set": (
        False,
        "tool call denied by pre-tool hook: not in the allowed set",
        "The tool call was denied: not in the allowed set",
    ),
    "raw:{}": (False, "tool call denied by pre-tool hook: ", "The tool call was denied."),
    'raw:{"decision":"ask"}': (
        False,
        "tool call denied by pre-tool hook: ",
        "The tool call was denied.",
    ),
    "exit:3:boom\n": (
        False,
        f'JSON hook "{GATE_ID}" failed: command failed: exit status 3, stderr: boom',
        f'The tool call failed: JSON hook "{GATE_ID}" failed: command failed: exit status 3, '
        "stderr: boom",
    ),
    "exit:1:": (False, f'JSON hook "{GATE_ID}" failed: command failed: exit status 1', None),
    "raw:not json": (
        False,
        f'JSON hook "{GATE_ID}" failed: failed to unmarshal result from hook "{GATE_ID}" '
        "via protojson: ",
        None,
    ),
}


@pytest.mark.parametrize("mode", list(OUTCOMES))
def test_hook_answer_decides_the_edit(fake: Harness, hooks: Hooks, mode: str) -> None:
    """allow (or empty stdout) runs the tool; deny, `{}`, a failed handler block it: the
    step ends ERROR with agy's message, the file is untouched, the model explains, the
    turn is SUCCESS (1.2.x, §A6)."""
    runs, message, reply = OUTCOMES[mode]
    Hooks.write(fake.cwd, hooks.gate(mode, matcher="replace_file_content"))
    target = fake.cwd / "notes.txt"
    target.write_text("first line\nsecond line\n")
    done = fake.run(
        [*STREAM, "--add-dir", str(fake.cwd), SKIP],
        [user("[fake-agy:edit] notes.txt")],
        FAKE_AGY_EDIT_DELAY="0",
    )
    assert done.code == 0 and done.stderr == ""
    [(steps, result)] = split_turns(done.events)
    assert result["status"] == "SUCCESS" and "error" not in result
    step = final_tool_states(done)["replace_file_content"]
    if runs:
        assert step["state"] == "DONE"
        assert target.read_text() == f"first line{EDIT_SUFFIX}\nsecond line\n"
        return
    assert target.read_text() == "first line\nsecond line\n"
    assert step["state"] == "ERROR"
    assert step["tool_info"] == {
        "name": "replace_file_content",
        "parameters": {"TargetFile": str(target)},
        "error": {"type": "TOOL_ERROR", "message": step["tool_info"]["error"]["message"]},
    }
    actual = step["tool_info"]["error"]["message"]
    assert message is not None and actual.startswith(message)
    if not mode.startswith("raw:not"):
        assert actual == message
    assert result["response"] == f"{reply or f'The tool call failed: {actual}'}\n"
    kinds = [s["step_type"] for s in steps]
    assert kinds[-1] == "agent_response" and steps[-1]["state"] == "DONE"


def test_a_hook_timeout_kills_its_process_group(fake: Harness, hooks: Hooks) -> None:
    """Over its `timeout` the handler's group is killed (grandchildren too), the step ends
    ERROR `… failed: command failed: signal: killed` and the tool does not run (§A5)."""
    Hooks.write(fake.cwd, hooks.gate("hang", timeout=1))
    started = time.monotonic()
    done = fake.run(
        [*STREAM, "--add-dir", str(fake.cwd), SKIP], [user("[fake-agy:permission-tool]")]
    )
    assert 1 <= time.monotonic() - started < DEADLINE_S
    assert done.code == 0
    states = final_tool_states(done)
    assert states["run_command"]["tool_info"]["error"]["message"] == (
        f'JSON hook "{GATE_ID}" failed: command failed: signal: killed'
    )
    assert [s["state"] for s in states.values()] == ["ERROR"] * 3
    assert not (fake.cwd / PERMISSION_FILE).exists()
    assert marked_pids(fake.marker) == []  # neither handler nor its `sleep` survived


def test_any_deny_wins_and_every_matching_handler_runs(
    fake: Harness, hooks: Hooks, tmp_path: Path
) -> None:
    """A user-level allow and a workspace deny: denied; both handlers were called, and
    the handler id names the group and handler index (§A1, §A2)."""
    Hooks.write(fake.home / ".gemini" / "config", hooks.gate("allow", name="user"), sub="")
    config = {
        "ws": {
            "PreToolUse": [
                {"matcher": "view_file", "hooks": [hooks.handler("allow")]},
                {"matcher": "*", "hooks": [hooks.handler("allow"), hooks.handler("exit:2:no")]},
            ]
        }
    }
    Hooks.write(fake.cwd, config)
    done = fake.run([*STREAM, "--add-dir", str(fake.cwd), SKIP], [user("[fake-agy:tool]")])
    step = final_tool_states(done)["run_command"]
    assert step["tool_info"]["error"]["message"] == (
        'JSON hook "jsonhook__ws_PreToolUse_1_1" failed: command failed: exit status 2, stderr: no'
    )
    assert [c["mode"] for c in hooks.calls()] == ["allow", "allow", "exit:2:no"]
    assert done.results()[0]["status"] == "SUCCESS"


def test_a_disabled_hook_does_not_run(fake: Harness, hooks: Hooks) -> None:
    """`enabled: false` skips the hook (it is still listed, disabled)."""
    config = hooks.gate("deny:no")
    config["gate"]["enabled"] = False
    Hooks.write(fake.cwd, config)
    done = fake.run([*STREAM, "--add-dir", str(fake.cwd), SKIP], [user("[fake-agy:tool]")])
    assert final_tool_states(done)["run_command"]["state"] == "DONE"
    assert hooks.calls() == []
    [hook] = listing(hooks_command(fake, fake.cwd))
    assert hook["enabled"] is False


def test_several_decisions_in_one_permission_turn(fake: Harness, tmp_path: Path) -> None:
    """permission-tool: allow the command, deny the write, allow the read (of a file that
    then does not exist): three outcomes, one SUCCESS turn."""
    script = tmp_path / "policy.py"
    script.write_text(
        "import json, sys\n"
        "name = json.load(sys.stdin)['toolCall']['name']\n"
        "print(json.dumps({'decision': 'deny', 'reason': 'no writes'}"
        " if name == 'write_to_file' else {'decision': 'allow'}))\n"
    )
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    Hooks.write(fake.cwd, {"gate": {"PreToolUse": [{"hooks": [{"command": command}]}]}})
    done = fake.run(
        [*STREAM, "--add-dir", str(fake.cwd), SKIP], [user("[fake-agy:permission-tool]")]
    )
    states = final_tool_states(done)
    assert states["run_command"]["state"] == "DONE"
    assert states["run_command"]["tool_info"]["output"] == TOOL_OUTPUT
    assert states["write_to_file"]["tool_info"]["error"]["message"] == (
        "tool call denied by pre-tool hook: no writes"
    )
    assert states["view_file"]["state"] == "ERROR"
    assert not (fake.cwd / PERMISSION_FILE).exists()
    [result] = done.results()
    assert result["status"] == "SUCCESS"
    assert "write_to_file: The tool call was denied: no writes" in result["response"]


def test_permission_tool_without_hooks_runs_all_three(fake: Harness) -> None:
    """Skip-permissions and no hooks: command, write and read all run."""
    done = fake.run([*STREAM, SKIP], [user("[fake-agy:permission-tool]")])
    states = final_tool_states(done)
    assert [s["state"] for s in states.values()] == ["DONE"] * 3
    assert (fake.cwd / PERMISSION_FILE).read_text() == PERMISSION_CONTENT
    lines = len(PERMISSION_CONTENT.splitlines())
    assert states["view_file"]["tool_info"]["output"] == (
        f"{lines} lines, {len(PERMISSION_CONTENT)} bytes"
    )


# --- agy's own check after the hook (§A7) ----------------------------------------------


def test_allow_cannot_lift_a_soft_deny(fake: Harness, hooks: Hooks) -> None:
    """request-review: the hook runs and allows, agy still soft-denies the command."""
    Hooks.write(fake.cwd, hooks.gate("allow"))
    done = fake.run([*STREAM, "--add-dir", str(fake.cwd)], [user("[fake-agy:soft-deny]")])
    assert [c["payload"]["toolCall"]["name"] for c in hooks.calls()] == ["run_command"]
    [result] = done.results()
    assert result["denied_actions"] == [{"action": "command", "display_name": "RunCommand"}]
    assert result["response"] == "" and done.stderr == f"{SOFT_DENY_NOTICE}\n"
    assert "output" not in final_tool_states(done)["run_command"]["tool_info"]


def test_a_deny_comes_before_the_soft_deny(fake: Harness, hooks: Hooks) -> None:
    """request-review with a denying hook: the hook's denial, no denied_actions."""
    Hooks.write(fake.cwd, hooks.gate("deny:nope"))
    done = fake.run([*STREAM, "--add-dir", str(fake.cwd)], [user("[fake-agy:soft-deny]")])
    [result] = done.results()
    assert "denied_actions" not in result and done.stderr == ""
    assert final_tool_states(done)["run_command"]["state"] == "ERROR"


@pytest.mark.parametrize(
    ("knob", "skip", "denied"),
    [("1", False, True), ("1", True, False), ("", False, False)],
)
def test_commands_need_approval_knob(fake: Harness, knob: str, skip: bool, denied: bool) -> None:
    """FAKE_AGY_COMMANDS_NEED_APPROVAL=1: a `tool` run_command is soft-denied in
    request-review mode; --dangerously-skip-permissions lets it run; off by default."""
    args = [*STREAM, SKIP] if skip else STREAM
    done = fake.run(args, [user("[fake-agy:tool]")], FAKE_AGY_COMMANDS_NEED_APPROVAL=knob)
    [result] = done.results()
    assert ("denied_actions" in result) is denied
    assert ("output" in final_tool_states(done)["run_command"]["tool_info"]) is not denied


@pytest.mark.parametrize(
    ("setting", "skip", "mode", "denied"),
    [
        ("always-proceed", False, "always-proceed", False),
        ("strict", False, "strict", True),
        ("strict", True, "always-proceed", False),
    ],
)
def test_tool_permission_knob_is_init_permission_mode(
    fake: Harness, setting: str, skip: bool, mode: str, denied: bool
) -> None:
    """FAKE_AGY_TOOL_PERMISSION stands for settings.json's toolPermission: init
    reports it (the flag wins, contract.md §1.1), and always-proceed denies nothing."""
    args = [*STREAM, SKIP] if skip else STREAM
    done = fake.run(args, [user("[fake-agy:soft-deny]")], FAKE_AGY_TOOL_PERMISSION=setting)
    assert done.events[0]["init"]["permission_mode"] == mode
    assert ("denied_actions" in done.results()[0]) is denied


def test_deny_always_knob_denies_even_with_skip_permissions(fake: Harness) -> None:
    """FAKE_AGY_DENY_ALWAYS=1: a denial no allowance lifts (agy's protection
    boundary, hooks-and-tools.md §A6): soft-denied under always-proceed too."""
    done = fake.run([*STREAM, SKIP], [user("[fake-agy:soft-deny]")], FAKE_AGY_DENY_ALWAYS="1")
    assert done.events[0]["init"]["permission_mode"] == "always-proceed"
    assert done.results()[0]["denied_actions"] == [
        {"action": "command", "display_name": "RunCommand"}
    ]


def test_permission_tool_stops_at_the_soft_denied_command(fake: Harness) -> None:
    """Without skip-permissions the command is soft-denied and the turn ends (1.3.x)."""
    done = fake.run(STREAM, [user("[fake-agy:permission-tool]")])
    assert list(final_tool_states(done)) == ["run_command"]
    assert done.results()[0]["denied_actions"]
    assert not (fake.cwd / PERMISSION_FILE).exists()


# --- while a hook runs (§A5) -----------------------------------------------------------


def _read_nothing_for(live: Live, seconds: float) -> bytes:
    """Bytes the fake printed within ``seconds`` (it should print none)."""
    assert live.proc.stdout is not None
    fd = live.proc.stdout.fileno()
    ready, _, _ = select.select([fd], [], [], seconds)
    return bytes(live.pending()) + (os.read(fd, 1 << 16) if ready else b"")


def test_active_comes_first_and_the_turn_waits_for_the_hook(
    fake: Harness, hooks: Hooks, tmp_path: Path
) -> None:
    """The tool's ACTIVE line is out before the handler runs; nothing follows while it
    waits; the file changes only after the allow."""
    go = tmp_path / "go"
    Hooks.write(fake.cwd, hooks.gate(f"wait:{go}", matcher="replace_file_content"))
    target = fake.cwd / "notes.txt"
    target.write_text("first line\n")
    live = fake.start([*STREAM, "--add-dir", str(fake.cwd), SKIP], FAKE_AGY_EDIT_DELAY="0")
    live.send(user("[fake-agy:edit] notes.txt"))
    active = live.until(lambda e: e.get("step_update", {}).get("step_type") == "tool")[-1]
    assert active["step_update"]["state"] == "ACTIVE"
    deadline = time.monotonic() + DEADLINE_S
    while not hooks.calls():
        assert time.monotonic() < deadline, "the hook never ran"
        time.sleep(0.01)
    assert hooks.calls()[0]["payload"]["stepIdx"] == active["step_update"]["step_index"]
    assert _read_nothing_for(live, 0.3) == b""
    assert target.read_text() == "first line\n"
    go.touch()
    live.until(lambda e: e.get("event") == "result")
    done = live.finish()
    assert done.code == 0
    assert target.read_text() == f"first line{EDIT_SUFFIX}\n"


@pytest.mark.parametrize(
    ("signum", "error", "line"),
    [
        (signal.SIGINT, "interrupted", "error: interrupted"),
        (signal.SIGTERM, "context canceled", "context canceled"),
    ],
)
def test_a_signal_while_a_hook_runs_kills_it(
    fake: Harness, hooks: Hooks, signum: int, error: str, line: str
) -> None:
    """SIGINT/SIGTERM mid-hook: the handler group dies, the turn ends as usual (§5)."""
    Hooks.write(fake.cwd, hooks.gate("hang", timeout=60))
    live = fake.start([*STREAM, "--add-dir", str(fake.cwd), SKIP])
    live.send(user("[fake-agy:tool]"))
    live.until(lambda e: e.get("step_update", {}).get("step_type") == "tool")
    deadline = time.monotonic() + DEADLINE_S
    while not hooks.calls():
        assert time.monotonic() < deadline, "the hook never ran"
        time.sleep(0.01)
    live.proc.send_signal(signum)
    events = live.until(lambda e: e.get("event") == "result")
    assert events[-1]["result"]["status"] == "ERROR"
    assert events[-1]["result"]["error"] == error
    done = live.finish()
    assert done.code == 1 and done.stderr == f"{line}\n"
    hook_pid = hooks.calls()[0]["pid"]
    assert hook_pid not in marked_pids(fake.marker)
    assert marked_pids(fake.marker) == []


def test_print_timeout_while_a_hook_runs(fake: Harness, hooks: Hooks) -> None:
    """--print-timeout expiring mid-hook kills it and ends the turn as usual (§4)."""
    Hooks.write(fake.cwd, hooks.gate("hang", timeout=60))
    done = fake.run(
        [*STREAM, "--add-dir", str(fake.cwd), SKIP, "--print-timeout", "1s"],
        [user("[fake-agy:tool]")],
    )
    assert done.code == 0
    assert done.results()[0]["status"] == "ERROR"
    assert done.stderr.startswith("[agy] print timeout (1s) reached")
    assert marked_pids(fake.marker) == []


# --- pure helpers ------------------------------------------------------------------------


def test_parse_hooks_file_details() -> None:
    """Go decoding details: last duplicate wins, null fields, flat vs grouped events."""
    text = (
        '{"a": {"enabled": null, "Stop": [{"command": "x", "timeout": 0}],'
        ' "PreToolUse": null}, "b": {}, "a": {"enabled": false}}'
    )
    hooks = parse_hooks_file(text, "/w/.agents/hooks.json")
    assert [(h.name, h.enabled, len(h.actions)) for h in hooks] == [("b", True, 0), ("a", False, 0)]
    [hook] = parse_hooks_file('{"a": {"ENABLED": true, "stop": [{"command": "x"}]}}', "/f")
    [action] = hook.actions
    assert (action.event, action.matcher, action.handler.timeout_s) == ("Stop", None, 30)
    assert hook.cwd == "/"
    with pytest.raises(HooksFileError):
        parse_hooks_file('{"a": {"Stop": [{"timeout": true}]}}', "/f")
    assert parse_hooks_file("null", "/f") == []


def test_verdicts() -> None:
    """Signals other than the timeout kill are named the Go way."""
    verdict = verdict_of("h", HandlerRun(-signal.SIGTERM), skip_permissions=True)
    assert verdict.message == 'JSON hook "h" failed: command failed: signal: terminated'
    verdict = verdict_of(
        "h", HandlerRun(0, stdout=b'{"decision":"deny_unless_prior_grant"}'), skip_permissions=False
    )
    assert (verdict.allowed, verdict.message) == (False, "tool call denied by pre-tool hook: ")
    verdict = verdict_of("h", HandlerRun(0, stdout=b'{"decision":1}'), skip_permissions=True)
    assert verdict.kind == "error"
    verdict = verdict_of("h", HandlerRun(0, stdout=b"[]"), skip_permissions=True)
    assert verdict.kind == "error"


# --- ask_question ----------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["none", "allow"])
def test_ask_question_unanswered_is_settled_by_agy(fake: Harness, hooks: Hooks, mode: str) -> None:
    """No hook, or a hook that allows: the call is one ``unknown`` DONE step and the
    reply is the one agy 1.3.1 gave when nobody answered (the capture's)."""
    if mode != "none":
        Hooks.write(fake.cwd, hooks.gate(mode))
    done = fake.run([*STREAM, "--add-dir", str(fake.cwd), SKIP], [user("[fake-agy:ask-question]")])
    assert done.code == 0, done.stderr
    kinds = [(s["step_type"], s["state"]) for s in done.steps()]
    assert ("unknown", "DONE") in kinds and ("tool", "ACTIVE") not in kinds
    [result] = done.results()
    assert result["response"] == QUESTION_SKIPPED_REPLY + "\n"
    assert len(hooks.calls()) == (0 if mode == "none" else 1)


def test_ask_question_hook_payload_and_deny_reason(fake: Harness, hooks: Hooks) -> None:
    """The hook gets the tool's full arguments (§B2) on the step index of the unknown
    step; a deny's reason reaches the model as the tool error it reads (§A4, §A6)."""
    Hooks.write(fake.cwd, hooks.gate("deny:the user answered: blue"))
    done = fake.run(
        [*STREAM, "--add-dir", str(fake.cwd), SKIP], [user("[fake-agy:ask-question] two multi")]
    )
    assert done.code == 0, done.stderr
    [call] = hooks.calls()
    assert call["payload"]["toolCall"] == {
        "name": "ask_question",
        "args": {
            "questions": [
                {"question": QUESTION, "options": list(QUESTION_OPTIONS), "is_multi_select": True},
                {
                    "question": SECOND_QUESTION,
                    "options": list(SECOND_OPTIONS),
                    "is_multi_select": False,
                },
            ]
        },
    }
    [unknown] = [s for s in done.steps() if s["step_type"] == "unknown"]
    assert unknown["step_index"] == call["payload"]["stepIdx"]
    [result] = done.results()
    assert result["status"] == "SUCCESS"
    assert result["response"] == (
        QUESTION_ANSWERED_PREFIX + "tool call denied by pre-tool hook: the user answered: blue\n"
    )
