"""Every line the fake agy prints has a shape some real capture has (contract.md §3).

The "shape" of a line is, for each nested object, the set of its keys with their JSON
value types, under a context: the event name, and for ``step_update`` the step type (with
the tool name for tool steps) and state. The shapes seen in ``shared/agy/samples`` are the
vocabulary; the fake is run through every scenario and many flag/input variants, and a
key or type the captures never show fails the test unless ``ALLOWED_EXTRA`` lists it with
the contract section that documents it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fake_agy._fake_scenarios import (
    SCENARIOS,
    UNKNOWN_EVENT,
    UNKNOWN_STATE,
    UNKNOWN_STEP_TYPE,
)

from ..conftest import REPO, SAMPLES

COMMAND = [sys.executable, "-m", "fake_agy"]
STREAM = ["--input-format", "stream-json", "--output-format", "stream-json"]
DEADLINE_S = 15.0

#: Documented fields no capture shows. Keep this list small; each entry names its source.
ALLOWED_EXTRA: dict[str, str] = {
    # contract.md §3.1: init carries `agent` only when --agent is given [DOC; KAO-CLI].
    "init.init.agent": "§3.1",
    # hooks-and-tools.md §A2: `agy -p /hooks --output-format json` answers with
    # `command.data.hooks[]` on the result envelope [GOBBY rec. 1.1.21; KAO-CLI].
    "envelope.command": "hooks-and-tools.md §A2",
    # The same under stream-json: a `command_result` line, then the result with `command`
    # ([GOBBY] command-captures.json, the 1.1.18 stream-json form of a CLI command).
    "command_result": "hooks-and-tools.md §A2 [GOBBY]",
    "result.result.command": "hooks-and-tools.md §A2 [GOBBY]",
}

#: Paths whose contents are the user's data, not agy's vocabulary: the schema given with
#: --json-schema, the object answering it (contract.md §3.1, §3.5), and the finish tool's
#: arguments, which are that object (samples/untether-1.3.1-json-schema-finish).
FREE_FORM = (
    "init.init.json_schema.",
    "result.result.structured_output.",
    "step_update[tool:finish/ACTIVE].step_update.tool_info.parameters.",
)

#: Tools no capture shows a step of. Their steps are checked against the union of the
#: captured tool steps in the same state (the tool_info envelope of contract.md §3.4:
#: name, parameters?, output?, error?), with `parameters` limited to the keys
#: hooks-and-tools.md §B2 documents for the tool (stream column; generate_image's stream
#: parameters were never seen, so its documented full arguments).
DOCUMENTED_TOOL_PARAMETERS: dict[str, dict[str, str]] = {
    "grep_search": {"Query": "string", "SearchPath": "string"},  # §B2 grep_search row
    "generate_image": {"ImageName": "string"},  # §B2 generate_image row (full args)
}
#: Captured tools in a state no capture shows, checked against the union of the captured
#: tool steps in that state with the tool's stream parameters. hooks-and-tools.md §A6: a
#: hook-denied tool step ends ERROR with `tool_info.error{type,message}`; §B2: that is the
#: only error shape, and write_to_file's stream parameters are `TargetFile`.
DOCUMENTED_TOOL_STATES: dict[str, dict[str, str]] = {
    "step_update[tool:write_to_file/ERROR]": {"TargetFile": "string"},
    "step_update[tool:view_file/ERROR]": {"AbsolutePath": "string"},
    "step_update[tool:replace_file_content/ERROR]": {"TargetFile": "string"},
}
#: Step contexts no capture shows, checked like a captured one (context -> the captured
#: context it is shaped like). Empty since the 1.3.1 captures show `finish` DONE.
DOCUMENTED_CONTEXTS: dict[str, str] = {}

#: Scenarios whose stdout legitimately contains non-JSON text (contract.md §8.16, §9).
NON_JSON_SCENARIOS = {"noise", "truncated", "unknown-events"}
#: Lines `unknown-events` prints outside the known vocabulary on purpose (§3.3, §10.3).
DELIBERATELY_UNKNOWN = (
    f'"event":"{UNKNOWN_EVENT}"',
    f'"step_type":"{UNKNOWN_STEP_TYPE}"',
    f'"state":"{UNKNOWN_STATE}"',
)

Shape = dict[str, dict[str, set[str]]]


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "array" if isinstance(value, list) else "object"


def context_of(event: dict[str, Any]) -> str:
    """The shape context: event name; step_update by step type (tool name) and state."""
    name = event.get("event")
    if name is None:
        return "envelope"  # --output-format json: result fields without a wrapper (§3.7)
    if name != "step_update":
        return str(name)
    step = event.get("step_update", {})
    kind = step.get("step_type")
    if kind == "tool":
        kind = f"tool:{step.get('tool_name')}"
    return f"step_update[{kind}/{step.get('state')}]"


def collect(value: Any, path: str, into: Shape) -> None:
    """Record the keys and value types of every object under ``path``."""
    if isinstance(value, dict):
        keys = into.setdefault(path, {})
        for key, item in value.items():
            keys.setdefault(key, set()).add(json_type(item))
            collect(item, f"{path}.{key}", into)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, dict | list):
                collect(item, f"{path}[]", into)
            else:
                into.setdefault(f"{path}[]", {}).setdefault("*", set()).add(json_type(item))


def shape_of(event: dict[str, Any]) -> Shape:
    shape: Shape = {}
    collect(event, context_of(event), shape)
    return shape


def allowed(path: str) -> bool:
    return any(
        path == entry or path.startswith((f"{entry}.", f"{entry}[")) for entry in ALLOWED_EXTRA
    )


def with_documented(known: Shape) -> Shape:
    """``known`` plus the documented-but-uncaptured contexts (see the tables above)."""
    merged: Shape = {path: {k: set(t) for k, t in keys.items()} for path, keys in known.items()}
    for state in ("ACTIVE", "DONE", "ERROR"):
        generic: Shape = {}
        for path, keys in known.items():
            head, _, rest = path.partition("]")
            if head.startswith("step_update[tool:") and head.endswith(f"/{state}"):
                for key, types in keys.items():
                    generic.setdefault(rest, {}).setdefault(key, set()).update(types)
        documented = list(DOCUMENTED_TOOL_PARAMETERS.items())
        documented += [
            (context.removeprefix("step_update[tool:").partition("/")[0], parameters)
            for context, parameters in DOCUMENTED_TOOL_STATES.items()
            if context.endswith(f"/{state}]")
        ]
        for tool, parameters in documented:
            context = f"step_update[tool:{tool}/{state}]"
            if context in known:
                continue
            for rest, keys in generic.items():
                if rest == ".step_update.tool_info.parameters":
                    merged[context + rest] = {key: {kind} for key, kind in parameters.items()}
                else:
                    merged[context + rest] = {k: set(t) for k, t in keys.items()}
    for context, like in DOCUMENTED_CONTEXTS.items():
        for path, keys in known.items():
            if path == like or path.startswith((f"{like}.", f"{like}[")):
                merged[context + path[len(like) :]] = {k: set(t) for k, t in keys.items()}
    return merged


def violations(shape: Shape, known: Shape) -> list[str]:
    """Keys/types in ``shape`` that no capture shows and the allow-list does not cover."""
    found = []
    for path, keys in shape.items():
        for key, types in keys.items():
            full = f"{path}.{key}" if key != "*" else path
            if allowed(full) or allowed(path) or f"{path}.".startswith(FREE_FORM):
                continue
            seen = known.get(path, {}).get(key)
            if seen is None:
                found.append(f"{full}: never captured")
            elif not types <= seen:
                found.append(f"{full}: types {sorted(types)} vs captured {sorted(seen)}")
    return found


@pytest.fixture(scope="module")
def known() -> Shape:
    """The union of shapes over every stdout line of every capture."""
    shapes: Shape = {}
    for capture in sorted(SAMPLES.glob("*.ndjson")):
        for line in capture.read_text().splitlines():
            if not line.strip():
                continue
            event = json.loads(line)
            if event.get("event") == "user":
                continue  # stdin lines (official-docs-stdin-two-turn-input), not agy output
            for path, keys in shape_of(event).items():
                for key, types in keys.items():
                    shapes.setdefault(path, {}).setdefault(key, set()).update(types)
    return shapes


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_AGY_", "AGY_"))}
    (tmp_path / "home").mkdir()
    base.update(
        HOME=str(tmp_path / "home"),
        PYTHONPATH=str(REPO),
        FAKE_AGY_STATE_DIR=str(tmp_path / "state"),
        FAKE_AGY_FRAGMENT_DELAY="0",
        FAKE_AGY_SLOW_INTERVAL="0.02",
        FAKE_AGY_SLOW_SECONDS="0.1",
        FAKE_AGY_SPAWN_CHILDREN="0",
    )
    yield base


def user(text: str) -> str:
    return json.dumps({"event": "user", "message": {"content": text}})


def run(args: list[str], lines: list[str], env: dict[str, str], cwd: Path) -> list[str]:
    proc = subprocess.run(
        [*COMMAND, *args],
        input="".join(f"{line}\n" for line in lines).encode(),
        capture_output=True,
        env=env,
        cwd=cwd,
        timeout=DEADLINE_S,
        check=False,
    )
    return proc.stdout.decode().splitlines()


def check_lines(
    lines: list[str], known: Shape, *, non_json_ok: bool = False, unknown_ok: bool = False
) -> None:
    assert lines, "the fake printed nothing"
    vocabulary = with_documented(known)
    problems = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            assert non_json_ok, f"non-JSON stdout line: {line[:200]!r}"
            continue
        if unknown_ok and any(marker in line for marker in DELIBERATELY_UNKNOWN):
            continue
        problems += [f"{p}  <- {line[:160]}" for p in violations(shape_of(event), vocabulary)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_every_scenario_emits_captured_shapes(
    scenario: str, known: Shape, env: dict[str, str], tmp_path: Path
) -> None:
    """Each scenario, over two turns, prints only shapes the captures show."""
    env["FAKE_AGY_SCENARIO"] = f"echo,{scenario}" if scenario == "unavailable" else scenario
    lines = run(STREAM, [user("first"), user("second")], env, tmp_path)
    check_lines(
        lines,
        known,
        non_json_ok=scenario in NON_JSON_SCENARIOS,
        unknown_ok=scenario == "unknown-events",
    )
    if scenario == "unavailable":  # first in the list: the pre-turn (no init) form
        env["FAKE_AGY_SCENARIO"] = scenario
        check_lines(run(STREAM, [user("x")], env, tmp_path), known)


VARIANTS: dict[str, tuple[list[str], list[str], dict[str, str]]] = {
    "model-agent-skip": (
        [
            *STREAM,
            "--model",
            "Gemini 3.7 Flash (Low)",
            "--agent",
            "reviewer",
            "--dangerously-skip-permissions",
        ],
        [user("hi")],
        {},
    ),
    "json-schema": (
        [*STREAM, "--json-schema", '{"type":"object","properties":{"a":{"type":"string"}}}'],
        [user("hi")],
        {},
    ),
    "soft-deny-skip": (
        [*STREAM, "--dangerously-skip-permissions"],
        [user("x")],
        {"FAKE_AGY_SCENARIO": "soft-deny"},
    ),
    "invalid-model": ([*STREAM, "--model", "nope"], [user("x")], {}),
    "bad-schema": ([*STREAM, "--json-schema", "string"], [], {}),
    "lazy-init": (STREAM, [user("x")], {"FAKE_AGY_LAZY_INIT": "1"}),
    "signed-out": (STREAM, [user("x")], {"FAKE_AGY_SIGNED_OUT": "1"}),
    # agy 1.3.x (contract.md §11): init.model always; signed out without init; the JSON
    # answer streamed with agy's internal keys; the 1.2.x soft-deny under skip-permissions.
    "init-model-1.3.2": (STREAM, [user("hi"), user("again")], {"FAKE_AGY_VERSION": "1.3.2"}),
    "signed-out-1.3.2": (
        STREAM,
        [user("x")],
        {"FAKE_AGY_SIGNED_OUT": "1", "FAKE_AGY_VERSION": "1.3.2"},
    ),
    "schema-stream-1.3.1": (
        [*STREAM, "--json-schema", '{"type":"object","properties":{"n":{"type":"integer"}}}'],
        [user("[fake-agy:schema] stream")],
        {},
    ),
    "permission-check-failed-skip": (
        [*STREAM, "--dangerously-skip-permissions"],
        [user("x")],
        {"FAKE_AGY_SCENARIO": "permission-check-failed"},
    ),
    "quota-continue": (
        STREAM,
        [user("x"), user("y")],
        {"FAKE_AGY_SCENARIO": "quota,echo", "FAKE_AGY_QUOTA_CONTINUE": "1"},
    ),
    "one-shot-stream": (["-p", "hi", "--output-format", "stream-json"], [], {}),
    "one-shot-json": (["-p", "hi", "--output-format", "json"], [], {}),
    "missing-event": (STREAM, [user("ok"), '{"type":"user"}'], {}),
    "missing-message": (STREAM, ['{"event":"user"}'], {}),
    "no-content": (STREAM, ['{"event":"user","message":{}}'], {}),
    "invalid-json": (STREAM, ["{nope"], {}),
    "image-block": (STREAM, ['{"event":"user","message":{"content":[{"type":"image"}]}}'], {}),
    "control-request": (STREAM, ['{"event":"control_request"}'], {}),
    "slash-model": (STREAM, [user("/model")], {}),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_flag_and_input_variants_emit_captured_shapes(
    variant: str, known: Shape, env: dict[str, str], tmp_path: Path
) -> None:
    """Flags, pre-turn failures and input-validation results print captured shapes."""
    args, lines, extra = VARIANTS[variant]
    check_lines(run(args, lines, {**env, **extra}, tmp_path), known)


def test_resumed_conversation_emits_captured_shapes(
    known: Shape, env: dict[str, str], tmp_path: Path
) -> None:
    """A --conversation resume prints captured shapes too."""
    first = run(STREAM, [user("one")], env, tmp_path)
    cid = json.loads(first[0])["conversation_id"]
    check_lines(run([*STREAM, "--conversation", cid], [user("two")], env, tmp_path), known)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_result_has_a_captured_shape(
    signum: int, known: Shape, env: dict[str, str], tmp_path: Path
) -> None:
    """The ERROR result written on SIGINT/SIGTERM mid-turn has a captured shape."""
    env.update(FAKE_AGY_SCENARIO="slow", FAKE_AGY_SLOW_SECONDS="30")
    proc = subprocess.Popen(
        [*COMMAND, *STREAM],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(f"{user('go')}\n".encode())
        proc.stdin.flush()
        output, deadline, signalled = b"", time.monotonic() + DEADLINE_S, False
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, "timed out"
            ready, _, _ = select.select([proc.stdout], [], [], remaining)
            chunk = os.read(proc.stdout.fileno(), 1 << 16) if ready else b""
            if ready and not chunk:
                break
            output += chunk
            if not signalled and b'"state":"ACTIVE"' in output:
                proc.send_signal(signum)
                signalled = True
        assert proc.wait(timeout=DEADLINE_S) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
    lines = output.decode().splitlines()
    assert json.loads(lines[-1])["result"]["status"] == "ERROR"
    check_lines(lines, known)


#: PreToolUse hook answers for the hook shape test: a deny, and a failing handler.
HOOK_ANSWERS = {
    "deny": 'echo \'{"decision":"deny","reason":"not now"}\'',
    "exit": "echo boom >&2; exit 2",
}
#: Scenarios whose tool steps cover every tool the fake gates.
HOOKED_SCENARIOS = ("permission-tool", "edit", "multi-tool", "image-out", "tool", "soft-deny")


@pytest.mark.parametrize("answer", sorted(HOOK_ANSWERS))
@pytest.mark.parametrize("scenario", HOOKED_SCENARIOS)
def test_hook_blocked_tools_emit_captured_shapes(
    scenario: str, answer: str, known: Shape, env: dict[str, str], tmp_path: Path
) -> None:
    """Tool steps a PreToolUse hook blocks (deny or failure) print documented shapes, with
    and without --dangerously-skip-permissions (hooks-and-tools.md §A6)."""
    root = tmp_path / "ws"
    (root / ".agents").mkdir(parents=True)
    hook = {"type": "command", "command": HOOK_ANSWERS[answer], "timeout": 10}
    config = {"gate": {"PreToolUse": [{"matcher": "*", "hooks": [hook]}]}}
    (root / ".agents" / "hooks.json").write_text(json.dumps(config))
    env["FAKE_AGY_SCENARIO"] = scenario
    for extra in ([], ["--dangerously-skip-permissions"]):
        lines = run([*STREAM, "--add-dir", str(root), *extra], [user("x")], env, tmp_path)
        assert any('"state":"ERROR"' in line for line in lines), lines
        check_lines(lines, known)


@pytest.mark.parametrize("output_format", ["json", "stream-json"])
def test_hooks_command_emits_documented_shapes(
    output_format: str, known: Shape, env: dict[str, str], tmp_path: Path
) -> None:
    """`-p /hooks` prints the captured result shape plus the documented `command`."""
    root = tmp_path / "ws"
    (root / ".agents").mkdir(parents=True)
    config = {
        "gate": {
            "PreToolUse": [{"matcher": "*", "hooks": [{"command": "true", "timeout": 5}]}],
            "Stop": [{"command": "true"}],
        }
    }
    (root / ".agents" / "hooks.json").write_text(json.dumps(config))
    lines = run(
        ["-p", "/hooks", "--add-dir", str(root), "--output-format", output_format],
        [],
        env,
        tmp_path,
    )
    assert '"command":{"name":"hooks"' in lines[-1]
    check_lines(lines, known)


def test_allow_list_entries_are_not_in_the_captures(known: Shape) -> None:
    """An allow-list entry the captures already cover is stale: remove it."""
    for entry in ALLOWED_EXTRA:
        path, _, key = entry.rpartition(".")
        assert key not in known.get(path, {}), entry


def test_documented_contexts_are_not_in_the_captures(known: Shape) -> None:
    """A documented context a capture now shows is stale: check it like the others."""
    for tool in DOCUMENTED_TOOL_PARAMETERS:
        assert not any(path.startswith(f"step_update[tool:{tool}/") for path in known), tool
    for context in DOCUMENTED_TOOL_STATES:
        tool = context.removeprefix("step_update[tool:").partition("/")[0]
        assert context not in known, context
        assert any(path.startswith(f"step_update[tool:{tool}/") for path in known), context
    for context, like in DOCUMENTED_CONTEXTS.items():
        assert context not in known and like in known, context


def test_documented_tool_parameters_are_checked(known: Shape) -> None:
    """An uncaptured tool's step passes with its documented keys and fails with others."""
    vocabulary = with_documented(known)
    info: dict[str, Any] = {
        "name": "grep_search",
        "parameters": {"Query": "x", "SearchPath": "/w"},
        "output": "a.txt:1: x",
    }
    step: dict[str, Any] = {
        "conversation_id": "c",
        "step_index": 2,
        "state": "DONE",
        "step_type": "tool",
        "tool_name": "grep_search",
        "duration_seconds": 0.1,
        "tool_info": info,
    }
    event = {"event": "step_update", "step_update": step}
    assert violations(shape_of(event), vocabulary) == []
    info["parameters"] = {"Query": "x", "Content": "x"}
    assert violations(shape_of(event), vocabulary) == [
        "step_update[tool:grep_search/DONE].step_update.tool_info.parameters.Content: "
        "never captured"
    ]
    step["tool_name"] = info["name"] = "undocumented_tool"
    assert violations(shape_of(event), vocabulary)


def test_capture_vocabulary_is_loaded(known: Shape) -> None:
    """The captures yield the step contexts the fake relies on."""
    for context in (
        "init",
        "result",
        "envelope",
        "step_update[user_input/DONE]",
        "step_update[agent_response/ACTIVE]",
        "step_update[agent_response/DONE]",
        "step_update[checkpoint/DONE]",
        "step_update[error_message/DONE]",
        "step_update[system_message/DONE]",
        "step_update[tool:run_command/ACTIVE]",
        "step_update[tool:run_command/DONE]",
        "step_update[tool:run_command/ERROR]",
    ):
        assert context in known, context


def test_shape_check_rejects_an_invented_field(known: Shape) -> None:
    """The checker itself fails on a field no capture shows (and on a wrong type)."""
    event = {"event": "result", "result": {"status": "SUCCESS", "thought_delta": "x"}}
    assert violations(shape_of(event), known) == ["result.result.thought_delta: never captured"]
    event = {"event": "result", "result": {"num_turns": "1"}}
    assert violations(shape_of(event), known) == [
        "result.result.num_turns: types ['string'] vs captured ['number']"
    ]
