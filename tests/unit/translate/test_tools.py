"""agy's tool catalog: kinds, titles and locations per tool (hooks-and-tools.md §B3)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge.acp import models
from agybridge.translate.tools import (
    CATALOG,
    EDIT_TOOLS,
    HIDDEN_TOOLS,
    PLAN_TOOLS,
    describe_tool,
    display_path,
    edit_target,
    humanize,
)

CWD = "/home/user/project"

#: hooks-and-tools.md §B3, one row per catalog name: the ACP kind it must get.
EXPECTED_KIND = {
    "view_file": "read",
    "list_dir": "read",
    "list_resources": "read",
    "read_resource": "read",
    "list_permissions": "read",
    "grep_search": "search",
    "find_by_name": "search",
    "search_web": "search",
    "read_url_content": "fetch",
    "write_to_file": "edit",
    "replace_file_content": "edit",
    "multi_replace_file_content": "edit",
    "sed_file": "edit",
    "notebook_edit": "edit",
    "run_command": "execute",
    "command_status": "execute",
    "send_command_input": "execute",
    "manage_task": "execute",
    "notebook_execution": "execute",
    "execute_browser_javascript": "execute",
    "open_browser_url": "fetch",
    "read_browser_page": "fetch",
    "call_mcp_tool": "other",
    "generate_image": "other",
    "invoke_subagent": "other",
    "ask_question": "other",
}

#: §B3 names the catalog leaves to the unknown-tool path: all ``other``.
OTHER_BY_DEFAULT = [
    "browser_subagent",
    "define_subagent",
    "manage_subagents",
    "send_message",
    "schedule",
    "wait",
    "wait_5_seconds",
    "manage_inbox",
    "ask_permission",
    "ask_custom_permission",
    "delete_knowledge",
    "browser_click_element",
    "capture_browser_screenshot",
    "list_browser_pages",
]


def loc(path: str, line: int | None = None) -> models.ToolCallLocation:
    return models.ToolCallLocation(path=path, line=line)


def test_catalog_is_exactly_the_documented_table() -> None:
    """Every catalog name has a documented kind and the table names no tool the catalog lacks."""
    assert set(CATALOG) == set(EXPECTED_KIND)


@pytest.mark.parametrize(("name", "kind"), sorted(EXPECTED_KIND.items()))
@pytest.mark.parametrize("params", [None, {}], ids=["no-params", "empty-params"])
def test_catalog_kind(name: str, kind: str, params: dict[str, Any] | None) -> None:
    """Each catalog tool gets its §B3 kind and a non-empty title even without parameters."""
    description = describe_tool(name, params, CWD)
    assert description.kind == kind
    assert description.title.strip()
    assert description.locations == ()


@pytest.mark.parametrize("name", OTHER_BY_DEFAULT)
def test_uncatalogued_documented_tools_are_other(name: str) -> None:
    """Tools §B3 maps to ``other`` get it through the unknown-tool path, humanised."""
    description = describe_tool(name, {}, CWD)
    assert description.kind == "other"
    assert description.title == humanize(name)


def test_edit_tools_are_edits_and_hidden_tools_are_not_catalogued() -> None:
    """The edit-tool set agrees with the table, and ``finish`` is hidden."""
    assert all(EXPECTED_KIND.get(n) == "edit" for n in EDIT_TOOLS)
    assert {n for n, kind in EXPECTED_KIND.items() if kind == "edit"} == set(EDIT_TOOLS)
    assert sorted(HIDDEN_TOOLS) == ["finish"]
    assert "finish" not in CATALOG
    assert {"invoke_subagent", "manage_task", "schedule"} <= PLAN_TOOLS


# (description, tool, params, expected title, expected locations)
TITLE_CASES: list[
    tuple[str, str, dict[str, Any] | None, str, tuple[models.ToolCallLocation, ...]]
] = [
    ("command", "run_command", {"CommandLine": "ls -la"}, "Run ls -la", ()),
    (
        "multi-line command: first line only",
        "run_command",
        {"CommandLine": "echo one\necho two\necho three"},
        "Run echo one",
        (),
    ),
    (
        "command with leading blank lines",
        "run_command",
        {"CommandLine": "\n\n  make test\nmake lint"},
        "Run make test",
        (),
    ),
    (
        "long command line is shortened to 80 characters",
        "run_command",
        {"CommandLine": "x" * 100},
        "Run " + "x" * 79 + "…",
        (),
    ),
    (
        "toolSummary when there is no command",
        "run_command",
        {"toolSummary": "List the workspace"},
        "List the workspace",
        (),
    ),
    ("blank command", "run_command", {"CommandLine": "   "}, "Run command", ()),
    (
        "edit relative to cwd with its start line",
        "replace_file_content",
        {"TargetFile": f"{CWD}/src/app.py", "StartLine": 12},
        "Edit src/app.py",
        (loc(f"{CWD}/src/app.py", 12),),
    ),
    (
        "edit outside cwd keeps the absolute path",
        "replace_file_content",
        {"TargetFile": "/etc/hosts"},
        "Edit /etc/hosts",
        (loc("/etc/hosts"),),
    ),
    (
        "edit of a relative path: no location",
        "replace_file_content",
        {"TargetFile": "src/app.py"},
        "Edit src/app.py",
        (),
    ),
    (
        "read with a line range",
        "view_file",
        {"AbsolutePath": f"{CWD}/README.md", "StartLine": 10, "EndLine": 40},
        "Read README.md:10-40",
        (loc(f"{CWD}/README.md", 10),),
    ),
    (
        "read from a start line",
        "view_file",
        {"AbsolutePath": f"{CWD}/README.md", "StartLine": "7"},
        "Read README.md:7",
        (loc(f"{CWD}/README.md", 7),),
    ),
    (
        "read of a whole file: location without a line",
        "view_file",
        {"AbsolutePath": f"{CWD}/docs/a.md"},
        "Read docs/a.md",
        (loc(f"{CWD}/docs/a.md"),),
    ),
    (
        "line 0 is not a 1-based line",
        "view_file",
        {"AbsolutePath": f"{CWD}/a.py", "StartLine": 0},
        "Read a.py",
        (loc(f"{CWD}/a.py"),),
    ),
    (
        "a boolean is not a line number",
        "view_file",
        {"AbsolutePath": f"{CWD}/a.py", "StartLine": True},
        "Read a.py",
        (loc(f"{CWD}/a.py"),),
    ),
    (
        "list a directory",
        "list_dir",
        {"DirectoryPath": f"{CWD}/src"},
        "List src",
        (loc(f"{CWD}/src"),),
    ),
    (
        "grep with a path",
        "grep_search",
        {"Query": "TODO", "SearchPath": f"{CWD}/src"},
        "Search 'TODO' in src",
        (loc(f"{CWD}/src"),),
    ),
    ("grep without a path", "grep_search", {"Query": "TODO"}, "Search 'TODO'", ()),
    (
        "find by name",
        "find_by_name",
        {"Pattern": "*.py", "SearchDirectory": f"{CWD}/tests"},
        "Find '*.py' in tests",
        (loc(f"{CWD}/tests"),),
    ),
    (
        "web search (lowercase key)",
        "search_web",
        {"query": "trio nursery"},
        "Web search 'trio nursery'",
        (),
    ),
    (
        "fetch a URL",
        "read_url_content",
        {"Url": "https://example.com/a"},
        "Fetch https://example.com/a",
        (),
    ),
    (
        "write",
        "write_to_file",
        {"TargetFile": f"{CWD}/new.txt"},
        "Write new.txt",
        (loc(f"{CWD}/new.txt"),),
    ),
    (
        "write without overwrite creates",
        "write_to_file",
        {"TargetFile": f"{CWD}/new.txt", "Overwrite": False},
        "Create new.txt",
        (loc(f"{CWD}/new.txt"),),
    ),
    (
        "multi replace counts its chunks",
        "multi_replace_file_content",
        {"TargetFile": f"{CWD}/a.py", "ReplacementChunks": [{}, {}, {}]},
        "Edit a.py (3 chunks)",
        (loc(f"{CWD}/a.py"),),
    ),
    (
        "multi replace with one chunk",
        "multi_replace_file_content",
        {"TargetFile": f"{CWD}/a.py", "ReplacementChunks": [{}]},
        "Edit a.py",
        (loc(f"{CWD}/a.py"),),
    ),
    (
        "sed edits its target",
        "sed_file",
        {"TargetFile": f"{CWD}/a.py"},
        "Edit a.py",
        (loc(f"{CWD}/a.py"),),
    ),
    (
        "notebook edit",
        "notebook_edit",
        {"NotebookPath": f"{CWD}/nb.ipynb"},
        "Edit notebook nb.ipynb",
        (loc(f"{CWD}/nb.ipynb"),),
    ),
    ("notebook edit without a path", "notebook_edit", {}, "Edit notebook", ()),
    ("command status", "command_status", {"CommandId": "c-1"}, "Command status c-1", ()),
    ("manage task", "manage_task", {"Action": "kill", "TaskId": "t7"}, "Task kill t7", ()),
    ("manage task without params", "manage_task", {}, "Task", ()),
    (
        "MCP server and tool",
        "call_mcp_tool",
        {"ServerName": "listener", "ToolName": "ping", "Arguments": "{}"},
        "listener/ping",
        (),
    ),
    ("MCP without names", "call_mcp_tool", {}, "MCP/tool", ()),
    ("generate image", "generate_image", {"ImageName": "cat"}, "Generate image cat", ()),
    ("open a page", "open_browser_url", {"Url": "https://x.test"}, "Open https://x.test", ()),
    (
        "subagent roles",
        "invoke_subagent",
        {"Subagents": [{"Role": "researcher"}, {"TypeName": "coder"}, {"Prompt": "?"}]},
        "Subagent: researcher, coder",
        (),
    ),
    ("subagent without roles", "invoke_subagent", {"Subagents": "oops"}, "Run subagent", ()),
    (
        "unknown tool: humanised, absolute path-like parameter kept",
        "frobnicate_widget",
        {"FilePath": "/data/w.bin"},
        "Frobnicate widget",
        (loc("/data/w.bin"),),
    ),
    (
        "unknown tool: relative path-like parameter dropped",
        "frobnicate_widget",
        {"path": "w.bin"},
        "Frobnicate widget",
        (),
    ),
    (
        "unknown tool: first path key in table order wins",
        "new_tool",
        {"Path": "/b", "AbsolutePath": "/a"},
        "New tool",
        (loc("/a"),),
    ),
    (
        "unknown tool: non-string path ignored",
        "new_tool",
        {"TargetFile": 3, "file_path": f"{CWD}/x"},
        "New tool",
        (loc(f"{CWD}/x"),),
    ),
    ("unknown tool without a name", "", None, "Tool", ()),
]


@pytest.mark.parametrize(
    ("name", "params", "title", "locations"),
    [c[1:] for c in TITLE_CASES],
    ids=[c[0] for c in TITLE_CASES],
)
def test_title_and_locations(
    name: str,
    params: dict[str, Any] | None,
    title: str,
    locations: tuple[models.ToolCallLocation, ...],
) -> None:
    """Each tool call gets its §B3 title and only absolute, 1-based locations."""
    description = describe_tool(name, params, CWD)
    assert (description.title, description.locations) == (title, locations)


# (tool, params, edit target)
EDIT_TARGET_CASES: list[tuple[str, dict[str, Any] | None, str | None]] = [
    ("write_to_file", {"TargetFile": f"{CWD}/a.py"}, f"{CWD}/a.py"),
    ("replace_file_content", {"TargetFile": f"{CWD}/a.py"}, f"{CWD}/a.py"),
    ("multi_replace_file_content", {"TargetFile": f"{CWD}/a.py"}, f"{CWD}/a.py"),
    ("sed_file", {"TargetFile": " /x/y.txt "}, "/x/y.txt"),
    ("notebook_edit", {"NotebookPath": f"{CWD}/nb.ipynb"}, f"{CWD}/nb.ipynb"),
    ("write_to_file", {"TargetFile": "relative.py"}, None),
    ("write_to_file", {}, None),
    ("write_to_file", None, None),
    ("view_file", {"AbsolutePath": f"{CWD}/a.py"}, None),
    ("run_command", {"CommandLine": "rm a.py"}, None),
    ("unknown_editor", {"TargetFile": f"{CWD}/a.py"}, None),
]


@pytest.mark.parametrize(("name", "params", "target"), EDIT_TARGET_CASES)
def test_edit_target(name: str, params: dict[str, Any] | None, target: str | None) -> None:
    """Only edit tools have a target, and only when it is an absolute path."""
    assert edit_target(name, params) == target


@pytest.mark.parametrize(
    ("path", "shown"),
    [
        (f"{CWD}/src/a.py", "src/a.py"),
        (f"{CWD}/a.py", "a.py"),
        ("/elsewhere/a.py", "/elsewhere/a.py"),
        ("/home/user/project-other/a.py", "/home/user/project-other/a.py"),
        ("/home/user/a.py", "/home/user/a.py"),
    ],
)
def test_display_path(path: str, shown: str) -> None:
    """Paths inside the cwd are shown relative to it, others stay absolute."""
    assert display_path(path, CWD) == shown


def test_relative_path_title_does_not_depend_on_process_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative path parameter is shown as given, wherever the bridge process runs."""
    monkeypatch.chdir(tmp_path)
    description = describe_tool("view_file", {"AbsolutePath": "README.md"}, str(tmp_path.parent))
    assert description.title == "Read README.md"


def test_unusual_digit_line_number_does_not_crash() -> None:
    """A line number string that is not a decimal integer is ignored, not a crash."""
    description = describe_tool("view_file", {"AbsolutePath": "/a.py", "StartLine": "²"}, CWD)
    assert description.locations == (loc("/a.py"),)


_json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-5, 10**6)
    | st.text(alphabet=st.characters(codec="ascii"), max_size=30)
)
_params = st.dictionaries(
    st.sampled_from(
        [
            "AbsolutePath",
            "TargetFile",
            "DirectoryPath",
            "SearchPath",
            "SearchDirectory",
            "FilePath",
            "Path",
            "path",
            "NotebookPath",
            "StartLine",
            "EndLine",
            "CommandLine",
            "Query",
            "Pattern",
            "Url",
            "Subagents",
            "ReplacementChunks",
            "Overwrite",
        ]
    ),
    _json_scalar | st.lists(_json_scalar | st.dictionaries(st.text(max_size=5), _json_scalar)),
)


@given(
    name=st.sampled_from([*sorted(CATALOG), *OTHER_BY_DEFAULT]) | st.text(max_size=20),
    params=st.none() | _params,
)
def test_any_parameters_give_a_valid_description(name: str, params: dict[str, Any] | None) -> None:
    """Whatever the parameters, a description has a known kind, a title and valid locations."""
    description = describe_tool(name, params, CWD)
    assert description.kind in {"read", "edit", "search", "execute", "fetch", "other"}
    assert description.title.strip()
    for location in description.locations:
        assert os.path.isabs(location.path)
        assert location.line is None or location.line >= 1
