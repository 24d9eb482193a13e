"""Lifecycle hooks of the fake agy: ``hooks.json`` loading, ``/hooks``, PreToolUse runs.

Everything follows ``shared/agy/hooks-and-tools.md`` part A (cited §An); details found
only in public peer captures are cited by their tag there ([GOBBY], [KAO-CLI], ...), and
the few found in the public code index after that document was written are marked
"(index: ...)". Stdlib only, like the rest of the fake.

Loading (§A1, §A2): the user-level ``$HOME/.gemini/config/hooks.json`` and
``<root>/{.agents,.agent,_agents,_agent}/hooks.json`` of every *absolute* ``--add-dir``
root, read once at startup. The process cwd is not a root. A relative ``--add-dir`` loads
nothing (index: agy 1.2.8, "loaded 0 named hooks" for a relative grant). Each file is
decoded the way Go's ``encoding/json`` decodes into agy's structs: strict JSON, field
names matched case-insensitively (hence case-insensitive event names), unknown keys
ignored, a wrongly typed known field (a float or string ``timeout``, a non-bool
``enabled``, ...) rejects the whole file, silently except for one debug line.

Running (§A3-§A5): each enabled, matching PreToolUse handler runs as ``sh -c <command>``
in its own process group, cwd = the directory holding its hooks.json ([GOBBY]: a user
hook ran in ``~/.gemini/config``; index: agy 1.1.28 and 1.2.8, a workspace hook in
``<root>/.agents``), stdin = one camelCase JSON object, environment = the fake's plus
``ANTIGRAVITY_CONVERSATION_ID``. Its ``timeout`` (default 30 s) is enforced by killing
the group.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._fake_io import Interrupts, JsonObject, LaunchLog

#: Customization roots inside a workspace root ([SAW], §A2).
CUSTOMIZATION_DIRS = (".agents", ".agent", "_agents", "_agent")
#: The user-level file, relative to ``$HOME`` (§A2).
USER_HOOKS_FILE = (".gemini", "config", "hooks.json")
#: Events in the order ``/hooks`` lists a hook's actions ([GOBBY] 1.1.21 capture);
#: ``SessionStart`` is accepted by the 1.1.25 parser ([SAW]).
EVENTS = ("PreInvocation", "PostInvocation", "PreToolUse", "PostToolUse", "Stop", "SessionStart")
#: Events whose entries are ``{matcher, hooks:[handler...]}`` groups (§A1).
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse"})
DEFAULT_TIMEOUT_S = 30
#: ``modelName`` in the hook payload without ``--model`` (1.1.18 measurement, §A3).
DEFAULT_MODEL_NAME = "gemini-3-flash-agent"
#: Go's names of the signals a handler may die of (``signal: killed`` ...).
_GO_SIGNAL_NAMES: dict[int, str] = {
    signal.SIGKILL: "killed",
    signal.SIGTERM: "terminated",
    signal.SIGINT: "interrupt",
    signal.SIGHUP: "hangup",
    signal.SIGABRT: "aborted",
    signal.SIGSEGV: "segmentation fault",
    signal.SIGPIPE: "broken pipe",
}


class HooksFileError(ValueError):
    """A hooks.json agy would not load: the whole file is dropped (§A1)."""


@dataclasses.dataclass(frozen=True)
class Handler:
    """One handler: ``{type, command, timeout}`` (``prompt``/``model`` are ignored)."""

    type: str = ""
    command: str = ""
    #: As written; 0 when absent (``/hooks`` then omits ``timeout_seconds``).
    timeout: int = 0

    @property
    def timeout_s(self) -> int:
        return self.timeout if self.timeout > 0 else DEFAULT_TIMEOUT_S


@dataclasses.dataclass(frozen=True)
class Action:
    """A handler bound to an event; ``group``/``index`` name it in errors (§A1)."""

    event: str
    matcher: str | None
    group: int
    index: int
    handler: Handler


@dataclasses.dataclass(frozen=True)
class Hook:
    """One top-level name of a hooks.json file."""

    name: str
    enabled: bool
    source: str
    actions: tuple[Action, ...]

    @property
    def cwd(self) -> str:
        return os.path.dirname(self.source)

    def handler_id(self, action: Action) -> str:
        """``jsonhook__<hookName>_<Event>_<group>_<handler>`` ([KAO-CLI; GOBBY])."""
        return f"jsonhook__{self.name}_{action.event}_{action.group}_{action.index}"


# --- decoding like Go's encoding/json ---------------------------------------------------


class _Object(list[tuple[str, Any]]):
    """A JSON object as its key/value pairs in document order (duplicates kept)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid character {name[0]!r} looking for beginning of value")


def _decode(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_Object, parse_constant=_reject_constant)


def _kind(value: Any) -> str:
    if isinstance(value, _Object):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {value}"
    return "string" if isinstance(value, str) else "null"


def _fields(obj: _Object, names: Sequence[str]) -> dict[str, Any]:
    """The struct fields ``names`` of ``obj``: keys match case-insensitively, the last
    matching key in document order wins, unknown keys are ignored (Go's decoder)."""
    folded = {name.lower(): name for name in names}
    found: dict[str, Any] = {}
    for key, value in obj:
        name = folded.get(key.lower())
        if name is not None:
            found[name] = value
    return found


def _string(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise HooksFileError(f"json: cannot unmarshal {_kind(value)} into {where} of type string")
    return value


def _array(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, _Object) or not isinstance(value, list):
        raise HooksFileError(f"json: cannot unmarshal {_kind(value)} into {where} of type array")
    return value


def _object(value: Any, where: str) -> _Object:
    if value is None:
        return _Object()
    if not isinstance(value, _Object):
        raise HooksFileError(f"json: cannot unmarshal {_kind(value)} into {where} of type object")
    return value


def _handler(value: Any, where: str) -> Handler:
    fields = _fields(_object(value, where), ("type", "command", "timeout", "prompt", "model"))
    timeout = fields.get("timeout")
    if timeout is None:
        timeout = 0
    # A JSON integer that fits int32; 30.0, 3e1, "30" and true reject the file ([SAW]).
    elif type(timeout) is not int or not -(2**31) <= timeout < 2**31:
        raise HooksFileError(
            f"json: cannot unmarshal {_kind(timeout)} into {where}.timeout of type int32"
        )
    for key in ("prompt", "model"):
        _string(fields.get(key), f"{where}.{key}")
    return Handler(
        type=_string(fields.get("type"), f"{where}.type"),
        command=_string(fields.get("command"), f"{where}.command"),
        timeout=timeout,
    )


def parse_hooks_file(text: str, source: str) -> list[Hook]:
    """The hooks of one hooks.json text, in file order.

    Raises:
        HooksFileError: the file agy would drop whole (§A1).
    """
    try:
        top = _decode(text)
    except ValueError as exc:
        raise HooksFileError(str(exc)) from None
    if top is None:
        return []
    if not isinstance(top, _Object):
        raise HooksFileError(f"json: cannot unmarshal {_kind(top)} into map of hook definitions")
    definitions: dict[str, _Object] = {}
    for name, value in top:  # a map: a repeated name keeps its last definition
        definitions.pop(name, None)
        definitions[name] = _object(value, f"hook {name!r}")
    hooks = []
    for name, definition in definitions.items():
        fields = _fields(definition, ("enabled", *EVENTS))
        enabled = fields.get("enabled", True)
        if enabled is None:
            enabled = True
        if not isinstance(enabled, bool):
            raise HooksFileError(
                f"json: cannot unmarshal {_kind(enabled)} into {name}.enabled of type bool"
            )
        actions: list[Action] = []
        for event in EVENTS:
            entries = _array(fields.get(event), f"{name}.{event}")
            for group, entry in enumerate(entries):
                where = f"{name}.{event}[{group}]"
                if event not in TOOL_EVENTS:
                    actions.append(Action(event, None, group, 0, _handler(entry, where)))
                    continue
                group_fields = _fields(_object(entry, where), ("matcher", "hooks"))
                matcher = _string(group_fields.get("matcher"), f"{where}.matcher")
                handlers = _array(group_fields.get("hooks"), f"{where}.hooks")
                for index, handler in enumerate(handlers):
                    parsed = _handler(handler, f"{where}.hooks[{index}]")
                    actions.append(Action(event, matcher, group, index, parsed))
        hooks.append(Hook(name, enabled, source, tuple(actions)))
    return hooks


def matches(matcher: str | None, tool: str) -> bool:
    """``""``/``"*"`` match every tool; anything else is a regex searched in the tool name
    (Go's unanchored ``regexp.MatchString``; an invalid pattern matches nothing). §A1."""
    if not matcher or matcher == "*":
        return True
    try:
        return re.search(matcher, tool) is not None
    except re.error:
        return False


class HookSet:
    """The hooks one agy process loaded, in ``/hooks`` order (by name, then source)."""

    def __init__(self, hooks: Sequence[Hook] = ()) -> None:
        self.hooks = tuple(sorted(hooks, key=lambda hook: hook.name))

    def __bool__(self) -> bool:
        return bool(self.hooks)

    def pre_tool_use(self, tool: str) -> list[tuple[Hook, Action]]:
        """The command handlers to run before ``tool``, in order."""
        return [
            (hook, action)
            for hook in self.hooks
            if hook.enabled
            for action in hook.actions
            if action.event == "PreToolUse"
            and action.handler.type in ("", "command")  # prompt handlers are not modelled
            and matches(action.matcher, tool)
        ]

    def listing(self) -> tuple[str, JsonObject]:
        """``/hooks``: the TSV ``response`` and the ``command`` object ([GOBBY] 1.1.21).

        One TSV line per action: name, enabled|disabled, event, matcher or ``-``, type,
        command. Absent fields are omitted from the JSON actions, as in the capture.
        """
        lines: list[str] = []
        entries: list[JsonObject] = []
        for hook in self.hooks:
            actions: list[JsonObject] = []
            for action in hook.actions:
                kind = action.handler.type or "command"
                item: JsonObject = {"event": action.event}
                if action.matcher:
                    item["matcher"] = action.matcher
                item["type"] = kind
                if action.handler.command:
                    item["command"] = action.handler.command
                if action.handler.timeout:
                    item["timeout_seconds"] = action.handler.timeout
                actions.append(item)
                state = "enabled" if hook.enabled else "disabled"
                row = (hook.name, state, action.event, action.matcher or "-", kind)
                lines.append("\t".join((*row, action.handler.command)))
            entries.append(
                {
                    "name": hook.name,
                    "enabled": hook.enabled,
                    "source": hook.source,
                    "actions": actions,
                }
            )
        response = "".join(f"{line}\n" for line in lines)
        return response, {"name": "hooks", "data": {"hooks": entries}}


def hook_files(add_dirs: Sequence[str], home: str | None, log: LaunchLog) -> list[Path]:
    """Candidate hooks.json paths: user level, then each absolute root's customization
    dirs, each once."""
    candidates: list[Path] = []
    if home:
        candidates.append(Path(home, *USER_HOOKS_FILE))
    for root in add_dirs:
        if not os.path.isabs(root):
            log.record({"debug": f"ignoring relative --add-dir {root!r} for hooks"})
            continue
        candidates += [Path(root, sub, "hooks.json") for sub in CUSTOMIZATION_DIRS]
    seen: set[str] = set()
    files = []
    for path in candidates:
        resolved = os.path.realpath(path)
        if resolved not in seen and os.path.isfile(resolved):
            seen.add(resolved)
            files.append(Path(resolved))
    return files


def load_hooks(add_dirs: Sequence[str], home: str | None, log: LaunchLog) -> HookSet:
    """Every hook agy would load at startup; a bad file is dropped with one debug line."""
    hooks: list[Hook] = []
    loaded = 0
    for path in hook_files(add_dirs, home, log):
        try:
            # Go's decoder replaces invalid UTF-8; a BOM is an error before 1.3.1 (§A1).
            text = path.read_bytes().decode("utf-8", errors="replace")
            hooks += parse_hooks_file(text, str(path))
        except (OSError, HooksFileError) as exc:
            log.record({"debug": f"failed to parse hooks.json at {path}: {exc}"})
            continue
        loaded += 1
    # Wording measured on 1.1.27 (§A2) and 1.2.8.
    log.record({"debug": f"loaded {len(hooks)} named hooks from {loaded} hooks.json file(s)"})
    return HookSet(hooks)


# --- running PreToolUse handlers -------------------------------------------------------


def pre_tool_use_payload(
    *,
    tool: str,
    args: JsonObject,
    step_index: int,
    conversation_id: str,
    workspace_paths: Sequence[str],
    model_name: str,
    state_root: Path,
) -> JsonObject:
    """The PreToolUse stdin object (§A3; 1.1.18 keys, unchanged on 1.1.26 and 1.2.8)."""
    brain = state_root / "brain" / conversation_id
    return {
        "toolCall": {"name": tool, "args": args},
        "stepIdx": step_index,
        "conversationId": conversation_id,
        "workspacePaths": list(workspace_paths),
        "modelName": model_name,
        "transcriptPath": str(brain / ".system_generated" / "logs" / "transcript_full.jsonl"),
        "artifactDirectoryPath": str(brain),
    }


@dataclasses.dataclass(frozen=True)
class HandlerRun:
    """How one handler process ended."""

    #: The exit status; negative for a signal; None when it never started.
    returncode: int | None
    stdout: bytes = b""
    stderr: bytes = b""
    #: Killed at its ``timeout``.
    timed_out: bool = False
    #: Killed because the turn's ``--print-timeout`` expired first.
    turn_deadline: bool = False
    #: Why it could not start (Go's ``exec`` wording).
    start_error: str | None = None
    pid: int | None = None


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def run_handler(
    command: str,
    payload: bytes,
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout_s: float,
    interrupts: Interrupts,
    turn_deadline: float | None,
) -> HandlerRun:
    """Run ``sh -c command`` with ``payload`` on stdin until it exits and closes its
    output, its timeout expires or the turn deadline passes (both kill its process group).

    Raises:
        Interrupted: SIGINT/SIGTERM reached the fake; the handler's group is killed first.
    """
    with tempfile.TemporaryFile() as stdin:
        stdin.write(payload)
        stdin.seek(0)
        try:
            proc = subprocess.Popen(
                ["sh", "-c", command],
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=dict(env),
                process_group=0,
            )
        except OSError as exc:
            why = (exc.strerror or str(exc)).lower()
            if not os.path.isdir(cwd):
                return HandlerRun(None, start_error=f"chdir {cwd}: {why}")
            return HandlerRun(None, start_error=f'exec: "sh": {why}')
    assert proc.stdout is not None and proc.stderr is not None
    output = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    open_fds = list(output)
    limit = time.monotonic() + timeout_s
    try:
        while open_fds or proc.poll() is None:
            now = time.monotonic()
            if turn_deadline is not None and now >= turn_deadline:
                _kill_group(proc)
                return HandlerRun(proc.returncode, turn_deadline=True, pid=proc.pid)
            if now >= limit:
                _kill_group(proc)
                out, err = (bytes(output[fd]) for fd in output)
                return HandlerRun(proc.returncode, out, err, timed_out=True, pid=proc.pid)
            wait = limit - now if turn_deadline is None else min(limit, turn_deadline) - now
            if not open_fds:
                wait = min(wait, 0.01)  # output closed: poll for the exit
            for fd in interrupts.readable(open_fds, wait):
                chunk = os.read(fd, 1 << 16)
                if chunk:
                    output[fd] += chunk
                else:
                    open_fds.remove(fd)
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        proc.stdout.close()
        proc.stderr.close()
    out, err = (bytes(output[fd]) for fd in output)
    return HandlerRun(proc.returncode, out, err, pid=proc.pid)


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A handler's answer: allow, or block with the tool error and the model's reason."""

    allowed: bool
    #: ``tool_info.error.message`` of the blocked step.
    message: str = ""
    #: A deny's ``reason`` (None for a failed handler).
    reason: str | None = None
    #: ``allow``, ``deny`` or ``error`` (for the launch log).
    kind: str = "allow"


def _failed(handler_id: str, detail: str) -> Verdict:
    return Verdict(False, f'JSON hook "{handler_id}" failed: {detail}', kind="error")


def verdict_of(handler_id: str, run: HandlerRun, *, skip_permissions: bool) -> Verdict:
    """Turn a handler run into agy's decision (§A4, §A5).

    - killed at its timeout: ``command failed: signal: killed`` (1.1.26 wording, §A5);
    - exit status != 0: ``command failed: exit status N[, stderr: S]``, stdout ignored
      (§A4; no ``, stderr:`` part when stderr is empty, index: agy 1.2.8);
    - empty stdout: no opinion, the tool proceeds (§A4 lists this as conflicting; two
      later measurements in the index agree: 1.1.28 "nothing | 0 | ran", 1.2.8 "exits 0
      with EMPTY stdout -> the command RAN");
    - stdout that is not a JSON object with a string ``decision``/``reason``: a failure
      ("failed to unmarshal result from hook ... via protojson", index: agy 1.2.8; the
      rest of that wording is invented);
    - ``allow`` proceeds; ``deny_unless_prior_grant`` proceeds only under
      ``--dangerously-skip-permissions`` ([GOBBY] rec. 1.1.24); everything else (``deny``,
      no decision as in ``{}``, ``ask``/``force_ask`` that headless cannot prompt for) is
      a denial with the given (maybe empty) reason.
    """
    if run.start_error is not None:
        return _failed(handler_id, f"command failed: {run.start_error}")
    if run.timed_out:
        return _failed(handler_id, "command failed: signal: killed")
    code = run.returncode
    if code is not None and code < 0:
        name = _GO_SIGNAL_NAMES.get(-code, f"signal {-code}")
        return _failed(handler_id, f"command failed: signal: {name}")
    if code:
        stderr = run.stderr.decode("utf-8", errors="replace").strip()
        suffix = f", stderr: {stderr}" if stderr else ""
        return _failed(handler_id, f"command failed: exit status {code}{suffix}")
    text = run.stdout.decode("utf-8", errors="replace")
    if not text.strip():
        return Verdict(True)
    unmarshal = f'failed to unmarshal result from hook "{handler_id}" via protojson'
    try:
        answer = _decode(text)
    except ValueError as exc:
        return _failed(handler_id, f"{unmarshal}: {exc}")
    if not isinstance(answer, _Object):
        return _failed(handler_id, f"{unmarshal}: expected a JSON object, got {_kind(answer)}")
    fields = _fields(answer, ("decision", "reason"))
    try:
        decision = _string(fields.get("decision"), "decision")
        reason = _string(fields.get("reason"), "reason")
    except HooksFileError as exc:
        return _failed(handler_id, f"{unmarshal}: {exc}")
    if decision == "allow" or (decision == "deny_unless_prior_grant" and skip_permissions):
        return Verdict(True)
    return Verdict(
        False, f"tool call denied by pre-tool hook: {reason}", reason=reason, kind="deny"
    )
