"""What the gate does with a tool call before anyone is asked (pure; no I/O but paths).

With ``--dangerously-skip-permissions`` the hook is agy's only gate (hooks-and-tools.md
§A7), so the bridge re-implements agy's sensible defaults: reads inside the session's
roots need no question (agy auto-allows them too, §A9), ``accept-edits`` also lets
edits inside the roots through, and everything else is the user's call. One rule comes
first, whatever the mode or memory says: a call whose arguments mention the bridge's
runtime dir (the hook root, the broker socket) or the gate's environment variables is
denied, because the model sees the hook root as a workspace and must not rewrite the
gate (§A8: KG denies hook-root paths too).

Order of `Policy.assess`: tamper -> autonomous modes -> remembered "always" answers ->
reads in roots -> edits in roots (accept-edits) -> ask.

Paths are checked with ``os.path.realpath`` (``..`` collapsed, symlinks resolved as far
as they exist) against the resolved roots; relative paths are never "inside" (agy's cwd
is not ours to guess). Credential-looking files are asked about even inside the roots.
The only I/O is that resolution (``lstat``/``readlink``); call `assess` from a worker
thread if the roots live on a slow network file system.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import attrs

from . import hook
from .commands import (
    allow_covers,
    command_key,
    command_prefix,
    command_scope,
    command_shape,
    reject_scope,
    shape_of_key,
)
from .models import HookRequest

#: Modes the bridge offers (issue 6). ``safe`` runs without the gate; it is accepted
#: here so a session can keep one Policy across mode changes.
MODES = frozenset({"ask", "accept-edits", "plan", "safe", "autonomous", "autonomous-unsandboxed"})
_ALLOW_ALL_MODES = frozenset({"autonomous", "autonomous-unsandboxed"})

#: Tool -> the argument naming the path it reads (hooks-and-tools.md §B2).
READ_TOOLS: Mapping[str, str] = {
    "view_file": "AbsolutePath",
    "list_dir": "DirectoryPath",
    "grep_search": "SearchPath",
    "find_by_name": "SearchDirectory",
}
#: Tool -> the argument naming the file it changes.
EDIT_TOOLS: Mapping[str, str] = {
    "write_to_file": "TargetFile",
    "replace_file_content": "TargetFile",
    "multi_replace_file_content": "TargetFile",
}
#: ACP tool kinds for the tools the policy names (the full catalog is translate/tools.py).
_KINDS: Mapping[str, str] = {
    **dict.fromkeys(("view_file", "list_dir", "list_resources", "read_resource"), "read"),
    **dict.fromkeys(("grep_search", "find_by_name", "search_web"), "search"),
    **dict.fromkeys((*EDIT_TOOLS, "sed_file", "notebook_edit"), "edit"),
    **dict.fromkeys(
        ("run_command", "command_status", "send_command_input", "manage_task"), "execute"
    ),
    **dict.fromkeys(("read_url_content", "open_browser_url", "read_browser_page"), "fetch"),
}
#: File names that are asked about even inside the roots (agy protects credentials too).
SENSITIVE_NAMES = frozenset(
    {".env", ".netrc", ".npmrc", ".pypirc", ".git-credentials", "id_rsa", "id_ed25519"}
)
_SENSITIVE_SUFFIXES = (".pem", ".key", ".p12", ".pfx")
_GATE_VARIABLES = (hook.ENV_SOCKET, hook.ENV_TOKEN, hook.ENV_TIMEOUT)
_MAX_DEPTH = 32  # argument nesting we scan for tamper markers; deeper is denied
_MAX_PATH_CHARS = 4096  # PATH_MAX: longer strings are content, not paths to resolve
_TOO_DEEP = "\0too deep"


def _as_tuple(paths: Iterable[str]) -> tuple[str, ...]:
    return tuple(paths)


class Verdict(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


@attrs.frozen
class Assessment:
    """The policy's answer for one call.

    Attributes:
      verdict: ALLOW (no question), DENY (no question) or ASK.
      reason: for DENY, the short text the model reads; empty otherwise.
      kind: ACP tool kind (``read``, ``edit``, ``execute``…; ``other`` when unknown).
      title: a short fallback title (the session's tool card has the real one).
      key: the memory key an "always" answer to this call is stored under.
      scope: what "always allow" covers, for the permission options.
      reject_scope: what "always reject" covers (commands: the whole prefix); empty
        means the same as ``scope``.
    """

    verdict: Verdict
    reason: str = ""
    kind: str = "other"
    title: str = ""
    key: str = ""
    scope: str = ""
    reject_scope: str = ""

    @property
    def rejected_scope(self) -> str:
        return self.reject_scope or self.scope


@attrs.define
class Policy:
    """One session's gate rules and remembered "always" answers.

    Args:
      roots: the session's workspace roots (cwd and additional dirs), absolute;
        fixed for the policy's life (resolved once).
      mode: one of `MODES`; may be changed later (``policy.mode = "accept-edits"``).
      protected: paths the model must never touch (`HookRoot.protected_paths`).
    """

    roots: tuple[str, ...] = attrs.field(converter=_as_tuple, on_setattr=attrs.setters.frozen)
    mode: str = attrs.field(default="ask")
    protected: tuple[str, ...] = attrs.field(
        default=(), converter=_as_tuple, on_setattr=attrs.setters.frozen
    )
    _memory: dict[str, bool] = attrs.field(factory=dict, init=False, repr=False)
    _real_roots: tuple[str, ...] = attrs.field(default=(), init=False, repr=False)
    _markers: tuple[str, ...] = attrs.field(default=(), init=False, repr=False)
    _real_protected: tuple[str, ...] = attrs.field(default=(), init=False, repr=False)

    @mode.validator
    def _check_mode(self, _attribute: Any, value: str) -> None:
        if value not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)}, not {value!r}")

    def __attrs_post_init__(self) -> None:
        for root in self.roots:
            if not os.path.isabs(root):
                raise ValueError(f"roots must be absolute paths, not {root!r}")
        self._real_roots = tuple(dict.fromkeys(os.path.realpath(r) for r in self.roots))
        markers: list[str] = list(_GATE_VARIABLES)
        for path in self.protected:
            markers += [os.path.normpath(path), os.path.realpath(path)]
            name = os.path.basename(os.path.normpath(path))
            if len(name) >= 8:  # the random runtime dir name: rare enough to match alone
                markers.append(name)
        self._markers = tuple(dict.fromkeys(markers))
        self._real_protected = tuple(dict.fromkeys(os.path.realpath(p) for p in self.protected))

    def with_roots(self, roots: Iterable[str]) -> Policy:
        """The same mode, protected paths and remembered answers over other
        roots (the roots are fixed for a policy's life)."""
        moved = Policy(roots, self.mode, protected=self.protected)
        moved._memory = dict(self._memory)
        return moved

    def remember(self, key: str, allow: bool) -> None:
        """Store an allow_always (True) or reject_always (False) answer under ``key``."""
        if key:
            self._memory[key] = allow

    def forget_all(self) -> None:
        """Drop every remembered answer."""
        self._memory.clear()

    def remembered(self, key: str) -> bool | None:
        """The remembered answer for ``key``, if any."""
        return self._memory.get(key)

    def assess(self, request: HookRequest) -> Assessment:
        """Decide ALLOW / DENY / ASK for one hook call (order in the module docstring)."""
        return self.assess_call(request.tool_name, request.args)

    def assess_call(self, tool_name: str, args: Mapping[str, Any]) -> Assessment:
        """`assess` for a tool name and its arguments."""
        kind = _KINDS.get(tool_name, "other")
        key, scope = memory_key(tool_name, args)
        rejecting = scope
        command = args.get("CommandLine") if tool_name == "run_command" else None
        if isinstance(command, str):
            rejecting = reject_scope(command)
        title = _title(tool_name, args)
        if self._mentions_gate(args):
            return Assessment(
                Verdict.DENY, "agybridge: this call touches the permission gate", kind, title
            )
        if self.mode in _ALLOW_ALL_MODES:
            return Assessment(Verdict.ALLOW, "", kind, title, key, scope)
        if tool_name == "run_command":
            text = command if isinstance(command, str) else ""
            remembered = self._recall_command(text, args.get("Cwd"))
        else:
            remembered = self._memory.get(key)
        if remembered is not None:
            if remembered:
                return Assessment(Verdict.ALLOW, "", kind, title, key, scope, rejecting)
            return Assessment(
                Verdict.DENY, f"the user rejected {rejecting} for this session", kind, title, key
            )
        path_key = READ_TOOLS.get(tool_name)
        if path_key and self._inside_roots(args.get(path_key), reading=True):
            return Assessment(Verdict.ALLOW, "", kind, title, key, scope)
        path_key = EDIT_TOOLS.get(tool_name)
        if (
            path_key
            and self.mode == "accept-edits"
            and self._inside_roots(args.get(path_key), reading=False)
        ):
            return Assessment(Verdict.ALLOW, "", kind, title, key, scope)
        return Assessment(Verdict.ASK, "", kind, title, key, scope, rejecting)

    def _recall_command(self, text: str, cwd: object) -> bool | None:
        """The remembered answer covering a command (commands.py rules 4 and 5)."""
        shape = command_shape(text)
        prefix = command_prefix(text)
        for key, allow in self._memory.items():
            remembered = shape_of_key(key)
            if not allow and remembered is not None and remembered.prefix == prefix:
                return False
        exact = self._memory.get(command_key(text))
        if exact is not None and (shape is None or not exact):
            return exact
        # Plain relative operands mean the workspace only when run inside it.
        if shape is None or not self._inside_roots(cwd, reading=False):
            return None
        for key, allow in self._memory.items():
            remembered = shape_of_key(key)
            if allow and remembered is not None and allow_covers(remembered, shape):
                return True
        return None

    def _inside_roots(self, path: object, *, reading: bool) -> bool:
        if not isinstance(path, str) or not os.path.isabs(path):
            return False
        try:
            resolved = os.path.realpath(path)
        except (OSError, ValueError):  # embedded NUL, symlink loops on some versions
            return False
        if reading and _sensitive(resolved):
            return False
        return any(_within(resolved, root) for root in self._real_roots)

    def _mentions_gate(self, args: Mapping[str, Any]) -> bool:
        for text in _strings(args, 0):
            if text is _TOO_DEEP or any(marker in text for marker in self._markers):
                return True
            if (
                self.protected
                and len(text) < _MAX_PATH_CHARS
                and os.path.isabs(text)
                and not any(ch in text for ch in "\0\n")
            ):
                try:
                    resolved = os.path.realpath(text)
                except (OSError, ValueError):
                    return True  # a path we cannot resolve is not worth the risk
                if any(_within(resolved, p) for p in self._real_protected):
                    return True
        return False


def memory_key(tool_name: str, args: Mapping[str, Any]) -> tuple[str, str]:
    """(key, scope) of an "always" answer: per tool; MCP per server/tool; commands by
    prefix (commands.py)."""
    if tool_name == "run_command":
        line = args.get("CommandLine")
        text = line if isinstance(line, str) else ""
        return command_key(text), command_scope(text)
    if tool_name == "call_mcp_tool":
        server, tool = args.get("ServerName"), args.get("ToolName")
        name = f"{server if isinstance(server, str) else '?'}/"
        name += tool if isinstance(tool, str) else "?"
        return f"mcp:{name}", f"MCP tool `{name}`"
    return f"tool:{tool_name}", f"`{tool_name}` calls"


def _title(tool_name: str, args: Mapping[str, Any]) -> str:
    if tool_name == "run_command" and isinstance(args.get("CommandLine"), str):
        first = args["CommandLine"].strip().splitlines()[:1]
        return f"Run {first[0][:80]}" if first else "Run command"
    path_key = READ_TOOLS.get(tool_name) or EDIT_TOOLS.get(tool_name)
    target = args.get(path_key) if path_key else None
    name = tool_name.replace("_", " ").capitalize() or "Tool"
    return f"{name} {target}" if isinstance(target, str) and target else name


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _sensitive(path: str) -> bool:
    name = os.path.basename(path)
    return name in SENSITIVE_NAMES or name.startswith(".env.") or name.endswith(_SENSITIVE_SUFFIXES)


def _strings(value: object, depth: int) -> Iterator[str]:
    """Every string in a JSON value (keys included), to a bounded depth."""
    if isinstance(value, str):
        yield value
    elif depth >= _MAX_DEPTH:
        yield _TOO_DEEP
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item, depth + 1)
