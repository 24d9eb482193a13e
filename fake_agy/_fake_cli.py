"""Command line of the fake agy: Go-style flag parsing, usage text, model table (pure).

agy is a Go binary using the standard ``flag`` package (contract.md §1): ``-x`` and ``--x``
are the same flag, ``-x=v`` and ``-x v`` are equivalent, a bool flag never consumes the
next token, parsing stops at the first non-flag argument (a subcommand) or at ``--``, and
every parse error prints the error and the usage text on stderr and exits 2. ``parse_argv``
reproduces ``flag.FlagSet.parseOne`` step by step so the error strings match Go's.

Stdlib only: the fake runs as a plain subprocess and must not import trio or attrs.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence

#: ``agy --version`` (contract.md §1.1: "prints e.g. 1.1.14"; §9 asks for a 1.2.14-style line).
VERSION = "1.2.14"

#: The exact 56-name ``init.tools`` list of the 1.1.11 and 1.1.14 captures (contract.md §3.1,
#: samples/tiezbro-1.1.14-pong-*.ndjson). Later versions add ``ask_custom_permission``.
TOOLS: tuple[str, ...] = (
    "ask_permission", "ask_question", "browser_click_element", "browser_drag_pixel_to_pixel",
    "browser_get_dom", "browser_get_network_request", "browser_input",
    "browser_list_network_requests", "browser_mouse_down", "browser_mouse_up",
    "browser_move_mouse", "browser_press_key", "browser_refresh_page", "browser_resize_window",
    "browser_scroll", "browser_scroll_dom", "browser_select_option", "browser_subagent",
    "call_mcp_tool", "capture_browser_console_logs", "capture_browser_screenshot",
    "click_browser_pixel", "command_status", "define_subagent", "delete_knowledge",
    "execute_browser_javascript", "find_by_name", "finish", "generate_image", "grep_search",
    "invoke_subagent", "list_browser_pages", "list_dir", "list_permissions", "list_resources",
    "manage_inbox", "manage_subagents", "manage_task", "multi_replace_file_content",
    "notebook_edit", "notebook_execution", "open_browser_url", "read_browser_page",
    "read_resource", "read_url_content", "replace_file_content", "run_command", "schedule",
    "search_web", "sed_file", "send_command_input", "send_message", "view_file", "wait",
    "wait_5_seconds", "write_to_file",
)  # fmt: skip

#: ``(slug, display name)`` in the order of the 1.1.14 "Available models" list
#: (samples/tiezbro-1.1.14-invalid-model-error.ndjson); slugs follow the ``agy models``
#: convention of contract.md §6 (``gemini-3.8-flash-high``, ``claude-opus-5-5-medium``).
MODELS: tuple[tuple[str, str], ...] = (
    ("gemini-3.7-flash-high", "Gemini 3.7 Flash (High)"),
    ("gemini-3.7-flash-medium", "Gemini 3.7 Flash (Medium)"),
    ("gemini-3.7-flash-low", "Gemini 3.7 Flash (Low)"),
    ("gemini-3.6-flash-high", "Gemini 3.6 Flash (High)"),
    ("gemini-3.6-flash-medium", "Gemini 3.6 Flash (Medium)"),
    ("gemini-3.6-flash-low", "Gemini 3.6 Flash (Low)"),
    ("gemini-3.5-flash-high", "Gemini 3.5 Flash (High)"),
    ("gemini-3.5-flash-medium", "Gemini 3.5 Flash (Medium)"),
    ("gemini-3.5-flash-low", "Gemini 3.5 Flash (Low)"),
    ("gemini-3.1-pro-high", "Gemini 3.1 Pro (High)"),
    ("gemini-3.1-pro-low", "Gemini 3.1 Pro (Low)"),
    ("claude-sonnet-4-6-thinking", "Claude Sonnet 4.6 (Thinking)"),
    ("claude-opus-4-6-thinking", "Claude Opus 4.6 (Thinking)"),
    ("gpt-oss-120b-medium", "GPT-OSS 120B (Medium)"),
)


def go_quote(text: str) -> str:
    """Go's ``%q`` for ordinary strings: double quotes, backslash escapes."""
    return json.dumps(text, ensure_ascii=False)


def model_display_name(value: str) -> str | None:
    """The display name for a ``--model`` slug or display name, or None if unknown."""
    for slug, display in MODELS:
        if value in (slug, display):
            return display
    return None


def invalid_model_error(model: str, effort: str) -> str:
    """The 1.1.14 ``result.error`` text for an unknown ``--model`` (contract.md §3.5)."""
    available = "".join(f"\n  {display}" for _, display in MODELS)
    return (
        f'invalid model selection (--model "{model}" --effort "{effort}"): model {model} '
        f"is not recognized as a known model or custom model in settings\n"
        f"Available models:{available}"
    )


class FlagError(Exception):
    """A Go ``flag`` parse failure: print ``message`` and the usage, exit 2.

    ``message`` is None for ``-h``/``-help`` (Go's ``ErrHelp``: usage only, exit 0).
    """

    def __init__(self, message: str | None) -> None:
        super().__init__(message)
        self.message = message


@dataclasses.dataclass
class Options:
    """Parsed agy flags; ``None`` means the flag was not given."""

    print_prompt: str | None = None
    output_format: str = "text"
    input_format: str = "text"
    json_schema: str | None = None
    model: str | None = None
    effort: str | None = None
    mode: str | None = None
    agent: str | None = None
    sandbox: bool = False
    skip_permissions: bool = False
    disable_slash_commands: bool = False
    print_timeout: str = "0s"
    conversation: str | None = None
    continue_last: bool = False
    add_dirs: list[str] = dataclasses.field(default_factory=list)
    log_file: str | None = None
    project: str | None = None
    new_project: bool = False
    prompt_interactive: str | None = None
    remote_control: bool = False
    version: bool = False
    #: Non-flag arguments: a subcommand and its arguments, or an ignored stray prompt.
    positional: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class _Flag:
    names: tuple[str, ...]
    attr: str
    kind: str  # "string", "bool", "list" (repeatable string) or "duration"
    help: str


#: The flag table of ``agy --help`` (1.1.14 text, samples/tiezbro-1.1.14-help-and-flag-error
#: .stderr.txt) with the 1.2.x changes of contract.md §1.1: ``--effort`` levels (1.3.1 help),
#: ``--print-timeout`` default 0s (1.2.6+), ``--remote-control`` (1.2.6+). Usage rows are
#: printed in this order; ``--version`` is accepted but, as in the 1.1.14 help, not listed.
_FLAGS: tuple[_Flag, ...] = (
    _Flag(("add-dir",), "add_dirs", "list",
          "Add a directory to the workspace (repeatable) (default [])"),
    _Flag(("agent",), "agent", "string", "Agent for the current CLI session"),
    _Flag(("c",), "continue_last", "bool", "Short alias for --continue"),
    _Flag(("continue",), "continue_last", "bool", "Continue the most recent conversation"),
    _Flag(("conversation",), "conversation", "string", "Resume a previous conversation by ID"),
    _Flag(("dangerously-skip-permissions",), "skip_permissions", "bool",
          "Auto-approve all tool permission requests without prompting"),
    _Flag(("disable-slash-commands",), "disable_slash_commands", "bool",
          "Disable slash command and skill expansion in print mode"),
    _Flag(("effort",), "effort", "string",
          "Reasoning effort for the current CLI session (low|medium|high|xhigh|max)"),
    _Flag(("i",), "prompt_interactive", "string", "Short alias for --prompt-interactive"),
    _Flag(("input-format",), "input_format", "string",
          "Input format for print mode (text, stream-json). stream-json reads one NDJSON "
          "message per line from stdin and runs a turn for each; it requires --output-format "
          "stream-json (default text)"),
    _Flag(("json-schema",), "json_schema", "string",
          "Optional JSON schema string or path to a schema file to enforce structured output "
          "(for stream-json, only applicable to the final result)"),
    _Flag(("log-file",), "log_file", "string", "Override CLI log file path"),
    _Flag(("mode",), "mode", "string",
          "Set the agent execution mode for this session (accept-edits, plan)"),
    _Flag(("model",), "model", "string", "Model for the current CLI session"),
    _Flag(("new-project",), "new_project", "bool", "Create a new project for this session"),
    _Flag(("output-format",), "output_format", "string",
          "Output format for print mode (text, json, stream-json) (default text)"),
    _Flag(("p",), "print_prompt", "string", "Short alias for --print"),
    _Flag(("print",), "print_prompt", "string",
          "Run a single prompt non-interactively and print the response"),
    _Flag(("print-timeout",), "print_timeout", "duration",
          "Optional time limit for print mode; 0 waits until the turn completes (default 0s)"),
    _Flag(("project",), "project", "string", "Project ID for the current CLI session"),
    _Flag(("prompt",), "print_prompt", "string", "Alias for --print"),
    _Flag(("prompt-interactive",), "prompt_interactive", "string",
          "Run an initial prompt interactively and continue the session"),
    _Flag(("remote-control",), "remote_control", "bool",
          "Allow this session to be controlled remotely"),
    _Flag(("sandbox",), "sandbox", "bool", "Run in a sandbox with terminal restrictions enabled"),
    _Flag(("version",), "version", "bool", "Print the CLI version"),
)  # fmt: skip

_BY_NAME: dict[str, _Flag] = {name: flag for flag in _FLAGS for name in flag.names}

#: Subcommands listed by ``agy --help`` (1.1.14) plus later ones (contract.md §1.1).
SUBCOMMANDS: tuple[tuple[str, str], ...] = (
    ("agent", "List available agents"),
    ("agents", "List available agents"),
    ("changelog", "Show changelog and release notes"),
    ("help", "Show help for subcommands"),
    ("install", "Configure environment paths and shell settings"),
    ("mcp", "Manage MCP servers"),
    ("models", "List available models"),
    ("plugin", "Manage plugins (install, uninstall, list, enable, disable)"),
    ("plugins", "Alias for plugin"),
    ("remote-control", "Start a remote-control session"),
    ("update", "Update CLI"),
)


def usage_text() -> str:
    """The ``Usage of agy:`` block Go's flag package prints after a parse error."""
    rows = [f"  {'-' if len(f.names[0]) == 1 else '--'}{f.names[0]}" for f in _FLAGS]
    lines = ["Usage of agy:"]
    for row, flag in zip(rows, _FLAGS, strict=True):
        if flag.attr == "version":
            continue
        lines.append(f"{row:<34}{flag.help}")
    lines += ["", "Available subcommands:"]
    lines += [f"  {name:<16}{text}" for name, text in SUBCOMMANDS]
    return "\n".join(lines) + "\n"


_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]*)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
                   "m": 60.0, "h": 3600.0}  # fmt: skip


def parse_go_duration(text: str) -> float:
    """Seconds in a Go ``time.ParseDuration`` string (``0``, ``90s``, ``1h30m``, ``5m0s``).

    Raises:
        ValueError: the text is not a Go duration.
    """
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None or match.group(1) in ("", "."):
            raise ValueError(text)
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos == 0:
        raise ValueError(text)
    return -total if text.startswith("-") else total


_GO_BOOLS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
             "0": False, "f": False, "F": False, "FALSE": False, "false": False,
             "False": False}  # fmt: skip


def parse_argv(argv: Sequence[str]) -> Options:
    """Parse agy's argv (without the program name) the way Go's ``flag`` package does.

    Raises:
        FlagError: with Go's exact message (``flag needs an argument: -print``,
            ``flag provided but not defined: -x``, ...) or None for ``-h``/``-help``.
    """
    opts = Options()
    args = list(argv)
    while args:
        arg = args[0]
        if len(arg) < 2 or arg[0] != "-":
            break  # first non-flag argument: the rest is positional
        minuses = 2 if arg[1] == "-" else 1
        if arg == "--":
            args.pop(0)
            break
        name = arg[minuses:]
        if not name or name[0] in "-=":
            raise FlagError(f"bad flag syntax: {arg}")
        args.pop(0)
        value: str | None = None
        if "=" in name[1:]:
            cut = name.index("=", 1)
            name, value = name[:cut], name[cut + 1 :]
        flag = _BY_NAME.get(name)
        if flag is None:
            if name in ("h", "help"):
                raise FlagError(None)
            raise FlagError(f"flag provided but not defined: -{name}")
        if flag.kind == "bool":
            if value is None:
                setattr(opts, flag.attr, True)
            elif value in _GO_BOOLS:
                setattr(opts, flag.attr, _GO_BOOLS[value])
            else:
                raise FlagError(f"invalid boolean value {go_quote(value)} for -{name}: parse error")
            continue
        if value is None:
            if not args:
                raise FlagError(f"flag needs an argument: -{name}")
            value = args.pop(0)
        if flag.kind == "duration":
            try:
                parse_go_duration(value)
            except ValueError:
                raise FlagError(
                    f"invalid value {go_quote(value)} for flag -{name}: parse error"
                ) from None
        if flag.kind == "list":
            opts.add_dirs.append(value)
        else:
            setattr(opts, flag.attr, value)
    opts.positional = args
    return opts
