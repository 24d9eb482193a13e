"""Scenario scripts of the fake agy: what one turn looks like on the wire.

A scenario is ``(turn) -> exit code | None``: it emits the turn's steps through ``Turn``
and normally its one ``result`` (``turn.finish``); returning an int ends the process with
that code (with or without a result, as the scenario models); None serves the next line.
Shapes follow the captures in ``shared/agy/samples`` and contract.md §3; every invented
detail is marked as such. Tool steps are gated (``ToolStep.authorize``: PreToolUse hooks,
then agy's own headless check; hooks-and-tools.md §A4-§A7) before their effects happen.
"""

from __future__ import annotations

import functools
import json
import os
import re
import struct
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._fake_hooks import Action, Hook, Verdict, pre_tool_use_payload, run_handler, verdict_of
from ._fake_io import JsonObject, dumps, stderr_line
from ._fake_protocol import Usage
from ._fake_runtime import PrintTimeout, Turn

Scenario = Callable[[Turn], int | None]

#: ``[fake-agy:NAME]`` in a prompt picks the turn's scenario; the words after it are the
#: scenario's arguments (``directive_args``), e.g. the file ``edit`` changes.
DIRECTIVE = re.compile(r"\[fake-agy:([a-z-]+)\]")

#: Context of a cold first model call in the 1.1.14 captures (15575-15844 input tokens).
BASE_CONTEXT_TOKENS = 15500
#: A checkpoint step's own usage (official-docs-single-turn-print: 116 + 7 = 123).
CHECKPOINT_USAGE = Usage(input_tokens=116, output_tokens=7)
THINKING_TOKENS = 8

#: The demo command of the official docs' tool step (official-docs-misc-lines).
TOOL_COMMAND = "echo hello_headless_demo"
TOOL_OUTPUT = "hello_headless_demo\n"
#: run_command's ``WaitMsBeforeAsync`` in the hook payload (1.1.18 measurement, §A3).
RUN_COMMAND_WAIT_MS = 2000

QUOTA_ERROR = (
    "Individual quota reached. Please upgrade your subscription to increase your limits. "
    "Resets in 100h23m59s."
)  # samples/tiezbro-1.1.14-claude-quota-error.ndjson
# samples/telltale-1.1.10-1.1.13-windows-captured-lines.ndjson
UNAVAILABLE_ERROR = (
    "Eligibility check failed: UNAVAILABLE (code 503): The service is currently unavailable."
)
#: The terminal 429 after agy's own retries (samples/kaoiro-1.2.15-terminal-429-result).
RETRIED_QUOTA_ERROR = (
    "API error (attempt 8): RESOURCE_EXHAUSTED (code 429): Individual quota reached. "
    "Please upgrade your subscription to increase your limits. Resets in 0s."
)
PARTIAL_ANSWER = "The answer is 4."
#: samples/untether-1.3.1-subagent: the ACTIVE step's subagent, the replies around it.
SUBAGENT: JsonObject = {
    "type_name": "research",
    "role": "Secret Reader",
    "initial_prompt": "Read notes.txt and reply with the secret word only.",
}
SUBAGENT_WAITING = "I have spawned the subagent to read notes.txt. Waiting for its response."
SUBAGENT_RESULT = "SUB SAID banana\n"
#: Not-signed-in wording for a headless turn (contract.md §4 "authentication required").
SIGNED_OUT_ERROR = "authentication required: You are not logged into Antigravity."
SOFT_DENY_NOTICE = (
    'jetski: no output produced — a tool required the "command" permission that headless '
    "mode cannot prompt for, so it was auto-denied. Add an allow-rule under "
    "permissions.allow in settings.json (e.g. command(<target>)). Alternatively, re-run "
    "with --dangerously-skip-permissions to auto-approve all tools."
)  # samples/stderr-lines-observed.txt
#: The result's ``denied_actions`` entry of a soft-denied command (contract.md §3.5).
DENIED_COMMAND: JsonObject = {"action": "command", "display_name": "RunCommand"}
#: A glog-style line: the kind of non-JSON noise bridges must skip (contract.md §8.16).
NOISE_LINE = "I1130 05:10:00.000000   4242 server.go:117] language server ready"
#: A Go runtime panic's first lines (the fake's stand-in for a crash).
PANIC_LINES = (
    "panic: runtime error: invalid memory address or nil pointer dereference",
    "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x1c0ffee]",
    "",
    "goroutine 1 [running]:",
)


#: ``edit``: the file changed when the prompt names none, and what a new one starts with.
EDIT_DEFAULT_FILE = "fake-agy-edit.txt"
EDIT_INITIAL_CONTENT = "fake-agy edit target\nthis second line is left alone\n"
EDIT_SUFFIX = " (edited by fake-agy)"

#: ``permission-tool``: the workspace file its write_to_file creates and view_file reads.
PERMISSION_FILE = "fake-agy-permission.txt"
PERMISSION_CONTENT = "written by fake-agy after the permission check\n"

#: ``multi-tool``: the workspace file it reads, searches and prints, and the file it writes.
NOTES_FILE = "fake-agy-notes.txt"
NOTES_CONTENT = "fake agy notes\nthe needle is here\n"
NOTES_QUERY = "needle"
SUMMARY_FILE = "fake-agy-summary.txt"

#: ``image-out``: ``generate_image`` writes ``<IMAGE_NAME>.png``.
IMAGE_NAME = "fake_agy_pixel"
#: ``image-out not-image``: bytes behind a ``.png`` name that are no image at all.
NOT_AN_IMAGE = b"this is not a PNG, whatever the file name says\n"

#: ``schema`` without ``--json-schema``: the schema it answers (the bridge passes none).
DEFAULT_SCHEMA: JsonObject = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
}

#: ``unknown-events``: vocabulary no agy version is known to print (contract.md §3.3, §10.3).
UNKNOWN_EVENT = "fake_agy_future_event"
UNKNOWN_STEP_TYPE = "fake_agy_future_step"
#: A documented *result* status (§3.5) that no capture shows as a step ``state``.
UNKNOWN_STATE = "WAITING"

#: ``big-output``: a run_command printing exactly 1 MiB.
BIG_OUTPUT_BYTES = 2**20
BIG_OUTPUT_COMMAND = f"yes fake-agy-big-output | head -c {BIG_OUTPUT_BYTES}"
#: ``huge-line``: characters in its single text_delta (UTF-8 makes the line longer still).
HUGE_LINE_CHARS = 10 * 2**20
FLOOD_DEFAULT = 10_000
#: ~40 KiB per write: well under a pipe buffer's worth of syscalls per delta.
FLOOD_BATCH = 256
#: ``paced`` without arguments: deltas, and milliseconds between them.
PACED_DEFAULT_COUNT = 500
PACED_DEFAULT_INTERVAL_MS = 5.0
PACED_USAGE = "[fake-agy:paced] [N] [INTERVAL_MS] (N ≥ 1 deltas, INTERVAL_MS ≥ 0)"


def directive_args(prompt: str) -> list[str]:
    """The whitespace-separated words after the prompt's ``[fake-agy:NAME]`` directive."""
    match = DIRECTIVE.search(prompt)
    return prompt[match.end() :].split() if match else []


def tiny_png() -> bytes:
    """A valid 1x1 RGBA PNG (signature, IHDR, IDAT, IEND with correct CRCs)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)  # 1x1, 8-bit RGBA
    pixel = b"\x00" + bytes((0x42, 0x85, 0xF4, 0xFF))  # filter byte + one blue pixel
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(pixel))
        + chunk(b"IEND", b"")
    )


def big_output_text() -> str:
    """What ``yes fake-agy-big-output | head -c 1048576`` prints."""
    line = "fake-agy-big-output\n"
    return (line * (BIG_OUTPUT_BYTES // len(line) + 1))[:BIG_OUTPUT_BYTES]


@functools.cache
def huge_line_text() -> str:
    """``HUGE_LINE_CHARS`` characters of numbered lines with some non-ASCII in each."""
    line = "{:07d} fake-agy huge line: déjà vu ✓ 🙂 lorem ipsum dolor sit amet\n"
    count = HUGE_LINE_CHARS // len(line.format(0)) + 1
    return "".join(line.format(n) for n in range(count))[:HUGE_LINE_CHARS]


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
    """Stream a fragment every ``FAKE_AGY_SLOW_INTERVAL`` for ``FAKE_AGY_SLOW_SECONDS``
    (or, with ``FAKE_AGY_RELEASE_FILE``, until that file exists).

    Spawns two ``sleep`` children first (see ``Session.spawn_sleepers``).
    """
    turn.user_input()
    if turn.knobs.spawn_children:
        turn.session.spawn_sleepers()
    response = turn.response(gap=1)
    interval = turn.knobs.slow_interval_s
    ticks = max(1, round(turn.knobs.slow_duration_s / interval)) if interval else 1
    release = turn.knobs.release_file
    tick = 0
    while True:
        tick += 1
        response.fragment(f"tick {tick} ")
        turn.pause(interval)
        # FAKE_AGY_RELEASE_FILE: the test, not the clock, ends the turn.
        if os.path.exists(release) if release else tick >= ticks:
            break
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


class ToolBlocked(Exception):
    """A tool step that did not run; ``run_scenario`` ends the turn for it."""


class HookBlocked(ToolBlocked):
    """A PreToolUse hook denied the call or failed: the step has ended ERROR (§A4-§A6)."""

    def __init__(self, verdict: Verdict) -> None:
        super().__init__(verdict.message)
        self.verdict = verdict

    @property
    def explanation(self) -> str:
        """What the model replies about it (wording invented; §A6: "the model usually
        explains and continues")."""
        reason = self.verdict.reason
        if reason is None:
            return f"The tool call failed: {self.verdict.message}"
        return f"The tool call was denied: {reason}" if reason else "The tool call was denied."


class SoftDenied(ToolBlocked):
    """agy's own headless permission check refused the tool (§A6, §A7).

    The step has ended DONE without output (the 1.3.x shape the ``soft-deny`` scenario
    models; ``status`` SUCCESS) or ERROR ``permission check failed …`` (the 1.2.x shape of
    ``permission-check-failed``; ``status`` CANCELED); the turn stops at this first
    blocked tool.
    """

    def __init__(self, status: str = "SUCCESS") -> None:
        super().__init__(status)
        self.status = status


class ToolStep:
    """One tool step (contract.md §3.4): ACTIVE now, later DONE or ERROR on its step_index.

    ``tool_name`` duplicates ``tool_info.name``. ``parameters`` use the tool's PascalCase
    keys and appear on both updates, or only on the final one when ``on_active`` is False
    (write_to_file in the 1.1.11 capture; run_command carries them on ACTIVE, KAO-EV).
    They are the stream's reduced display subset; ``args`` are the full model arguments a
    PreToolUse hook receives (hooks-and-tools.md §B2; default: ``parameters``).
    ``needs_approval``: agy's headless permission check refuses the tool unless
    ``--dangerously-skip-permissions`` (shell commands by default, §A9).

    Scenarios call ``authorize`` right after creating a step and before the tool's
    effects, so hooks see the ACTIVE line first (§A5) and a denied tool does nothing.
    """

    def __init__(
        self,
        turn: Turn,
        name: str,
        parameters: JsonObject | None = None,
        *,
        args: JsonObject | None = None,
        on_active: bool = True,
        needs_approval: bool = False,
        gap: int = 1,
    ) -> None:
        self.turn = turn
        self.name = name
        self.parameters = parameters
        self.args: JsonObject = dict(parameters or {}) if args is None else args
        self.needs_approval = needs_approval
        info: JsonObject = {"name": name}
        if parameters is not None and on_active:
            info["parameters"] = parameters
        self.index = turn.step("tool", "ACTIVE", gap=gap, tool_name=name, tool_info=info)

    def update(self, state: str, **info_fields: Any) -> None:
        """Another update of this step (a state outside ACTIVE/DONE/ERROR, for one)."""
        info: JsonObject = {"name": self.name}
        if self.parameters is not None:
            info["parameters"] = self.parameters
        info.update((key, value) for key, value in info_fields.items() if value is not None)
        self.turn.step(
            "tool",
            state,
            index=self.index,
            timed=state != "ACTIVE",
            tool_name=self.name,
            tool_info=info,
        )

    def done(self, output: str | None = None) -> None:
        self.update("DONE", output=output)

    def fail(self, message: str) -> None:
        self.update("ERROR", error={"type": "TOOL_ERROR", "message": message})

    def authorize(self) -> None:
        """Gate the tool before it runs: PreToolUse hooks, then agy's own check (§A7).

        Every matching hook runs, in ``/hooks`` order, while the turn prints nothing; the
        first one that does not allow decides (any deny wins; §A2 calls the combination
        undocumented). A hook's ``allow`` cannot lift the soft-deny (§A7).

        Raises:
            HookBlocked: a hook denied or failed; the step has ended ERROR.
            SoftDenied: the tool needs an approval headless mode cannot give.
            PrintTimeout: ``--print-timeout`` expired while a hook ran.
            Interrupted: SIGINT/SIGTERM while a hook ran (the hook is killed).
        """
        session = self.turn.session
        blocked: Verdict | None = None
        for hook, action in session.hooks.pre_tool_use(self.name):
            verdict = self._run_hook(hook, action)
            if blocked is None and not verdict.allowed:
                blocked = verdict
        if blocked is not None:
            self.fail(blocked.message)
            raise HookBlocked(blocked)
        proceeds = session.permission_mode == "always-proceed" and not self.turn.knobs.deny_always
        if self.needs_approval and not proceeds:
            if self.turn.soft_deny_shape == "1.2":
                command = str(self.args.get("CommandLine", ""))
                self.fail(
                    f'permission check failed for command "{command}": '
                    f"user denied permission to run command:\n{command}"
                )
                raise SoftDenied("CANCELED")
            self.done()
            raise SoftDenied

    def _run_hook(self, hook: Hook, action: Action) -> Verdict:
        return run_hook(self.turn, hook, action, tool=self.name, args=self.args, index=self.index)


def run_hook(
    turn: Turn, hook: Hook, action: Action, *, tool: str, args: JsonObject, index: int
) -> Verdict:
    """Run one PreToolUse handler for a call of ``tool`` on step ``index`` (§A3-§A5)."""
    session = turn.session
    handler_id = hook.handler_id(action)
    payload = pre_tool_use_payload(
        tool=tool,
        args=args,
        step_index=index,
        conversation_id=session.conversation_id,
        workspace_paths=session.workspace_paths,
        model_name=session.model_name,
        state_root=session.state_root or Path(tempfile.gettempdir()),
    )
    run = run_handler(
        action.handler.command,
        dumps(payload).encode(),
        cwd=hook.cwd,
        env={**os.environ, "ANTIGRAVITY_CONVERSATION_ID": session.conversation_id},
        timeout_s=action.handler.timeout_s,
        interrupts=session.interrupts,
        turn_deadline=turn.deadline,
    )
    if run.turn_deadline:
        raise PrintTimeout
    skip = session.permission_mode == "always-proceed"
    verdict = verdict_of(handler_id, run, skip_permissions=skip)
    session.log.record(
        {
            "hook": {
                "id": handler_id,
                "tool": tool,
                "step_index": index,
                "pid": run.pid,
                "returncode": run.returncode,
                "verdict": verdict.kind,
                "reason": verdict.reason,
            }
        }
    )
    return verdict


def _command_args(turn: Turn, command: str) -> JsonObject:
    """run_command's full arguments (§A3 payload; ``toolAction``/``toolSummary`` wording
    invented in the measured style)."""
    return {
        "CommandLine": command,
        "Cwd": str(_workspace(turn)),
        "WaitMsBeforeAsync": RUN_COMMAND_WAIT_MS,
        "toolAction": "Running a shell command",
        "toolSummary": f"Running {command}",
    }


def _command_step(turn: Turn, command: str, *, needs_approval: bool = False) -> ToolStep:
    """An ACTIVE run_command step; ``FAKE_AGY_COMMANDS_NEED_APPROVAL`` makes every one need
    approval in request-review mode, as real agy's default rules do (§A9)."""
    return ToolStep(
        turn,
        "run_command",
        {"CommandLine": command},
        args=_command_args(turn, command),
        needs_approval=needs_approval or turn.knobs.commands_need_approval,
    )


def _write_args(path: Path, content: str, *, description: str) -> JsonObject:
    """write_to_file's full arguments (hooks-and-tools.md §B2)."""
    return {
        "TargetFile": str(path),
        "CodeContent": content,
        "Overwrite": path.exists(),
        "Description": description,
    }


def _run_command(
    turn: Turn, *, output: str | None, error: str | None = None, needs_approval: bool = False
) -> None:
    """One run_command step: ACTIVE with parameters, the gate, then DONE or ERROR (§3.4).

    Stream ``parameters`` carry only ``CommandLine`` in every live capture
    (hooks-and-tools.md §B2); ``output`` is the combined stdout+stderr text.
    """
    step = _command_step(turn, TOOL_COMMAND, needs_approval=needs_approval)
    step.authorize()
    turn.pause(turn.knobs.fragment_delay_s)
    if error is None:
        step.done(output)
    else:
        step.fail(error)


def _tool_turn(turn: Turn, *, needs_approval: bool) -> int | None:
    turn.user_input()
    _run_command(turn, output=TOOL_OUTPUT, needs_approval=needs_approval)
    reply = "The command printed hello_headless_demo."
    turn.say(split_fragments(reply), usage=reply_usage(turn, reply), gap=1)
    turn.finish()
    return None


def tool(turn: Turn) -> int | None:
    """A run_command tool step, then a short reply."""
    return _tool_turn(turn, needs_approval=False)


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
    PreToolUse hooks run first (§A7: an ``allow`` does not lift the denial, a ``deny``
    wins). With ``--dangerously-skip-permissions`` nothing is denied and the tool runs.
    """
    return _tool_turn(turn, needs_approval=True)


def permission_check_failed(turn: Turn) -> int | None:
    """``soft-deny`` in agy 1.2.x's shape (hooks-and-tools.md §A6): the step ends ERROR
    ``permission check failed for command "X": …``, the result is CANCELED with
    ``denied_actions``, the jetski line goes to stderr."""
    turn.soft_deny_shape = "1.2"
    return _tool_turn(turn, needs_approval=True)


def run_scenario(scenario: Scenario, turn: Turn) -> int | None:
    """Run one turn's scenario; a tool it could not run ends the turn (§A6).

    A soft-denied tool: the jetski notice on stderr and a SUCCESS result with
    ``denied_actions``. A hook-blocked tool (deny, failure, timeout): the model explains in
    a short reply and the result is SUCCESS; that is the 1.2.3/1.2.5 behaviour ([HD125];
    1.1.18 ended the turn with an ERROR result instead).
    """
    try:
        return scenario(turn)
    except SoftDenied as denied:
        stderr_line(SOFT_DENY_NOTICE)
        turn.finish(denied.status, extra={"denied_actions": [dict(DENIED_COMMAND)]})
    except HookBlocked as blocked:
        _reply_text(turn, blocked.explanation)
        turn.finish()
    return None


def api_error(
    turn: Turn, text: str, *, status: str, code: int, answer: str | None = None
) -> int | None:
    """An agent/model API failure: ``error_message`` step, ERROR result, stderr lines.

    1.2.6+ prints ``error: <text>`` and ``AGY_ERROR: {json}`` and exits 3 (contract.md §4,
    §5; 1.2.10: also when partial text was streamed); CL 1.2.10 keeps a multi-turn
    stream-json session alive instead, modelled by ``FAKE_AGY_QUOTA_CONTINUE=1``. With an
    ``answer`` the model replies first and the ERROR result's ``response`` holds it
    (contract.md §11; the 429 after agy's own retries, kaoiro-1.2.15).
    """
    turn.user_input()
    turn.pause(turn.knobs.fragment_delay_s)
    if answer is None:
        turn.step("error_message", gap=0)
    else:
        _reply_text(turn, answer)
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


def partial_error(turn: Turn) -> int | None:
    """An answer, then the 429 agy gave up on after 8 retries: ERROR with the answer."""
    return api_error(
        turn, RETRIED_QUOTA_ERROR, status="RESOURCE_EXHAUSTED", code=429, answer=PARTIAL_ANSWER
    )


def subagent(turn: Turn) -> int | None:
    """agy 1.3.1's subagent turn (samples/untether-1.3.1-subagent): a thinking-only
    agent_response, the ``subagent`` step (ACTIVE: type, role, initial prompt; DONE ~0.5 s
    later with its conversation while it still works), the parent's "waiting" reply, a
    ``system_message`` when the subagent returns, then the reply using its answer."""
    turn.user_input()
    turn.pause(turn.knobs.fragment_delay_s)
    turn.step("agent_response", gap=1, timed=True, usage=reply_usage(turn, "(thinking)"))
    spawned: JsonObject = dict(SUBAGENT)
    index = turn.step(
        "subagent",
        "ACTIVE",
        gap=1,
        tool_name="invoke_subagent",
        subagent_info={"subagents": [spawned]},
    )
    turn.pause(turn.knobs.fragment_delay_s)
    child = str(uuid.uuid4())
    spawned.update(
        conversation_id=child,
        log_uri=f"file://~/.gemini/antigravity-cli/brain/{child}/.system_generated/logs/transcript.jsonl",
        workspace_uris=[f"file://{_workspace(turn)}"],
    )
    turn.step(
        "subagent",
        "DONE",
        index=index,
        timed=True,
        tool_name="invoke_subagent",
        subagent_info={"subagents": [spawned]},
    )
    _reply_text(turn, SUBAGENT_WAITING)
    turn.pause(turn.knobs.fragment_delay_s)
    turn.step("system_message", gap=0, timed=True)
    turn.response(gap=0).done(SUBAGENT_RESULT, usage=reply_usage(turn, SUBAGENT_RESULT))
    turn.finish()
    return None


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


def _workspace(turn: Turn) -> Path:
    """Where agy works: the first ``--add-dir`` root, else the process cwd (§1.1, §8.6)."""
    return Path(turn.session.workspace or os.getcwd())


def _shown(path: Path, root: Path) -> str:
    """``path`` relative to ``root`` when inside it (as a model names files), else absolute."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _reply_text(turn: Turn, text: str) -> None:
    turn.say(split_fragments(text), usage=reply_usage(turn, text), gap=1)


def edit(turn: Turn) -> int | None:
    """``replace_file_content`` on real files: ``[fake-agy:edit] [path...] [gate=P]``.

    Each path (relative to the workspace, or absolute; default ``fake-agy-edit.txt``) is
    created first by a ``write_to_file`` step if missing (parameters on DONE only, like
    the 1.1.11 capture). The replace step is ACTIVE with ``{"TargetFile": <abs>}`` before
    the file changes; after ``FAKE_AGY_EDIT_DELAY`` (and once the file P exists, with
    ``gate=P``) its first line gets a suffix, then the step is DONE (no ``output``:
    none seen for edits, hooks-and-tools.md §B2). Several paths: one after the other.
    """
    turn.user_input()
    root = _workspace(turn)
    args = [arg for arg in directive_args(turn.prompt) if not arg.startswith("gate=")]
    targets = [root / arg for arg in args or [EDIT_DEFAULT_FILE]]  # an absolute arg wins
    turn.pause(turn.knobs.fragment_delay_s)
    for target in targets:
        _edit_first_line(turn, target)
    shown = " and ".join(_shown(target, root) for target in targets)
    _reply_text(turn, f"I edited the first line of {shown}.")
    turn.finish()
    return None


def _edit_first_line(turn: Turn, target: Path) -> None:
    """``edit``'s steps for one file: create it if missing, then mark its first line."""
    if not target.exists():
        create = ToolStep(
            turn,
            "write_to_file",
            {"TargetFile": str(target)},
            args=_write_args(target, EDIT_INITIAL_CONTENT, description="Create the file."),
            on_active=False,
        )
        create.authorize()
        turn.pause(turn.knobs.edit_delay_s)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(EDIT_INITIAL_CONTENT)
        create.done()
    old_line = target.read_bytes().partition(b"\n")[0].decode("utf-8", errors="replace")
    replace = ToolStep(
        turn,
        "replace_file_content",
        {"TargetFile": str(target)},
        args={
            "TargetFile": str(target),
            "TargetContent": old_line,
            "ReplacementContent": old_line + EDIT_SUFFIX,
            "StartLine": 1,
            "EndLine": 1,
            "AllowMultiple": False,
            "Instruction": "Append a marker to the first line.",
            "Description": "Mark the first line as edited.",
        },
    )
    replace.authorize()
    turn.pause(turn.knobs.edit_delay_s)
    _hold(turn)
    first, newline, rest = target.read_bytes().partition(b"\n")
    target.write_bytes(first + EDIT_SUFFIX.encode() + newline + rest)
    replace.done()


def multi_tool(turn: Turn) -> int | None:
    """view_file, grep_search, run_command and write_to_file, then a reply.

    Works on ``fake-agy-notes.txt`` in the workspace (created silently first if missing:
    it stands for a file the user already had). Parameters and outputs follow
    hooks-and-tools.md §B2: view_file's output is the ``"N lines, M bytes"`` summary;
    grep_search's output shape was never captured (``path:line: text`` is invented);
    run_command's output is what ``cat`` prints; write_to_file has parameters on DONE only
    and no output, and really creates ``fake-agy-summary.txt``.
    """
    turn.user_input()
    root = _workspace(turn)
    notes = root / NOTES_FILE
    if not notes.exists():
        notes.write_text(NOTES_CONTENT)
    data = notes.read_bytes()
    text = data.decode("utf-8", errors="replace")
    pause = turn.knobs.fragment_delay_s

    view = ToolStep(turn, "view_file", {"AbsolutePath": str(notes)})
    view.authorize()
    turn.pause(pause)
    view.done(f"{len(text.splitlines())} lines, {len(data)} bytes")

    search = ToolStep(
        turn,
        "grep_search",
        {"Query": NOTES_QUERY, "SearchPath": str(root)},
        args={"SearchPath": str(root), "Query": NOTES_QUERY, "MatchPerLine": True},
    )
    search.authorize()
    turn.pause(pause)
    matches = [
        f"{NOTES_FILE}:{number}: {line}"
        for number, line in enumerate(text.splitlines(), start=1)
        if NOTES_QUERY in line
    ]
    search.done("".join(f"{match}\n" for match in matches))

    command = _command_step(turn, f"cat {NOTES_FILE}")
    command.authorize()
    turn.pause(pause)
    command.done(text)

    summary = root / SUMMARY_FILE
    content = f"{NOTES_FILE}: {len(matches)} line(s) mention {NOTES_QUERY!r}\n"
    write = ToolStep(
        turn,
        "write_to_file",
        {"TargetFile": str(summary)},
        args=_write_args(summary, content, description="Summarize the matches."),
        on_active=False,
    )
    write.authorize()
    turn.pause(pause)
    summary.write_text(content)
    write.done()

    _reply_text(
        turn, f"I read {NOTES_FILE}, found {len(matches)} match(es) and wrote {SUMMARY_FILE}."
    )
    turn.finish()
    return None


def _gate(step: ToolStep, outcomes: list[str]) -> bool:
    """``step.authorize()``; a hook-blocked step is noted in ``outcomes`` (False)."""
    try:
        step.authorize()
    except HookBlocked as blocked:
        outcomes.append(f"{step.name}: {blocked.explanation}")
        return False
    return True


def permission_tool(turn: Turn) -> int | None:
    """Three gated tools in one turn: ``[fake-agy:permission-tool] [PATH]``.

    run_command ``echo hello_headless_demo`` (needs approval: soft-denied without
    ``--dangerously-skip-permissions``, which stops the turn, §A7), then write_to_file
    creating PATH (default ``fake-agy-permission.txt`` in the workspace) and view_file
    reading it (in-workspace writes and reads need no approval, §A9). Each step runs the
    PreToolUse hooks; a hook-blocked step ends ERROR and the turn goes on to the next tool
    (the model "continues", §A6), so one turn exercises several decisions. The reply sums
    up what ran. A view_file of a missing file ends ERROR (wording invented after the
    captured ``error executing cascade step: CORTEX_STEP_TYPE_RUN_COMMAND: …``).
    """
    turn.user_input()
    root = _workspace(turn)
    args = directive_args(turn.prompt)
    target = root / (args[0] if args else PERMISSION_FILE)
    shown = _shown(target, root)
    pause = turn.knobs.fragment_delay_s
    outcomes: list[str] = []
    turn.pause(pause)

    command = _command_step(turn, TOOL_COMMAND, needs_approval=True)
    if _gate(command, outcomes):
        turn.pause(pause)
        command.done(TOOL_OUTPUT)
        outcomes.append(f"run_command printed {TOOL_OUTPUT.strip()}")

    write = ToolStep(
        turn,
        "write_to_file",
        {"TargetFile": str(target)},
        args=_write_args(target, PERMISSION_CONTENT, description="Record the permission check."),
        on_active=False,
    )
    if _gate(write, outcomes):
        turn.pause(pause)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(PERMISSION_CONTENT)
        write.done()
        outcomes.append(f"write_to_file wrote {shown}")

    view = ToolStep(turn, "view_file", {"AbsolutePath": str(target)})
    if _gate(view, outcomes):
        turn.pause(pause)
        try:
            data = target.read_bytes()
        except OSError as exc:
            view.fail(
                "error executing cascade step: CORTEX_STEP_TYPE_VIEW_FILE: "
                f"open {target}: {(exc.strerror or str(exc)).lower()}"
            )
            outcomes.append(f"view_file could not read {shown}")
        else:
            lines = len(data.decode("utf-8", errors="replace").splitlines())
            view.done(f"{lines} lines, {len(data)} bytes")
            outcomes.append(f"view_file read {shown}")

    _reply_text(turn, "; ".join(outcomes) + ".")
    turn.finish()
    return None


def recall(turn: Turn) -> int | None:
    """Answer from the conversation's history, as agy's model does after a respawn with
    ``--conversation`` (contract.md §1.1): the reply names every number the earlier
    prompts of this conversation mentioned, or says there is nothing to remember. A
    bridge that lost the conversation (no ``--conversation``, a new id) gets "nothing"."""
    earlier = turn.session.prompts[:]  # before this turn's own prompt is added
    turn.user_input()
    numbers = [n for prompt in earlier for n in re.findall(r"\d+", prompt)]
    if numbers:
        reply = "Earlier in this conversation you mentioned: " + ", ".join(numbers) + "."
    else:
        reply = "I don't remember anything from earlier in this conversation."
    _reply_text(turn, reply)
    turn.finish()
    return None


def read(turn: Turn) -> int | None:
    """view_file of the first word of the prompt that names a workspace file, then a reply
    quoting it (view_file's output is the ``"N lines, M bytes"`` summary, §B2)."""
    turn.user_input()
    root = _workspace(turn)
    words = (word.strip(".,;:!?'\"`()") for word in turn.prompt.split())
    target = next((root / w for w in words if w and (root / w).is_file()), None)
    if target is None:
        _reply_text(turn, "I found no file in the workspace to read.")
        turn.finish()
        return None
    view = ToolStep(turn, "view_file", {"AbsolutePath": str(target)})
    view.authorize()
    turn.pause(turn.knobs.fragment_delay_s)
    data = target.read_bytes()
    text = data.decode("utf-8", errors="replace")
    view.done(f"{len(text.splitlines())} lines, {len(data)} bytes")
    _reply_text(turn, f"{_shown(target, root)} says: {text.strip()}")
    turn.finish()
    return None


def gated_command(turn: Turn) -> int | None:
    """One run_command needing approval: ``[fake-agy:gated-command] <command line>``.

    The command line is the rest of the prompt, as written. The fake never runs it (the
    gate's decision is the point); an allowed step reports that it was not run.
    """
    turn.user_input()
    match = DIRECTIVE.search(turn.prompt)
    command = turn.prompt[match.end() :].strip() if match else ""
    outcomes: list[str] = []
    step = _command_step(turn, command, needs_approval=True)
    if _gate(step, outcomes):
        step.done("(the fake agy does not run commands)\n")
        outcomes.append(f"run_command allowed: {command}")
    _reply_text(turn, "; ".join(outcomes) + ".")
    turn.finish()
    return None


def image_out(turn: Turn) -> int | None:
    """``generate_image`` writing a real 1x1 PNG:
    ``[fake-agy:image-out] [outside | other-conversation] [not-image]``.

    Default: the file goes into the workspace (what a bridge can show) and the reply names
    it relatively. ``outside``: into ``<state dir>/brain/<conversation>/``, where real agy
    puts generated images (hooks-and-tools.md §B2; contract.md §7), outside every
    ``--add-dir`` root; the reply then names the absolute path. ``other-conversation``:
    into the ``brain/`` folder of another conversation (a path a model could name from an
    earlier conversation), named absolutely. ``not-image``: the ``.png`` holds text. Stream
    ``parameters`` of generate_image were never captured: the fake sends
    ``ImageName`` (a documented argument); the ``output`` wording is invented.
    """
    turn.user_input()
    root = _workspace(turn)
    args = directive_args(turn.prompt)
    directory = root
    if "outside" in args or "other-conversation" in args:
        state = turn.session.state_root or Path(os.getcwd())
        conversation = turn.session.conversation_id
        if "other-conversation" in args:
            conversation = str(uuid.uuid5(uuid.NAMESPACE_URL, conversation))
        directory = state / "brain" / conversation
    path = directory / f"{IMAGE_NAME}.png"
    step = ToolStep(
        turn,
        "generate_image",
        {"ImageName": IMAGE_NAME},
        args={"Prompt": "A single blue pixel.", "ImageName": IMAGE_NAME},
    )
    step.authorize()
    turn.pause(turn.knobs.fragment_delay_s)
    directory.mkdir(parents=True, exist_ok=True)
    path.write_bytes(NOT_AN_IMAGE if "not-image" in args else tiny_png())
    step.done(f"Generated image {IMAGE_NAME} saved to {path}")
    _reply_text(turn, f"Here is the image: {_shown(path, root)}")
    turn.finish()
    return None


#: ``ask-question``: the question, its options and agy's own reply when nobody answers
#: (samples/untether-1.3.1-ask-question-nohook, verbatim).
QUESTION = "Which colour do you prefer?"
QUESTION_OPTIONS = ("red", "green", "blue")
SECOND_QUESTION = "Which shade?"
SECOND_OPTIONS = ("light", "dark")
QUESTION_SKIPPED_REPLY = (
    "You skipped selecting an option. If you meant to choose one, please let me know "
    "whether you prefer red, green, or blue!"
)
#: What the model replies after reading the tool's error (wording invented).
QUESTION_ANSWERED_PREFIX = "The question tool said: "


def ask_question(turn: Turn) -> int | None:
    """agy asks the user: ``[fake-agy:ask-question] [multi] [free] [two]``.

    The arguments are the tool's (hooks-and-tools.md §B2): ``questions[{question,
    options, is_multi_select}]``; ``multi`` makes the question multi-select, ``free``
    drops its options, ``two`` adds a second question. Headless agy settles a question
    itself: with no hook, or a hook that allows, the call shows only as one
    ``step_type:"unknown"`` DONE step and the model replies as if the user had skipped it
    (samples/untether-1.3.1-ask-question-nohook: the same steps and reply). PreToolUse
    hooks see the call before it runs, as every tool's ([KG-R]: a hook gate receives
    ask_question calls and auto-allows them by default); a hook that denies hands the
    model its reason as the tool's error ``tool call denied by pre-tool hook: <reason>``
    (§A4, §A6), and the reply restates what the model read, so a test sees what agy
    received. Never captured: the stream of a hook-denied ask_question (the fake keeps
    the captured ``unknown`` DONE step) and how a real model words its reply.
    """
    turn.user_input()
    args = directive_args(turn.prompt)
    first: JsonObject = {
        "question": QUESTION,
        "options": [] if "free" in args else list(QUESTION_OPTIONS),
        "is_multi_select": "multi" in args,
    }
    questions = [first]
    if "two" in args:
        questions.append(
            {"question": SECOND_QUESTION, "options": list(SECOND_OPTIONS), "is_multi_select": False}
        )
    # The model's step that decides to ask: thinking only, usage but no text (as captured).
    turn.response().done(None, usage=reply_usage(turn, ""))
    index = turn.session.take_step_index()
    tool_args: JsonObject = {"questions": questions}
    blocked: Verdict | None = None
    for hook, action in turn.session.hooks.pre_tool_use("ask_question"):
        verdict = run_hook(turn, hook, action, tool="ask_question", args=tool_args, index=index)
        if blocked is None and not verdict.allowed:
            blocked = verdict
    turn.step("unknown", "DONE", index=index, timed=True)
    if blocked is None:
        _reply_text(turn, QUESTION_SKIPPED_REPLY)
    else:
        _reply_text(turn, QUESTION_ANSWERED_PREFIX + blocked.message)
    turn.finish()
    return None


def schema(turn: Turn) -> int | None:
    """A structured-output turn, with or without ``--json-schema``.

    ``result.structured_output`` is the object and ``result.response`` its serialized JSON
    (contract.md §3.5); the answer is given through the ``finish`` tool: ACTIVE as a
    ``tool`` step, DONE as ``step_type:"finish"`` (hooks-and-tools.md §B2). Without the
    flag the fake answers ``DEFAULT_SCHEMA`` so that a bridge, which passes no schema, can
    still be tested (real agy prints no structured_output then). ``[fake-agy:schema]
    stream`` answers as agy 1.3.1 does (samples/untether-1.3.1-json-schema-finish): one
    agent_response DONE whose text is the JSON line with agy's internal ``toolAction`` and
    ``toolSummary`` keys, which ``response`` restates; ``structured_output`` is clean.
    Without ``stream`` the model step is thinking-only (usage, no text, as in the 1.3.1
    captures); the finish step carries no usage (as captured).
    """
    turn.user_input()
    args = directive_args(turn.prompt)
    turn.pause(turn.knobs.fragment_delay_s)
    turn.step("checkpoint", timed=True, usage=CHECKPOINT_USAGE)
    topic = " ".join(arg for arg in args if arg != "stream") or DIRECTIVE.sub("", turn.prompt)
    structured = example_for_schema(turn.session.json_schema or DEFAULT_SCHEMA, topic.strip())
    text = dumps(structured)
    if "stream" in args and isinstance(structured, dict):
        summary = "Answering in the requested structure"
        line = dumps({**structured, "toolAction": summary, "toolSummary": summary}) + "\n"
        turn.response(gap=1).done(line, usage=reply_usage(turn, line))
        text = line
    else:
        turn.response(gap=1).done(None, usage=reply_usage(turn, text))
    finish = ToolStep(turn, "finish")  # no hooks: finish never reached one (§A5, [KAO-TP])
    turn.pause(turn.knobs.fragment_delay_s)
    turn.step("finish", index=finish.index, timed=True)
    turn.finish(response=text, extra={"structured_output": structured})
    return None


def unknown_events(turn: Turn) -> int | None:
    """Output a bridge cannot know, amid a normal turn (contract.md §3.3, §8.16, §10.3).

    In order: an unknown ``event`` line, a step of an unknown ``step_type``, a run_command
    step that passes through an unknown ``state`` between ACTIVE and DONE, a non-JSON
    stdout line, then a normal reply and result.
    """
    turn.user_input()
    session = turn.session
    session.out.raw(
        dumps(
            {
                "event": UNKNOWN_EVENT,
                UNKNOWN_EVENT: {"conversation_id": session.conversation_id, "note": "new"},
            }
        )
    )
    turn.pause(turn.knobs.fragment_delay_s)
    turn.step(UNKNOWN_STEP_TYPE, gap=1, timed=True)
    step = _command_step(turn, TOOL_COMMAND)
    step.authorize()
    turn.pause(turn.knobs.fragment_delay_s)
    step.update(UNKNOWN_STATE)
    turn.pause(turn.knobs.fragment_delay_s)
    step.done(TOOL_OUTPUT)
    session.out.raw(NOISE_LINE)
    _reply_text(turn, "Still here after some output I could not explain.")
    turn.finish()
    return None


def _hold(turn: Turn) -> None:
    """``gate=PATH`` among the directive's arguments: wait until PATH exists.

    A test control (no agy behaviour): it keeps a turn open at a known point, so a test
    can check what else happens meanwhile without relying on timing. Signals and the
    print timeout still end the wait.
    """
    for arg in directive_args(turn.prompt):
        if arg.startswith("gate="):
            gate = Path(arg.removeprefix("gate="))
            while not gate.exists():
                turn.pause(0.02)


def big_output(turn: Turn) -> int | None:
    """A run_command whose ``output`` is 1 MiB of text (``[fake-agy:big-output] [gate=P]``).

    Real agy caps tool output near 8 KiB with a ``<truncated N bytes>`` marker
    (hooks-and-tools.md §B2); this is a stress case beyond that. ``gate=P`` holds the turn
    after the tool step until the file P exists.
    """
    turn.user_input()
    step = _command_step(turn, BIG_OUTPUT_COMMAND)
    step.authorize()
    turn.pause(turn.knobs.fragment_delay_s)
    step.done(big_output_text())
    _hold(turn)
    _reply_text(turn, f"The command printed {BIG_OUTPUT_BYTES} bytes.")
    turn.finish()
    return None


def huge_line(turn: Turn) -> int | None:
    """One agent_response ``text_delta`` of ``HUGE_LINE_CHARS`` characters: a stdout line
    longer than 10 MB (``[fake-agy:huge-line] [gate=P]``; ``gate=P`` holds the turn after
    that line until the file P exists). The result's ``response`` restates it (§3.6)."""
    turn.user_input()
    response = turn.response(gap=1)
    response.fragment(huge_line_text())
    _hold(turn)
    response.done("\n", usage=reply_usage(turn, "a huge reply"))
    turn.finish()
    return None


def flood(turn: Turn) -> int | None:
    """``[fake-agy:flood] [N]``: one agent_response step of N (default
    ``FLOOD_DEFAULT``) ACTIVE ``text_delta``s written as fast as the fake can, then
    the DONE, and a result restating them (§3.6). A benchmark load, not agy's pacing:
    lines go out ``FLOOD_BATCH`` at a time, and signals are honoured between batches."""
    args = directive_args(turn.prompt)
    count = int(args[0]) if args and args[0].isdigit() else FLOOD_DEFAULT
    session = turn.session
    turn.user_input()
    response = turn.response(gap=1)
    head = {
        "conversation_id": session.conversation_id,
        "step_index": response.index,
        "state": "ACTIVE",
        "step_type": "agent_response",
    }
    batch: list[str] = []
    for n in range(count):
        delta = f"w{n} "
        turn.text.append(delta)
        batch.append(dumps({"event": "step_update", "step_update": {**head, "text_delta": delta}}))
        if len(batch) == FLOOD_BATCH:
            session.interrupts.check()
            session.out.raw_lines(batch)
            batch = []
    session.out.raw_lines(batch)
    response.done("\n", usage=reply_usage(turn, "flood"))
    turn.finish()
    return None


def paced_args(args: Sequence[str]) -> tuple[int, float] | None:
    """``paced``'s (count, interval in seconds), or None if the arguments are malformed."""
    if len(args) > 2:
        return None
    try:
        count = int(args[0]) if args else PACED_DEFAULT_COUNT
        interval_ms = float(args[1]) if len(args) > 1 else PACED_DEFAULT_INTERVAL_MS
    except ValueError:
        return None
    if count < 1 or not 0 <= interval_ms < float("inf"):
        return None
    return count, interval_ms / 1000


def paced_delta(index: int, emitted_ns: int) -> str:
    """The text of ``paced``'s delta ``index``: ``"<index>@<monotonic ns> "``."""
    return f"{index}@{emitted_ns} "


def paced(turn: Turn) -> int | None:
    """``[fake-agy:paced] [N] [INTERVAL_MS]``: one agent_response step of N ACTIVE
    ``text_delta``s, one every INTERVAL_MS (defaults ``PACED_DEFAULT_*``), each written
    on its own as agy does and carrying ``time.monotonic_ns()`` taken just before the
    write (``paced_delta``; CLOCK_MONOTONIC is system-wide, so a latency benchmark can
    subtract it from its receive time); then the DONE and a result restating them
    (§3.6). Emission times are scheduled from the first one, so a late write does not
    shift the rest. Malformed arguments end the turn with an ERROR result saying so (an
    invented test control, like ``flood``)."""
    parsed = paced_args(directive_args(turn.prompt))
    turn.user_input()
    if parsed is None:
        turn.finish("ERROR", error=f"fake-agy: bad paced arguments; usage: {PACED_USAGE}")
        return None
    count, interval = parsed
    response = turn.response(gap=1)
    start = time.monotonic()
    for index in range(count):
        turn.pause(start + index * interval - time.monotonic())
        response.fragment(paced_delta(index, time.monotonic_ns()))
    response.done("\n", usage=reply_usage(turn, "paced"))
    turn.finish()
    return None


def signed_out(turn: Turn) -> int:
    """FAKE_AGY_SIGNED_OUT in a session: the first turn fails on auth, exit 1.

    Before 1.3.2 the wording and shape are invented from contract.md §4 ("headless with
    no TTY exits with an authentication required error"); from 1.3.2 on they are the
    captured ones (samples/untether-1.3.2-signed-out-result, untether-1.3.x-stderr-and-
    exit: no init, a pre-turn ERROR result). The turn never starts, so no steps.
    """
    if turn.knobs.at_least(1, 3, 2):
        stderr_line("Error: authentication required. Run 'agy' to log in, then retry.")
        error = "authentication failed or timed out"
        turn.finish(
            "ERROR", error=error, extra={"conversation_id": "", "num_turns": 0}, timed=False
        )
        stderr_line(f"error: {error}")
        return 1
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
    "permission-check-failed": permission_check_failed,
    "partial-error": partial_error,
    "subagent": subagent,
    "print-timeout": print_timeout,
    "noise": noise,
    "silent-exit": silent_exit,
    "multi-response": multi_response,
    "edit": edit,
    "multi-tool": multi_tool,
    "permission-tool": permission_tool,
    "gated-command": gated_command,
    "image-out": image_out,
    "ask-question": ask_question,
    "recall": recall,
    "read": read,
    "schema": schema,
    "unknown-events": unknown_events,
    "big-output": big_output,
    "huge-line": huge_line,
    "flood": flood,
    "paced": paced,
}
