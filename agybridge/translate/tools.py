"""agy's tool catalog: ACP kind, a human title and file locations per tool (pure).

An explicit name table (hooks-and-tools.md §B3), never substring guessing:
``read_url_content`` is a fetch, not a read, and ``replace_file_content`` an
edit. Parameter keys are agy's own PascalCase (``CommandLine``,
``AbsolutePath``, ``TargetFile``...); stream-json carries a reduced subset
(§B2), so every key is optional. Unknown tools are ``other`` with a
humanised name and whatever path-like parameters they have: never dropped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from ..acp import models
from .questions import card_title, parse_questions

Params = Mapping[str, Any]

#: Tools that change files: the session snapshots their targets at first
#: sight so a diff can be built when they finish.
EDIT_TOOLS = frozenset(
    {
        "write_to_file",
        "replace_file_content",
        "multi_replace_file_content",
        "sed_file",
        "notebook_edit",
    }
)
#: Plan and background-work tools (rendered as a plan, see mapper).
PLAN_TOOLS = frozenset(
    {"task_boundary", "manage_task", "invoke_subagent", "schedule", "browser_subagent"}
)
#: Tools agy uses for its own bookkeeping; no card.
HIDDEN_TOOLS = frozenset({"finish"})

_PATH_KEYS = (
    "AbsolutePath",
    "TargetFile",
    "DirectoryPath",
    "SearchPath",
    "SearchDirectory",
    "FilePath",
    "Path",
    "path",
    "file_path",
    "NotebookPath",
)


@attrs.frozen
class ToolDescription:
    kind: str
    title: str
    locations: tuple[models.ToolCallLocation, ...] = ()


def _text(params: Params, *keys: str) -> str | None:
    for key in keys:
        value = params.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _int(params: Params, key: str) -> int | None:
    value = params.get(key)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    return None


def display_path(path: str, cwd: str) -> str:
    """``path`` relative to the session cwd when it lies inside it.

    Relative paths are shown as given: resolving them would depend on the
    bridge's own working directory, not the session's.
    """
    if not os.path.isabs(path) or not os.path.isabs(cwd):
        return path
    try:
        relative = os.path.relpath(path, cwd)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def _one_line(text: str, limit: int = 80) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[: limit - 1] + "…"


def humanize(name: str) -> str:
    return name.replace("_", " ").strip().capitalize() or "Tool"


def _location(path: str | None, line: int | None = None) -> tuple[models.ToolCallLocation, ...]:
    if not path or not os.path.isabs(path):
        return ()
    return (models.ToolCallLocation(path=path, line=line if line and line > 0 else None),)


def _view_file(p: Params, cwd: str) -> ToolDescription:
    path = _text(p, "AbsolutePath")
    start, end = _int(p, "StartLine"), _int(p, "EndLine")
    shown = display_path(path, cwd) if path else "file"
    if start and end:
        shown += f":{start}-{end}"
    elif start:
        shown += f":{start}"
    return ToolDescription("read", f"Read {shown}", _location(path, start))


def _list_dir(p: Params, cwd: str) -> ToolDescription:
    path = _text(p, "DirectoryPath")
    return ToolDescription(
        "read", f"List {display_path(path, cwd) if path else 'directory'}", _location(path)
    )


def _in(where: str | None, cwd: str) -> str:
    """ " in <dir>" unless the directory is the session root itself."""
    if not where:
        return ""
    shown = display_path(where, cwd)
    return "" if shown == "." else f" in {shown}"


def _grep(p: Params, cwd: str) -> ToolDescription:
    query, where = _text(p, "Query"), _text(p, "SearchPath")
    title = f"Search {query!r}" if query else "Search"
    title += _in(where, cwd)
    return ToolDescription("search", title, _location(where))


def _find(p: Params, cwd: str) -> ToolDescription:
    pattern, where = _text(p, "Pattern"), _text(p, "SearchDirectory")
    title = f"Find {pattern!r}" if pattern else "Find files"
    title += _in(where, cwd)
    return ToolDescription("search", title, _location(where))


def _search_web(p: Params, cwd: str) -> ToolDescription:
    query = _text(p, "query", "Query")
    return ToolDescription("search", f"Web search {query!r}" if query else "Web search")


def _fetch(p: Params, cwd: str) -> ToolDescription:
    url = _text(p, "Url", "URL", "url")
    return ToolDescription("fetch", f"Fetch {url}" if url else "Fetch URL")


def _write(p: Params, cwd: str) -> ToolDescription:
    path = _text(p, "TargetFile")
    verb = "Create" if p.get("Overwrite") is False else "Write"
    return ToolDescription(
        "edit", f"{verb} {display_path(path, cwd) if path else 'file'}", _location(path)
    )


def _replace(p: Params, cwd: str) -> ToolDescription:
    path = _text(p, "TargetFile")
    return ToolDescription(
        "edit",
        f"Edit {display_path(path, cwd) if path else 'file'}",
        _location(path, _int(p, "StartLine")),
    )


def _multi_replace(p: Params, cwd: str) -> ToolDescription:
    path = _text(p, "TargetFile")
    chunks = p.get("ReplacementChunks")
    title = f"Edit {display_path(path, cwd) if path else 'file'}"
    if isinstance(chunks, list) and len(chunks) > 1:
        title += f" ({len(chunks)} chunks)"
    return ToolDescription("edit", title, _location(path))


def _run_command(p: Params, cwd: str) -> ToolDescription:
    command = _text(p, "CommandLine")
    summary = _text(p, "toolSummary")
    title = f"Run {_one_line(command)}" if command else (summary or "Run command")
    return ToolDescription("execute", title)


def _command_status(p: Params, cwd: str) -> ToolDescription:
    command_id = _text(p, "CommandId")
    return ToolDescription(
        "execute", f"Command status {command_id}" if command_id else "Command status"
    )


def _mcp(p: Params, cwd: str) -> ToolDescription:
    server, tool = _text(p, "ServerName"), _text(p, "ToolName")
    return ToolDescription("other", f"{server or 'MCP'}/{tool or 'tool'}")


def _generate_image(p: Params, cwd: str) -> ToolDescription:
    name = _text(p, "ImageName")
    return ToolDescription("other", f"Generate image {name}" if name else "Generate image")


def _browser_url(p: Params, cwd: str) -> ToolDescription:
    url = _text(p, "Url", "URL", "url")
    return ToolDescription("fetch", f"Open {url}" if url else "Open browser page")


def _subagent(p: Params, cwd: str) -> ToolDescription:
    subagents = p.get("Subagents")
    roles = (
        [
            str(s.get("Role") or s.get("TypeName"))
            for s in subagents
            if isinstance(s, dict) and (s.get("Role") or s.get("TypeName"))
        ]
        if isinstance(subagents, list)
        else []
    )
    return ToolDescription("other", "Subagent: " + ", ".join(roles) if roles else "Run subagent")


_DescribeFn = Callable[[Params, str], ToolDescription]

#: The catalog. Names from init.tools on 1.1.14 and 1.1.18 (hooks-and-tools.md §B1).
CATALOG: dict[str, _DescribeFn] = {
    "view_file": _view_file,
    "list_dir": _list_dir,
    "grep_search": _grep,
    "find_by_name": _find,
    "search_web": _search_web,
    "read_url_content": _fetch,
    "write_to_file": _write,
    "replace_file_content": _replace,
    "multi_replace_file_content": _multi_replace,
    "run_command": _run_command,
    "command_status": _command_status,
    "send_command_input": lambda p, cwd: ToolDescription("execute", "Send command input"),
    "manage_task": lambda p, cwd: ToolDescription(
        "execute", f"Task {_text(p, 'Action') or ''} {_text(p, 'TaskId') or ''}".strip()
    ),
    "notebook_execution": lambda p, cwd: ToolDescription("execute", "Run notebook"),
    "execute_browser_javascript": lambda p, cwd: ToolDescription("execute", "Run browser script"),
    "call_mcp_tool": _mcp,
    "generate_image": _generate_image,
    "open_browser_url": _browser_url,
    "read_browser_page": _browser_url,
    "invoke_subagent": _subagent,
    "ask_question": lambda p, cwd: ToolDescription("other", card_title(parse_questions(p))),
    "list_resources": lambda p, cwd: ToolDescription("read", "List resources"),
    "read_resource": lambda p, cwd: ToolDescription("read", "Read resource"),
    "list_permissions": lambda p, cwd: ToolDescription("read", "List permissions"),
    "sed_file": _replace,
    "notebook_edit": lambda p, cwd: ToolDescription(
        "edit",
        f"Edit notebook {display_path(_text(p, 'NotebookPath') or '', cwd)}".strip(),
        _location(_text(p, "NotebookPath")),
    ),
}


def describe_tool(name: str, params: Params | None, cwd: str) -> ToolDescription:
    """Kind, title and locations for one agy tool call."""
    params = params or {}
    describe = CATALOG.get(name)
    if describe is not None:
        return describe(params, cwd)
    # Unknown or unmapped tools: "other", never dropped; keep path-like params.
    path = _text(params, *_PATH_KEYS)
    return ToolDescription("other", humanize(name), _location(path))


def edit_target(name: str, params: Params | None) -> str | None:
    """The absolute file an edit tool changes, if the parameters name one."""
    if name not in EDIT_TOOLS or not params:
        return None
    path = _text(params, "TargetFile", "NotebookPath", "AbsolutePath")
    return path if path and os.path.isabs(path) else None
