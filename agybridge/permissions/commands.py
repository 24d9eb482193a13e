"""The "always" key of a ``run_command`` call: which later commands an answer covers (pure).

An "allow always" / "reject always" answer to a shell command is remembered under a key
computed from its command line, and a later command is covered when its key is *equal*
(never a string-prefix test, so ``git`` does not cover ``git push``). The rule, in order:

1. A command line that the shell would treat as more than one simple command, or that
   expands anything, is keyed by its exact text: any of ``; & | < > ` $ ( ) { } \\``, a
   newline, or text ``shlex`` cannot split. So ``git status && rm -rf ~`` never rides
   on an earlier "always allow git status".
2. Leading ``NAME=value`` assignments (``GIT_SSH_COMMAND=… git …``) make it exact too.
3. Programs that run other programs or code (``sudo``, ``env``, ``xargs``, ``sh``,
   ``bash``, ``python``, ``node``, ``find``, ``awk``…) are keyed exactly.
4. Programs with subcommands (``git``, ``npm``, ``cargo``, ``go``, ``docker``,
   ``kubectl``…) are keyed by program and subcommand: ``git push``, ``cargo test``.
   ``npm/pnpm/yarn/bun run <script>`` also keeps the script name. A first argument that
   is an option (``git -c x=y status``, ``git -C dir push``) makes the key exact, since
   options may change what runs; subcommands that run arbitrary programs
   (``uv run``, ``poetry run``, ``npm exec``, ``docker exec``…) are exact as well.
5. Any other program is keyed by its name as written (``ls``, ``./build.sh``).

Keys look like ``command:git push`` or ``command-exact:<the command line>``.
"""

from __future__ import annotations

import re
import shlex

#: Characters that make a command line compound or expanding (rule 1).
SHELL_SPECIAL = frozenset(";&|<>`$(){}\\\n\r")
#: Rule 3: wrappers, shells and interpreters.
EXACT_PROGRAMS = frozenset(
    {
        "sudo",
        "doas",
        "su",
        "env",
        "nohup",
        "timeout",
        "time",
        "nice",
        "ionice",
        "stdbuf",
        "xargs",
        "exec",
        "eval",
        "command",
        "builtin",
        "source",
        ".",
        "sh",
        "bash",
        "zsh",
        "dash",
        "ksh",
        "fish",
        "node",
        "perl",
        "ruby",
        "php",
        "lua",
        "npx",
        "bunx",
        "pnpx",
        "ssh",
        "find",
        "awk",
        "gawk",
        "mawk",
        "watch",
        "parallel",
    }
)
_PYTHON = re.compile(r"(?:.*/)?python[0-9.]*")
#: Rule 4: programs keyed by their subcommand.
SUBCOMMAND_PROGRAMS = frozenset(
    {
        "git",
        "hg",
        "jj",
        "svn",
        "npm",
        "pnpm",
        "yarn",
        "bun",
        "deno",
        "cargo",
        "rustup",
        "go",
        "docker",
        "podman",
        "kubectl",
        "helm",
        "terraform",
        "pip",
        "pip3",
        "uv",
        "poetry",
        "pipenv",
        "conda",
        "gh",
        "dotnet",
        "gradle",
        "mvn",
        "make",
        "apt",
        "apt-get",
        "brew",
        "systemctl",
    }
)
#: Rule 4's exceptions: subcommands that run whatever follows them.
EXACT_SUBCOMMANDS = frozenset(
    {
        ("uv", "run"),
        ("uv", "tool"),
        ("poetry", "run"),
        ("pipenv", "run"),
        ("conda", "run"),
        ("npm", "exec"),
        ("pnpm", "exec"),
        ("pnpm", "dlx"),
        ("yarn", "dlx"),
        ("yarn", "exec"),
        ("bun", "x"),
        ("bun", "exec"),
        ("deno", "eval"),
        ("docker", "exec"),
        ("podman", "exec"),
        ("kubectl", "exec"),
        ("cargo", "install"),
    }
)
#: ``<program> run <script>`` keeps the script (package-manager scripts).
SCRIPT_RUNNERS = frozenset({"npm", "pnpm", "yarn", "bun"})
_RUN_WORDS = frozenset({"run", "run-script"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")

PREFIX_KEY = "command:"
EXACT_KEY = "command-exact:"


def command_prefix(command_line: str) -> str | None:
    """The prefix an "always" answer covers, or None when only the exact text may match."""
    text = command_line.strip()
    if not text or any(ch in SHELL_SPECIAL for ch in text):
        return None
    try:
        words = shlex.split(text)
    except ValueError:
        return None
    if not words or _ASSIGNMENT.match(words[0]):
        return None
    program = words[0]
    if program in EXACT_PROGRAMS or _PYTHON.fullmatch(program):
        return None
    if program not in SUBCOMMAND_PROGRAMS or len(words) == 1:
        return program
    sub = words[1]
    if sub.startswith("-") or (program, sub) in EXACT_SUBCOMMANDS:
        return None
    if program in SCRIPT_RUNNERS and sub in _RUN_WORDS:
        if len(words) < 3 or words[2].startswith("-"):
            return None
        return f"{program} {sub} {words[2]}"
    return f"{program} {sub}"


def command_key(command_line: str) -> str:
    """The memory key of one ``run_command`` call (see the module docstring)."""
    prefix = command_prefix(command_line)
    return PREFIX_KEY + prefix if prefix is not None else EXACT_KEY + command_line.strip()


def command_scope(command_line: str) -> str:
    """What an "always" answer to this command covers, for the user to read."""
    prefix = command_prefix(command_line)
    return f"`{prefix}` commands" if prefix is not None else "this exact command"
