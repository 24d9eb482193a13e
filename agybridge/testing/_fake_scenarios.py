"""Scenario scripts of the fake agy: what one turn looks like on the wire.

A scenario is ``(turn) -> exit code | None``: it emits the turn's steps through ``Turn``
and normally its one ``result`` (``turn.finish``); returning an int ends the process with
that code (with or without a result, as the scenario models); None serves the next line.
Shapes follow the captures in ``shared/agy/samples`` and contract.md §3; every invented
detail is marked as such.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from ._fake_io import dumps, stderr_line
from ._fake_protocol import Usage
from ._fake_runtime import PrintTimeout, Turn

Scenario = Callable[[Turn], int | None]

#: Context of a cold first model call in the 1.1.14 captures (15575-15844 input tokens).
BASE_CONTEXT_TOKENS = 15500
#: A checkpoint step's own usage (official-docs-single-turn-print: 116 + 7 = 123).
CHECKPOINT_USAGE = Usage(input_tokens=116, output_tokens=7)
THINKING_TOKENS = 8

#: The demo command of the official docs' tool step (official-docs-misc-lines).
TOOL_COMMAND = "echo hello_headless_demo"
TOOL_OUTPUT = "hello_headless_demo\n"

QUOTA_ERROR = (
    "Individual quota reached. Please upgrade your subscription to increase your limits. "
    "Resets in 100h23m59s."
)  # samples/tiezbro-1.1.14-claude-quota-error.ndjson
# samples/telltale-1.1.10-1.1.13-windows-captured-lines.ndjson
UNAVAILABLE_ERROR = (
    "Eligibility check failed: UNAVAILABLE (code 503): The service is currently unavailable."
)
#: Not-signed-in wording for a headless turn (contract.md §4 "authentication required").
SIGNED_OUT_ERROR = "authentication required: You are not logged into Antigravity."
SOFT_DENY_NOTICE = (
    'jetski: no output produced — a tool required the "command" permission that headless '
    "mode cannot prompt for, so it was auto-denied. Add an allow-rule under "
    "permissions.allow in settings.json (e.g. command(<target>)). Alternatively, re-run "
    "with --dangerously-skip-permissions to auto-approve all tools."
)  # samples/stderr-lines-observed.txt
#: A glog-style line: the kind of non-JSON noise bridges must skip (contract.md §8.16).
NOISE_LINE = "I1130 05:10:00.000000   4242 server.go:117] language server ready"
#: A Go runtime panic's first lines (the fake's stand-in for a crash).
PANIC_LINES = (
    "panic: runtime error: invalid memory address or nil pointer dereference",
    "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x1c0ffee]",
    "",
    "goroutine 1 [running]:",
)


def split_fragments(text: str, max_len: int = 24, max_count: int = 8) -> list[str]:
    """Cut ``text`` into 2..``max_count`` fragments of about ``max_len`` characters
    (one fragment if it has a single character)."""
    count = min(len(text), max_count, max(2, -(-len(text) // max_len)))
    if count <= 1:
        return [text]
    size = -(-len(text) // count)
    return [text[start : start + size] for start in range(0, len(text), size)]


def _tokens(text: str) -> int:
    return max(1, -(-len(text) // 4))


def reply_usage(turn: Turn, reply: str) -> Usage:
    """Plausible per-step usage: a cold first call, then mostly cached context."""
    output = _tokens(reply) + THINKING_TOKENS
    if turn.session.turns_served <= 1:
        return Usage(BASE_CONTEXT_TOKENS + _tokens(turn.prompt), output, THINKING_TOKENS)
    cached = BASE_CONTEXT_TOKENS + 300 * turn.session.turns_served
    return Usage(250 + _tokens(turn.prompt), output, THINKING_TOKENS, cached)


def example_for_schema(schema: Any, prompt: str) -> Any:
    """A minimal value matching a JSON schema, strings filled with the prompt."""
    if not isinstance(schema, dict):
        return prompt
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return {}
        return {name: example_for_schema(sub, prompt) for name, sub in properties.items()}
    if kind == "array":
        items = schema.get("items")
        return [example_for_schema(items, prompt)] if isinstance(items, dict) else []
    return {"integer": 1, "number": 1.5, "boolean": True, "null": None}.get(str(kind), prompt)


def _reply(turn: Turn, *, noise: bool = False) -> None:
    """The echo turn body after ``user_input``: checkpoint, the reply, the result.

    1.1.14 emitted the checkpoint before the reply (tiezbro captures); its usage counts in
    the cumulative ``result.usage`` (official-docs-single-turn-print).
    """
    turn.pause(turn.knobs.fragment_delay_s)
    turn.step("checkpoint", timed=True, usage=CHECKPOINT_USAGE)
    if noise:
        turn.session.out.raw(NOISE_LINE)
    schema = turn.session.json_schema
    if schema is None:
        turn.say(split_fragments(turn.prompt), usage=reply_usage(turn, turn.prompt), gap=1)
        turn.finish()
        return
    # --json-schema: result.response is the serialized JSON and structured_output the
    # object (contract.md §3.5); streaming the same JSON as deltas is an assumption.
    structured = example_for_schema(schema, turn.prompt)
    text = dumps(structured)
    turn.say(split_fragments(text), usage=reply_usage(turn, text), gap=1)
    turn.finish(response=text, extra={"structured_output": structured})


def echo(turn: Turn) -> int | None:
    """Reply with the prompt text in ACTIVE fragments plus a DONE ``"\\n"``."""
    turn.user_input()
    _reply(turn)
    return None


def noise(turn: Turn) -> int | None:
    """An echo turn with a non-JSON line on stdout in the middle (contract.md §8.16)."""
    turn.user_input()
    _reply(turn, noise=True)
    return None


def slow(turn: Turn) -> int | None:
    """Stream a fragment every ``FAKE_AGY_SLOW_INTERVAL`` for ``FAKE_AGY_SLOW_SECONDS``.

    Spawns two ``sleep`` children first (see ``Session.spawn_sleepers``).
    """
    turn.user_input()
    if turn.knobs.spawn_children:
        turn.session.spawn_sleepers()
    response = turn.response(gap=1)
    interval = turn.knobs.slow_interval_s
    ticks = max(1, round(turn.knobs.slow_duration_s / interval)) if interval else 1
    for tick in range(1, ticks + 1):
        response.fragment(f"tick {tick} ")
        turn.pause(interval)
    response.done("\n", usage=reply_usage(turn, "".join(turn.text)))
    turn.finish()
    return None


def ignore_sigint(turn: Turn) -> int | None:
    """Like ``slow`` but deaf to SIGINT; SIGTERM still ends the turn."""
    turn.session.interrupts.ignore_sigint = True
    return slow(turn)


def _panic(turn: Turn) -> int:
    for line in PANIC_LINES:
        stderr_line(line)
    # A real Go panic exits 2; the fake defaults to 1 (FAKE_AGY_CRASH_EXIT_CODE overrides).
    return turn.knobs.crash_exit_code


def crash(turn: Turn) -> int | None:
    """Two fragments, then a panic on stderr and exit without a result."""
    turn.user_input()
    response = turn.response(gap=1)
    for fragment in ("Working on ", "it"):
        response.fragment(fragment)
        turn.pause(turn.knobs.fragment_delay_s)
    return _panic(turn)


def truncated(turn: Turn) -> int | None:
    """A fragment, then half a JSON line without a newline, then a panic (§9)."""
    turn.user_input()
    response = turn.response(gap=1)
    response.fragment("Working")
    turn.pause(turn.knobs.fragment_delay_s)
    turn.session.out.partial(
        '{"event":"step_update","step_update":{"conversation_id":"'
        + turn.session.conversation_id
        + '","step_ind'
    )
    return _panic(turn)


def silent_exit(turn: Turn) -> int | None:
    """A fragment, then exit 0 without a result (pre-1.1.18 dropped streams, §5)."""
    turn.user_input()
    turn.response(gap=1).fragment("Partial")
    return 0


def _run_command(turn: Turn, *, output: str | None, error: str | None = None) -> None:
    """One run_command step: ACTIVE with parameters, then DONE or ERROR (§3.4).

    Stream ``parameters`` carry only ``CommandLine`` in every live capture
    (hooks-and-tools.md §B2); ``output`` is the combined stdout+stderr text.
    """
    parameters = {"CommandLine": TOOL_COMMAND}
    info: dict[str, Any] = {"name": "run_command", "parameters": parameters}
    index = turn.step("tool", "ACTIVE", gap=1, tool_name="run_command", tool_info=info)
    turn.pause(turn.knobs.fragment_delay_s)
    finished = dict(info)
    if output is not None:
        finished["output"] = output
    if error is not None:
        finished["error"] = {"type": "TOOL_ERROR", "message": error}
    state = "DONE" if error is None else "ERROR"
    turn.step("tool", state, index=index, timed=True, tool_name="run_command", tool_info=finished)


def tool(turn: Turn) -> int | None:
    """A run_command tool step, then a short reply."""
    turn.user_input()
    _run_command(turn, output=TOOL_OUTPUT)
    reply = "The command printed hello_headless_demo."
    turn.say(split_fragments(reply), usage=reply_usage(turn, reply), gap=1)
    turn.finish()
    return None


def tool_error(turn: Turn) -> int | None:
    """A run_command step ending ERROR (TOOL_ERROR), then the model explains (§3.4)."""
    turn.user_input()
    _run_command(
        turn,
        output=None,
        error="error executing cascade step: CORTEX_STEP_TYPE_RUN_COMMAND: exec: permission denied",
    )
    reply = "The command failed: permission denied."
    turn.say(split_fragments(reply), usage=reply_usage(turn, reply), gap=1)
    turn.finish()
    return None


def soft_deny(turn: Turn) -> int | None:
    """A tool agy auto-denies headless: SUCCESS, empty response, ``denied_actions``.

    1.3.x shape (hooks-and-tools.md §A6): the tool step ends DONE with no output, the turn
    stops at the first blocked tool, the jetski notice goes to stderr (contract.md §4).
    With ``--dangerously-skip-permissions`` nothing is denied and the tool runs.
    """
    if turn.session.permission_mode == "always-proceed":
        return tool(turn)
    turn.user_input()
    _run_command(turn, output=None)
    stderr_line(SOFT_DENY_NOTICE)
    turn.finish(
        response="", extra={"denied_actions": [{"action": "command", "display_name": "RunCommand"}]}
    )
    return None


def api_error(turn: Turn, text: str, *, status: str, code: int) -> int | None:
    """An agent/model API failure: ``error_message`` step, ERROR result, stderr lines.

    1.2.6+ prints ``error: <text>`` and ``AGY_ERROR: {json}`` and exits 3 (contract.md §4,
    §5); CL 1.2.10 keeps a multi-turn stream-json session alive instead, modelled by
    ``FAKE_AGY_QUOTA_CONTINUE=1``.
    """
    turn.user_input()
    turn.pause(turn.knobs.fragment_delay_s)
    turn.step("error_message", gap=0)
    turn.finish("ERROR", error=text)
    details = {
        "short_error": f"{status} (code {code}): {text}",
        "status": status,
        "error_code": code,
        "code_kind": "http",
        "retryable": True,
        "error_id": f"{uuid.uuid4()}-1",
    }
    stderr_line(f"error: {text}")
    stderr_line(f"AGY_ERROR: {dumps(details)}")
    return None if turn.knobs.quota_continue else 3


def quota(turn: Turn) -> int | None:
    """The 429 "Individual quota reached" turn."""
    return api_error(turn, QUOTA_ERROR, status="RESOURCE_EXHAUSTED", code=429)


def unavailable(turn: Turn) -> int | None:
    """A 503 eligibility failure mid-session (at startup it is a pre-turn error)."""
    return api_error(turn, UNAVAILABLE_ERROR, status="UNAVAILABLE", code=503)


def print_timeout(turn: Turn) -> int | None:
    """Partial text, then the print timeout fires (contract.md §4, §8.2)."""
    turn.user_input()
    turn.response(gap=1).fragment("Partial answer")
    turn.pause(turn.knobs.fragment_delay_s)
    raise PrintTimeout


def multi_response(turn: Turn) -> int | None:
    """Two agent_response steps in one turn around a background-task notice (§3.2)."""
    turn.user_input()
    turn.say(["LAUNCHED"], usage=reply_usage(turn, "LAUNCHED"), gap=1)
    turn.pause(turn.knobs.fragment_delay_s)
    turn.step("system_message", gap=1)
    turn.say(["RESULT=", "42"], usage=reply_usage(turn, "RESULT=42"))
    turn.finish()
    return None


def signed_out(turn: Turn) -> int:
    """FAKE_AGY_SIGNED_OUT in a session: the first turn fails on auth, exit 1.

    Wording and shape are invented from contract.md §4 ("headless with no TTY exits with
    an authentication required error"); the turn never starts, so no steps.
    """
    turn.finish("ERROR", error=SIGNED_OUT_ERROR)
    stderr_line(f"error: {SIGNED_OUT_ERROR}")
    return 1


def replay(turn: Turn, lines: Sequence[str]) -> None:
    """Write a captured turn's lines verbatim, tracking the counters they carry."""
    session = turn.session
    for position, line in enumerate(lines):
        if position:
            turn.pause(turn.knobs.fragment_delay_s)
        session.interrupts.check()
        session.out.raw(line)
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        step = event.get("step_update")
        if isinstance(step, dict):
            if isinstance(step.get("step_index"), int):
                session.next_step_index = max(session.next_step_index, step["step_index"] + 1)
            if isinstance(step.get("text_delta"), str):
                turn.text.append(step["text_delta"])
        result = event.get("result")
        if isinstance(result, dict):
            session.num_turns = int(result.get("num_turns", session.num_turns) or 0)
            session.usage = Usage.from_json(result.get("usage"))
            session.duration_s = float(result.get("duration_seconds", 0) or 0)
            turn.finished = True


SCENARIOS: dict[str, Scenario] = {
    "echo": echo,
    "slow": slow,
    "ignore-sigint": ignore_sigint,
    "crash": crash,
    "truncated": truncated,
    "tool": tool,
    "tool-error": tool_error,
    "quota": quota,
    "unavailable": unavailable,
    "soft-deny": soft_deny,
    "print-timeout": print_timeout,
    "noise": noise,
    "silent-exit": silent_exit,
    "multi-response": multi_response,
}
