"""What an "always" answer to a ``run_command`` call covers (pure).

An "allow always" answer must not stretch to commands that run other programs, write
arbitrary files, mount paths, fetch URLs or reach outside the workspace, while repeated
harmless variants (``git grep foo`` after ``git grep -n bar``) are not asked again.
The rule (README "Permissions"):

1. **Shape.** A command line that the shell would treat as more than one simple
   command, or that expands anything, has no shape and is keyed by its exact text: any
   of ``; & | < > ` $ ( ) { } \\``, a newline, or text ``shlex`` cannot split. So are
   leading ``NAME=value`` assignments, wrappers and interpreters (``sudo``, ``env``,
   ``xargs``, ``sh``, ``python``, ``find``…), an option before a subcommand
   (``git -c x=y status``), and subcommands that run whatever follows them
   (``uv run``, ``npm exec``, ``docker exec``…).
2. **Prefix.** Otherwise the command is its program, its subcommand for programs that
   have them (``git grep``, ``cargo test``, ``npm run <script>``), then options and
   operands.
3. **Plain words only.** Every operand and option value must be a plain,
   workspace-relative word: letters, digits and ``_ . , + % / ^ ~ -``, not starting
   with ``/`` or ``~``, without a ``..`` component. That excludes URLs (``:``),
   ``user@host``, assignments (``make CC=…``), absolute paths, ``../`` and globs (a
   file named ``-O…`` would expand into an option).
   A command with any other word has no shape (exact text only).
4. **Options.** "Always allow" covers a later command with the same prefix whose
   options are among those of the approved command plus, for a few common read-only
   subcommands (`SAFE_OPTIONS`: ``git grep``, ``git log``, ``ls``, ``rg``…), their
   read-only options. Unknown options are asked again: an allow-list, not a deny-list,
   so ``git grep -O<pager>``, ``git log --output=<file>``, ``docker run -v …`` and
   ``pip install -e …`` are asked even if no one listed them as dangerous.
5. "Always reject" covers every command with the same prefix (rejecting more is safe).

Keys look like ``command:git grep\t-n`` (prefix, tab, sorted options) or
``command-exact:<the command line>``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

import attrs

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


_GIT_LOG_LIKE = (
    "-p --patch -s --no-patch --stat --shortstat --numstat --name-only --name-status "
    "--oneline --graph --all --decorate --no-decorate --abbrev-commit --format --pretty "
    "--date --color --no-color -n --max-count --skip --since --after --until --before "
    "--author --committer --grep -i --regexp-ignore-case --reverse --first-parent "
    "--no-merges --merges --follow -S -G -w -b -U --unified --word-diff --cached --staged "
    "--check -M -C -N"
)
_GREP_LIKE = (
    "-n -i -w -v -l -L -c -e -E -F -G -P -h -H -I -o -q -s -z -r -R -A -B -C --line-number "
    "--ignore-case --word-regexp --invert-match --files-with-matches "
    "--files-without-match --count --fixed-strings --extended-regexp --perl-regexp "
    "--color --no-color --context --after-context --before-context --max-count"
)
#: Rule 4: read-only options of common read-only commands. Deliberately missing:
#: anything that runs a program (``git grep -O``, ``rg --pre``), writes a file
#: (``git log --output``, ``--ext-diff``) or reads outside (``--no-index``).
SAFE_OPTIONS: dict[str, frozenset[str]] = {
    prefix: frozenset(options.split())
    for prefix, options in {
        "git grep": _GREP_LIKE + " --cached --untracked --heading --break --column "
        "--max-depth --all-match --and --or --not -p --show-function",
        "git log": _GIT_LOG_LIKE,
        "git show": _GIT_LOG_LIKE,
        "git diff": _GIT_LOG_LIKE,
        "git status": "-s --short -b --branch --porcelain -u --untracked-files --ignored -v",
        "git branch": "-a --all -r --remotes -v -vv --list --show-current --merged "
        "--no-merged --contains --sort --color --no-color",
        "ls": "-l -a -A -h -R -t -r -S -1 -d -F -G --color --all --almost-all",
        "grep": _GREP_LIKE + " --include --exclude --exclude-dir",
        "rg": _GREP_LIKE + " --hidden --no-ignore -g --glob -t --type -T --type-not --files "
        "--json -u -uu -S --smart-case -M --max-columns",
        "cat": "-n -b -A -v -e -t -s",
        "head": "-n -c -q",
        "tail": "-n -c -q",
        "wc": "-l -w -c -m -L",
    }.items()
}
_PLAIN = re.compile(r"[A-Za-z0-9_.,+%/^~-]+")


@attrs.frozen
class CommandShape:
    """A command line reduced to what rule 4 compares (see the module docstring)."""

    prefix: str
    options: frozenset[str]


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


def command_shape(command_line: str) -> CommandShape | None:
    """The shape of a command line, or None when only its exact text may match."""
    prefix = command_prefix(command_line)
    if prefix is None:
        return None
    words = shlex.split(command_line)
    options = _options(words[len(prefix.split(" ")) :])
    return None if options is None else CommandShape(prefix, options)


def _plain(word: str) -> bool:
    """Rule 3: a word that can only name something inside the workspace."""
    return (
        _PLAIN.fullmatch(word) is not None
        and not word.startswith(("/", "~"))
        and ".." not in word.split("/")
    )


def _options(words: Sequence[str]) -> frozenset[str] | None:
    """The option names in ``words``; None if any word is not plain (rule 3)."""
    options: set[str] = set()
    operands_only = False
    for word in words:
        if operands_only or not word.startswith("-") or word == "-":
            if not _plain(word):
                return None
        elif word == "--":
            operands_only = True
        elif word.startswith("--"):
            name, equals, value = word.partition("=")
            if not re.fullmatch(r"--[A-Za-z0-9][A-Za-z0-9-]*", name) or (
                equals and not _plain(value)
            ):
                return None
            options.add(name)
        elif word[1:].isdigit():
            options.add("-N")  # ``git log -3``: a count
        elif word[1:].isalnum() and word.isascii():
            # A cluster (``-rn``) or an option with its value attached (``-Ovim``):
            # every letter must be allowed, so ``-O`` is never hidden inside one.
            options.update(f"-{letter}" for letter in word[1:])
        else:
            return None
    return frozenset(options)


def command_key(command_line: str) -> str:
    """The memory key of one ``run_command`` call (see the module docstring)."""
    shape = command_shape(command_line)
    if shape is None:
        return EXACT_KEY + command_line.strip()
    return f"{PREFIX_KEY}{shape.prefix}\t{' '.join(sorted(shape.options))}"


def shape_of_key(key: str) -> CommandShape | None:
    """The shape a `command_key` stands for (None for exact keys and other tools)."""
    if not key.startswith(PREFIX_KEY):
        return None
    prefix, _, options = key[len(PREFIX_KEY) :].partition("\t")
    return CommandShape(prefix, frozenset(options.split()))


def allow_covers(approved: CommandShape, later: CommandShape) -> bool:
    """Rule 4: whether "always allow" for ``approved`` covers ``later``."""
    if approved.prefix != later.prefix:
        return False
    return later.options <= approved.options | SAFE_OPTIONS.get(later.prefix, frozenset())


def command_scope(command_line: str) -> str:
    """What "always allow" for this command covers, for the user to read."""
    shape = command_shape(command_line)
    if shape is None:
        return "this exact command"
    options = " ".join(sorted(shape.options))
    described = f"options {options}" if options else "no options"
    if shape.prefix in SAFE_OPTIONS:
        described += " (or read-only ones)"
    return f"`{shape.prefix}` commands with {described} and plain arguments inside the workspace"


def reject_scope(command_line: str) -> str:
    """What "always reject" for this command covers (rule 5)."""
    prefix = command_prefix(command_line)
    return f"`{prefix}` commands" if prefix is not None else "this exact command"
