"""Which tool step agy's own permission policy blocked, and what its card says (pure).

agy never names the blocked step. 1.2.x ends it ``ERROR`` with ``permission check
failed for command "X": …`` (the step names its permission); 1.3.x ends it ``DONE``
with neither output nor error, and the only link to the denial in ``result.denied_actions``
(or stderr's ``jetski: … the "command" permission …``) is order and kind: the turn stops
at the first blocked tool, so the blocked step is the last tool step before the result
whose tool needs the denied permission (contract.md §11). :func:`tie` applies that rule
and says when the stream does not support it (no step of that kind, or the last one
produced output) rather than guessing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

from .notices import SETTINGS_PATH, allow_rule_example
from .tools import EDIT_TOOLS

#: The tools that need each permission agy names in ``denied_actions[].action``
#: (contract.md §4; samples README: command, unsandboxed, mcp, read_url, execute_url,
#: read_file, write_file).
TOOLS_BY_PERMISSION: Mapping[str, frozenset[str]] = {
    "command": frozenset({"run_command", "send_command_input"}),
    "unsandboxed": frozenset({"run_command"}),
    "write_file": EDIT_TOOLS,
    "read_file": frozenset({"view_file", "list_dir", "grep_search", "find_by_name"}),
    "read_url": frozenset({"read_url_content", "open_browser_url", "read_browser_page"}),
    "url": frozenset({"read_url_content", "open_browser_url", "read_browser_page"}),
    "execute_url": frozenset({"open_browser_url", "execute_browser_javascript"}),
    "mcp": frozenset({"call_mcp_tool"}),
}
#: Every tool some permission can block: a DONE step of one without output may be
#: a 1.3.x soft-deny, so its card waits for the next event before it shows ✓.
GUARDED_TOOLS = frozenset().union(*TOOLS_BY_PERMISSION.values())

# 1.2.x: `permission check failed for command "X": user denied permission to run command`
# and `… for read_url "host": …` (hooks-and-tools.md §A6).
_CHECK_FAILED = re.compile(r"^permission check failed(?: for (?P<permission>[a-z_]+)\b)?")


def checked_permission(error_message: str | None) -> str | None:
    """The permission a 1.2.x ``permission check failed …`` step error names
    (``""`` when it names none); None for any other error."""
    match = _CHECK_FAILED.match((error_message or "").strip())
    if match is None:
        return None
    return match.group("permission") or ""


@attrs.frozen
class StepSeen:
    """What the mapper knows of one finished tool step, for the tie."""

    step_index: int
    tool: str
    title: str
    has_output: bool
    failed: bool


@attrs.frozen
class Tie:
    """The outcome of tying the turn's denials to its steps."""

    #: step_index -> the permission that blocked it.
    blocked: Mapping[int, str]
    #: Denied permissions no step could be tied to, with why.
    untied: Mapping[str, str]


def tie(steps: Sequence[StepSeen], denied: Sequence[str]) -> Tie:
    """Tie each denied permission to the last step of its kind (module docstring)."""
    blocked: dict[int, str] = {}
    untied: dict[str, str] = {}
    for permission in dict.fromkeys(p for p in denied if p):
        tools = TOOLS_BY_PERMISSION.get(permission)
        if tools is None:
            untied[permission] = "the bridge does not know which tools need it"
            continue
        last = next((s for s in reversed(steps) if s.tool in tools), None)
        if last is None:
            untied[permission] = "no tool step that needs it was reported"
        elif last.has_output or last.failed:
            untied[permission] = f"the last step that needs it ({last.title}) ran"
        else:
            blocked[last.step_index] = permission
    return Tie(blocked, untied)


def blocked_card_text(permission: str, rule: str) -> str:
    """What a blocked step's card says."""
    return (
        f'Blocked by agy\'s permission policy: this needs the "{permission}" permission, '
        "which headless agy cannot ask for. To allow it, add an allow rule such as "
        f"`{rule}` under `permissions.allow` in {SETTINGS_PATH}, or run this session in "
        "an autonomous mode."
    )


def rule_for(permission: str, params: Mapping[str, object] | None) -> str:
    """The allow rule to suggest: the program itself for a command when it is known."""
    command = (params or {}).get("CommandLine")
    if permission == "command" and isinstance(command, str) and command.split():
        return f"command({command.split()[0]})"
    return allow_rule_example(permission)
