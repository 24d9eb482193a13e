"""Wire-level rules of the fake agy: stdin validation, usage arithmetic, captures (pure).

No I/O here: ``parse_input_line`` turns one stdin line into a verdict following the
validation table of contract.md §2.2, ``Usage`` is the token record of §3.5, and
``parse_capture`` splits a recorded ``.ndjson`` transcript into replayable turns.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

#: Slash commands the CLI answers itself; in stream input they end the session with an
#: ERROR result and exit 2 (contract.md §2.2; list from CL 1.1.11-1.1.12 in §6).
CLI_SLASH_COMMANDS = frozenset(
    {"usage", "quota", "credits", "model", "effort", "skills", "permissions", "hooks",
     "help", "changelog", "config"}
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class UserPrompt:
    """A valid ``{"event":"user",...}`` line: run a turn with ``text``."""

    text: str


@dataclasses.dataclass(frozen=True)
class Ignored:
    """An unknown event: warn on stderr and keep reading (contract.md §2.2)."""

    warning: str


@dataclasses.dataclass(frozen=True)
class Fatal:
    """A line that ends the session: ERROR result with ``error``, optional stderr line."""

    error: str
    stderr: str | None
    exit_code: int


InputVerdict = UserPrompt | Ignored | Fatal


def _fatal(message: str, exit_code: int = 1) -> Fatal:
    # The measured stderr lines are "error: <message>" (samples/stderr-lines-observed.txt);
    # the result's error field carries the bare message.
    return Fatal(message, f"error: {message}", exit_code)


def parse_input_line(line: bytes, *, slash_commands: bool) -> InputVerdict | None:
    """Validate one stdin line (without its newline) as agy 1.2.7 does (contract.md §2.2).

    Returns None for a blank line (skipped; agy's handling of blank lines is not captured).
    ``slash_commands`` is False under ``--disable-slash-commands``: ``/model`` is then plain
    text for the model rather than a CLI command (an assumption; contract.md §1.1).
    """
    text = line.decode("utf-8", errors="replace")  # Go's decoder also replaces bad UTF-8
    if not text.strip():
        return None
    try:
        message = json.loads(text)
    except ValueError as exc:
        # Real wording not captured ("decode error", §2.2); exit code 1 is documented.
        return _fatal(f"invalid stream input message: {exc}")
    if not isinstance(message, dict):
        return _fatal(
            f"invalid stream input message: cannot decode JSON {type(message).__name__} "
            "into an object"
        )
    if "event" not in message:
        return _fatal('stream input message is missing the "event" field')
    event = message["event"]
    if event in ("control_request", "control_response"):
        return _fatal(f'stream input message event "{event}" is not supported yet', 2)
    if event != "user":
        shown = event if isinstance(event, str) else json.dumps(event)
        return Ignored(f'warning: ignoring unsupported stream input message event "{shown}"')
    if "message" not in message:
        return _fatal('stream input "user" message is missing the "message" field')
    body = message["message"]
    if not isinstance(body, dict):
        return _fatal('invalid stream input message: "message" must be an object')
    prompt = _content_text(body.get("content"))
    if isinstance(prompt, Fatal):
        return prompt
    if not prompt:
        return _fatal('stream input "user" message has no content')
    command = _cli_slash_command(prompt) if slash_commands else None
    if command is not None:
        # Documented result text; no stderr line (contract.md §2.2, official-docs-misc-lines).
        error = (
            f"/{command} is answered by the CLI itself and is unavailable with "
            f"--input-format stream-json; run it as its own --print /{command} invocation"
        )
        return Fatal(error, None, 2)
    return UserPrompt(prompt)


def _content_text(content: Any) -> str | Fatal:
    """The prompt text of ``content``: a string or an array of text blocks (§2.1)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return _fatal('invalid stream input message: "content" must be a string or an array')
    texts: list[str] = []
    for position, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind != "text":
            # "text is the only block type: an image/other block ends the session with an
            # ERROR result, exit 1" (§2.1); the real message text was not captured.
            return _fatal(
                f'stream input "user" message content block {position} has unsupported '
                f'type {json.dumps(kind)}; only "text" blocks are supported'
            )
        value = block.get("text")
        texts.append(value if isinstance(value, str) else "")
    # How agy joins several text blocks is not captured; a newline keeps them apart.
    return "\n".join(text for text in texts if text)


def _cli_slash_command(prompt: str) -> str | None:
    stripped = prompt.strip()
    if not stripped.startswith("/"):
        return None
    name = stripped[1:].split(maxsplit=1)[0].lower() if len(stripped) > 1 else ""
    return name if name in CLI_SLASH_COMMANDS else None


@dataclasses.dataclass
class Usage:
    """Token counts of one step or a running sum (contract.md §3.5).

    Invariants seen in every capture: ``total = input + output``, ``thinking <= output``
    (thinking is part of output), ``cache_read`` is reported separately.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    thinking_tokens: int = 0
    cache_read_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.thinking_tokens += other.thinking_tokens
        self.cache_read_tokens += other.cache_read_tokens

    def to_json(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "thinking_tokens": self.thinking_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "total_tokens": self.total_tokens,
        }

    @classmethod
    def from_json(cls, data: Any) -> Usage:
        if not isinstance(data, dict):
            return cls()
        return cls(
            *(
                int(data.get(key, 0) or 0)
                for key in ("input_tokens", "output_tokens", "thinking_tokens", "cache_read_tokens")
            )
        )


@dataclasses.dataclass
class Capture:
    """A recorded transcript cut into turns for ``FAKE_AGY_REPLAY``.

    ``turns[i]`` holds the verbatim lines from just after the previous ``result`` through
    the i-th ``result`` (a trailing group without a result is kept as a last, open turn).
    The remaining fields are where the capture left its counters, so that echo turns
    served after the capture runs out continue them.
    """

    init_line: str | None
    turns: list[list[str]]
    conversation_id: str
    last_step_index: int
    num_turns: int
    usage: Usage
    duration_seconds: float


def parse_capture(text: str) -> Capture:
    """Split an ``.ndjson`` capture into its ``init`` line and per-turn line groups."""
    init_line: str | None = None
    turns: list[list[str]] = []
    current: list[str] = []
    conversation_id = ""
    last_step = -1
    num_turns = 0
    usage = Usage()
    duration = 0.0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        name = event.get("event") if isinstance(event, dict) else None
        if name == "init" and init_line is None and not turns and not current:
            init_line = line
            conversation_id = str(event.get("conversation_id", "")) if event else ""
            continue
        current.append(line)
        if name == "step_update" and isinstance(event, dict):
            index = event.get("step_update", {}).get("step_index")
            if isinstance(index, int):
                last_step = max(last_step, index)
        if name == "result" and isinstance(event, dict):
            result = event.get("result", {})
            num_turns = int(result.get("num_turns", num_turns) or 0)
            usage = Usage.from_json(result.get("usage"))
            duration = float(result.get("duration_seconds", duration) or 0)
            conversation_id = conversation_id or str(result.get("conversation_id", ""))
            turns.append(current)
            current = []
    if current:
        turns.append(current)
    return Capture(init_line, turns, conversation_id, last_step, num_turns, usage, duration)
