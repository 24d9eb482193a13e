"""Session state of the fake agy: knobs, conversations, and the turn being served.

``Session`` holds what is cumulative (step indexes, ``num_turns``, ``usage``, duration,
contract.md §3.2, §3.5); ``Turn`` is the API scenarios use to emit one turn's steps and
its single ``result``; ``StateStore`` stands in for agy's per-conversation database (§7)
so that ``--conversation`` resumes continue counting.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._fake_hooks import DEFAULT_MODEL_NAME, HookSet
from ._fake_io import Interrupts, JsonObject, LaunchLog, Output, dumps, stderr_line
from ._fake_protocol import Usage


class PrintTimeout(Exception):
    """The turn outlived ``--print-timeout`` (or the print-timeout scenario fired)."""


_VALID_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclasses.dataclass
class ConversationState:
    """What the fake remembers of a conversation (agy keeps a SQLite DB, §7)."""

    conversation_id: str
    last_step_index: int = -1
    num_turns: int = 0
    workspace: str = ""
    #: The running ``result.usage`` sum (``FAKE_AGY_RESUME_USAGE`` continues it).
    usage: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The user's prompts so far: the conversation's history, which agy's model sees
    #: again after ``--conversation`` (the ``recall`` scenario answers from it).
    prompts: list[str] = dataclasses.field(default_factory=list)


class StateStore:
    """One JSON file per conversation id under ``FAKE_AGY_STATE_DIR``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, conversation_id: str) -> Path | None:
        if not _VALID_ID.fullmatch(conversation_id):
            return None  # malformed ids are "not found" (contract.md §1.1)
        return self.root / f"{conversation_id}.json"

    def load(self, conversation_id: str) -> ConversationState | None:
        path = self._path(conversation_id)
        if path is None:
            return None
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return ConversationState(
            conversation_id,
            int(data.get("last_step_index", -1)),
            int(data.get("num_turns", 0)),
            str(data.get("workspace", "")),
            Usage.from_json(data.get("usage")).to_json(),
            [str(p) for p in data.get("prompts", []) if isinstance(p, str)],
        )

    def save(self, state: ConversationState) -> None:
        path = self._path(state.conversation_id)
        if path is None:
            return
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        scratch.write_text(dumps(dataclasses.asdict(state)))
        os.replace(scratch, path)

    def latest(self, workspace: str) -> ConversationState | None:
        """The most recently saved conversation of ``workspace`` (``--continue``)."""
        try:
            files = sorted(self.root.glob("*.json"), key=lambda p: p.stat().st_mtime)
        except OSError:
            return None
        for path in reversed(files):
            state = self.load(path.stem)
            if state is not None and state.workspace == workspace:
                return state
        return None


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {raw!r}") from None
    if value < 0:
        raise ValueError(f"{name} must not be negative, not {raw!r}")
    return value


def _env_flag(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    return raw not in ("0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class Knobs:
    """The fake's own ``FAKE_AGY_*`` settings (documented in fake_agy's docstring)."""

    scenarios: tuple[str, ...] = ("echo",)
    fragment_delay_s: float = 0.01
    startup_delay_s: float = 0.0
    lazy_init: bool = False
    signed_out: bool = False
    quota_continue: bool = False
    slow_interval_s: float = 0.2
    slow_duration_s: float = 60.0
    spawn_children: bool = True
    child_lifetime_s: float = 120.0
    child_holds_stdio: bool = False
    crash_exit_code: int = 1
    version: str = ""
    agents: tuple[str, ...] = ()
    edit_delay_s: float = 0.2
    exit_delay_s: float = 0.0
    stdout_log: str | None = None
    resume_usage: bool = False
    ignore_hooks: bool = False
    commands_need_approval: bool = False
    tool_permission: str = "request-review"
    deny_always: bool = False
    release_file: str | None = None
    startup_hang: str = ""

    def at_least(self, *wanted: int) -> bool:
        """The version the fake plays (``FAKE_AGY_VERSION``) is ``wanted`` or later."""
        parts = tuple(int(p) if p.isdigit() else 0 for p in self.version.split(".")[:3])
        return parts >= wanted

    @classmethod
    def from_env(cls, env: Mapping[str, str], version: str) -> Knobs:
        """Read the knobs; raises ValueError naming the bad variable."""
        scenarios = tuple(name.strip() for name in env.get("FAKE_AGY_SCENARIO", "echo").split(","))
        crash_raw = env.get("FAKE_AGY_CRASH_EXIT_CODE", "1") or "1"
        if not crash_raw.isdigit():
            raise ValueError(f"FAKE_AGY_CRASH_EXIT_CODE must be an integer, not {crash_raw!r}")
        agents = env.get("FAKE_AGY_AGENTS", "fake-reviewer,fake-researcher")
        hang = env.get("FAKE_AGY_STARTUP_HANG", "").strip()
        if hang not in ("", "silent", "garbage"):
            raise ValueError(f"FAKE_AGY_STARTUP_HANG must be silent or garbage, not {hang!r}")
        tool_permission = env.get("FAKE_AGY_TOOL_PERMISSION", "").strip() or "request-review"
        if tool_permission not in TOOL_PERMISSIONS:
            raise ValueError(
                f"FAKE_AGY_TOOL_PERMISSION must be one of {', '.join(TOOL_PERMISSIONS)}, "
                f"not {tool_permission!r}"
            )
        return cls(
            scenarios=tuple(name for name in scenarios if name) or ("echo",),
            fragment_delay_s=_env_float(env, "FAKE_AGY_FRAGMENT_DELAY", 0.01),
            startup_delay_s=_env_float(env, "FAKE_AGY_STARTUP_DELAY", 0.0),
            lazy_init=_env_flag(env, "FAKE_AGY_LAZY_INIT"),
            signed_out=_env_flag(env, "FAKE_AGY_SIGNED_OUT"),
            quota_continue=_env_flag(env, "FAKE_AGY_QUOTA_CONTINUE"),
            slow_interval_s=_env_float(env, "FAKE_AGY_SLOW_INTERVAL", 0.2),
            slow_duration_s=_env_float(env, "FAKE_AGY_SLOW_SECONDS", 60.0),
            spawn_children=_env_flag(env, "FAKE_AGY_SPAWN_CHILDREN", default=True),
            child_lifetime_s=_env_float(env, "FAKE_AGY_CHILD_SECONDS", 120.0),
            child_holds_stdio=_env_flag(env, "FAKE_AGY_CHILD_HOLDS_STDIO"),
            crash_exit_code=int(crash_raw),
            version=env.get("FAKE_AGY_VERSION", "") or version,
            agents=tuple(name.strip() for name in agents.split(",") if name.strip()),
            edit_delay_s=_env_float(env, "FAKE_AGY_EDIT_DELAY", 0.2),
            exit_delay_s=_env_float(env, "FAKE_AGY_EXIT_DELAY", 0.0),
            stdout_log=env.get("FAKE_AGY_STDOUT_LOG") or None,
            resume_usage=_env_flag(env, "FAKE_AGY_RESUME_USAGE"),
            ignore_hooks=_env_flag(env, "FAKE_AGY_IGNORE_HOOKS"),
            commands_need_approval=_env_flag(env, "FAKE_AGY_COMMANDS_NEED_APPROVAL"),
            tool_permission=tool_permission,
            deny_always=_env_flag(env, "FAKE_AGY_DENY_ALWAYS"),
            release_file=env.get("FAKE_AGY_RELEASE_FILE") or None,
            startup_hang=hang,
        )


#: settings.json ``toolPermission`` values (hooks-and-tools.md §A9; contract.md §3.1).
TOOL_PERMISSIONS = ("request-review", "always-proceed", "strict", "proceed-in-sandbox")


class Session:
    """One process's conversation: ids, counters and the output it writes.

    ``num_turns`` continues a resumed conversation's count; ``usage`` and
    ``duration_seconds`` are running sums over this process (contract.md §3.5).
    """

    def __init__(
        self,
        *,
        conversation_id: str,
        next_step_index: int,
        num_turns: int,
        out: Output,
        interrupts: Interrupts,
        knobs: Knobs,
        log: LaunchLog,
        store: StateStore | None,
        workspace: str,
        permission_mode: str,
        json_schema: JsonObject | None,
        print_timeout_s: float,
        print_timeout_text: str,
        state_root: Path | None = None,
        hooks: HookSet | None = None,
        workspace_paths: Sequence[str] = (),
        model_name: str = DEFAULT_MODEL_NAME,
        prompts: Sequence[str] = (),
    ) -> None:
        self.conversation_id = conversation_id
        #: Every user prompt of the conversation, earlier processes' included.
        self.prompts = list(prompts)
        self.next_step_index = next_step_index
        self.num_turns = num_turns
        self.out = out
        self.interrupts = interrupts
        self.knobs = knobs
        self.log = log
        self.store = store
        self.workspace = workspace
        self.permission_mode = permission_mode
        self.json_schema = json_schema
        self.print_timeout_s = print_timeout_s
        self.print_timeout_text = print_timeout_text
        #: Stands in for ``~/.gemini/antigravity-cli`` (contract.md §7): ``brain/<id>/``
        #: artifacts such as generated images go below it.
        self.state_root = state_root
        #: Hooks loaded at startup (``_fake_hooks``); PreToolUse ones gate tool steps.
        self.hooks = hooks or HookSet()
        #: The absolute ``--add-dir`` roots: the hook payload's ``workspacePaths`` (§A3).
        self.workspace_paths = tuple(workspace_paths)
        #: The hook payload's ``modelName``: the ``--model`` slug or agy's default.
        self.model_name = model_name
        self.usage = Usage()
        self.duration_s = 0.0
        #: Turns started by this process (``num_turns`` also counts a resumed history).
        self.turns_served = 0
        self.children: list[subprocess.Popen[bytes]] = []

    def take_step_index(self, gap: int = 0) -> int:
        """The next step index, skipping ``gap`` unseen steps (gaps are normal, §3.2)."""
        index = self.next_step_index + gap
        self.next_step_index = index + 1
        return index

    def persist(self) -> None:
        if self.store is not None:
            self.store.save(
                ConversationState(
                    self.conversation_id,
                    self.next_step_index - 1,
                    self.num_turns,
                    self.workspace,
                    self.usage.to_json(),
                    self.prompts,
                )
            )

    def spawn_sleepers(self) -> None:
        """Start two long ``sleep`` children like agy's tool shells (contract.md §5).

        One stays in the fake's process group, one gets its own session and group (agy
        puts ``run_command`` children there). Both inherit the environment so tests can
        find leftovers by a marker variable. The fake never kills them: cleaning up
        after agy is the bridge's job.
        """
        stdio = None if self.knobs.child_holds_stdio else subprocess.DEVNULL
        for own_session in (False, True):
            child = subprocess.Popen(
                ["sleep", f"{self.knobs.child_lifetime_s:g}"],
                stdin=subprocess.DEVNULL,
                stdout=stdio,
                stderr=stdio,
                start_new_session=own_session,
            )
            self.children.append(child)
            self.log.record(
                {
                    "child": {
                        "pid": child.pid,
                        "pgid": os.getpgid(child.pid),
                        "sid": os.getsid(child.pid),
                        "own_session": own_session,
                    }
                }
            )


def go_number(value: float) -> float | int:
    """A float as Go's encoder writes it: integral values without ``.0`` (``0``, not ``0.0``)."""
    return int(value) if value == int(value) else round(value, 9)


def _duration(seconds: float) -> float | int:
    # Keep Python's float repr in plain decimal form (Go writes 0.00005, Python 5e-05).
    return go_number(max(seconds, 0.0001))


class Response:
    """One ``agent_response`` step: ACTIVE fragments, then one DONE (contract.md §3.2)."""

    def __init__(self, turn: Turn, index: int) -> None:
        self._turn = turn
        self.index = index

    def fragment(self, text: str) -> None:
        self._turn.step("agent_response", "ACTIVE", index=self.index, text_delta=text)

    def done(self, final: str | None = "\n", *, usage: Usage | None = None) -> None:
        self._turn.step(
            "agent_response",
            "DONE",
            index=self.index,
            text_delta=final,
            timed=True,
            usage=usage,
        )


class Turn:
    """The turn being served: emits its steps and exactly one ``result``."""

    def __init__(self, session: Session, prompt: str) -> None:
        self.session = session
        self.knobs = session.knobs
        self.prompt = prompt
        self.started = time.monotonic()
        self._mark = self.started
        self.deadline = (
            self.started + session.print_timeout_s if session.print_timeout_s > 0 else None
        )
        self.text: list[str] = []
        self.usage = Usage()
        self.finished = False
        #: How agy's own check ends a soft-denied step: "1.3" DONE without output and a
        #: SUCCESS result, "1.2" ERROR ``permission check failed …`` and CANCELED.
        self.soft_deny_shape = "1.3"

    def pause(self, seconds: float) -> None:
        """Sleep, but wake at once for a signal or the print timeout.

        Raises:
            Interrupted: SIGINT/SIGTERM arrived.
            PrintTimeout: ``--print-timeout`` expired.
        """
        end = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            if self.deadline is not None and now >= self.deadline:
                raise PrintTimeout
            limit = end if self.deadline is None else min(end, self.deadline)
            if now >= end:
                self.session.interrupts.check()
                return
            self.session.interrupts.wait(None, limit - now)

    def step(
        self,
        step_type: str,
        state: str = "DONE",
        *,
        index: int | None = None,
        gap: int = 0,
        timed: bool = False,
        usage: Usage | None = None,
        **fields: Any,
    ) -> int:
        """Emit one ``step_update``; ``fields`` keep their order, None values are dropped.

        ``timed`` adds ``duration_seconds`` (time since the previous finished step);
        ``usage`` is added to the turn's and the session's running sums.
        """
        self.session.interrupts.check()
        if index is None:
            index = self.session.take_step_index(gap)
        payload: JsonObject = {
            "conversation_id": self.session.conversation_id,
            "step_index": index,
            "state": state,
            "step_type": step_type,
        }
        payload.update((key, value) for key, value in fields.items() if value is not None)
        if timed:
            now = time.monotonic()
            payload["duration_seconds"] = _duration(now - self._mark)
            self._mark = now
        if usage is not None:
            payload["usage"] = usage.to_json()
            self.usage.add(usage)
            self.session.usage.add(usage)
        # tool_info goes last, as in the captures (contract.md §3.4).
        if "tool_info" in payload:
            payload["tool_info"] = payload.pop("tool_info")
        delta = payload.get("text_delta")
        if isinstance(delta, str):
            self.text.append(delta)
        self.session.out.event("step_update", payload)
        self.session.persist()
        return index

    def user_input(self) -> int:
        """The first event of every turn (contract.md §2.3); counts the turn."""
        self.session.num_turns += 1
        self.session.turns_served += 1
        self.session.prompts.append(self.prompt)
        return self.step("user_input")

    def response(self, gap: int = 0) -> Response:
        return Response(self, self.session.take_step_index(gap))

    def say(self, fragments: Sequence[str], *, usage: Usage, gap: int = 0) -> None:
        """A whole reply: ACTIVE per fragment, a DONE ``"\\n"`` with usage."""
        response = self.response(gap)
        for fragment in fragments:
            response.fragment(fragment)
            self.pause(self.knobs.fragment_delay_s)
        response.done("\n", usage=usage)

    def finish(
        self,
        status: str = "SUCCESS",
        *,
        error: str | None = None,
        response: str | None = None,
        extra: JsonObject | None = None,
        timed: bool = True,
    ) -> None:
        """Emit the turn's one ``result`` with cumulative counters (contract.md §3.5).

        ``timed=False`` adds no time: input-validation results that never ran a turn.
        """
        elapsed = time.monotonic() - self.started if timed else 0.0
        payload: JsonObject = {
            "conversation_id": self.session.conversation_id,
            "status": status,
            "response": "".join(self.text) if response is None else response,
        }
        if error is not None:
            payload["error"] = error  # SUCCESS results carry no error key
        payload["duration_seconds"] = go_number(self.session.duration_s + elapsed)
        payload["num_turns"] = self.session.num_turns
        payload["usage"] = self.session.usage.to_json()
        payload.update(extra or {})
        self.session.duration_s += elapsed
        self.finished = True
        self.session.out.event("result", payload)
        self.session.persist()

    def stderr(self, line: str) -> None:
        stderr_line(line)
