"""The user's agy skills in the workspace, for ``available_commands_update``.

A skill is a folder ``<root>/.agents/skills/<folder>/SKILL.md`` whose YAML
front matter gives ``name`` (optional: the folder name otherwise) and
``description`` (how the agent decides to use it). agy also reads the
customization roots ``.agent/``, ``_agents/`` and ``_agent/``
(hooks-and-tools.md §A2); they are scanned after ``.agents/``. The first skill
of a name wins: roots in the order given (cwd first), customization roots in
the order above.

Tolerant by design: a missing, unreadable, binary or garbled ``SKILL.md`` (or one
that is not a regular file: a named pipe would never end) is
skipped or read as far as it makes sense, never an error. There is no YAML
parser dependency: :func:`parse_front_matter` reads the flat ``key: value``
subset skills use (plain, quoted and block scalars).

:func:`find_skills` blocks (it reads files): run it in a worker thread.
"""

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Collection, Sequence

import attrs

logger = logging.getLogger(__name__)

CUSTOMIZATION_DIRS = (".agents", ".agent", "_agents", "_agent")
SKILL_FILE = "SKILL.md"
MAX_SKILLS = 200
MAX_SKILL_READ_BYTES = 64 * 2**10  # 64 KiB: the front matter is at the top
MAX_DESCRIPTION_CHARS = 300

#: Names usable as ``/name`` commands.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]+(.*)|[ \t]*)$")


@attrs.frozen
class Skill:
    name: str
    description: str
    #: The SKILL.md it came from.
    path: str


def find_skills(
    roots: Sequence[str], *, reserved: Collection[str] = (), limit: int = MAX_SKILLS
) -> list[Skill]:
    """Skills found under ``roots`` (workspace roots, cwd first); blocking.

    Args:
        roots: workspace roots to scan.
        reserved: names to leave out (the bridge's own commands).
        limit: at most this many skills.
    """
    found: dict[str, Skill] = {}
    for root in roots:
        for custom in CUSTOMIZATION_DIRS:
            skills_dir = os.path.join(root, custom, "skills")
            try:
                folders = sorted(entry.name for entry in os.scandir(skills_dir) if entry.is_dir())
            except OSError:
                continue
            for folder in folders:
                if len(found) >= limit:
                    return list(found.values())
                skill = read_skill(os.path.join(skills_dir, folder, SKILL_FILE), folder)
                if skill is None or skill.name in found or skill.name in reserved:
                    continue
                found[skill.name] = skill
    return list(found.values())


def read_skill(path: str, folder: str) -> Skill | None:
    """The skill described by the file at ``path``, or None (blocking)."""
    try:
        # Non-blocking open: a named pipe would wait for a writer forever.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            logger.debug("skill %s skipped: not a regular file", path)
            return None  # a pipe, device or socket: nothing to read, or no end
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_SKILL_READ_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    return parse_skill(data.decode("utf-8", errors="replace"), folder, path)


def parse_skill(text: str, folder: str, path: str) -> Skill | None:
    """A skill from SKILL.md text; None when no usable name exists (pure)."""
    fields = parse_front_matter(text)
    name = fields.get("name", "").strip()
    if not _NAME.fullmatch(name):
        if name:
            logger.debug("skill %s: name %r is not a command name; using the folder", path, name)
        name = folder
    if not _NAME.fullmatch(name):
        logger.debug("skill %s skipped: no usable name", path)
        return None
    description = _one_line(fields.get("description", "")) or _first_body_line(text)
    if not description:
        description = f"agy skill {name}"
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
    return Skill(name=name, description=description, path=path)


def parse_front_matter(text: str) -> dict[str, str]:
    """Top-level ``key: value`` pairs of a leading ``---`` block (pure, never raises)."""
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].rstrip() != "---":
        return {}
    body: list[str] = []
    for line in lines[1:]:
        if line.rstrip() in ("---", "..."):
            break
        body.append(line)
    else:
        return {}  # never closed: not front matter
    fields: dict[str, str] = {}
    index = 0
    while index < len(body):
        match = _KEY.match(body[index])
        index += 1
        if match is None:
            continue
        key, raw = match.group(1), (match.group(2) or "").strip()
        continuation: list[str] = []
        while index < len(body) and (not body[index].strip() or body[index][:1] in " \t"):
            continuation.append(body[index])
            index += 1
        fields[key] = _scalar(raw, continuation)
    return fields


def _scalar(raw: str, continuation: list[str]) -> str:
    """A YAML scalar: block (``|``, ``>``), quoted or plain, continued by indented lines."""
    more = [line.strip() for line in continuation]
    if raw[:1] in ("|", ">"):
        if raw[:1] == "|":
            return "\n".join(more).strip()
        return _fold(more)
    if raw[:1] in ('"', "'"):
        return _unquote(" ".join([raw, *(line for line in more if line)]))
    value = re.split(r"[ \t]+#", raw, maxsplit=1)[0]
    return _fold([value, *more])


_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/"}


def _unquote(text: str) -> str:
    """The inside of a quoted scalar (up to its closing quote, or the end if none)."""
    quote, out, index = text[0], [], 1
    while index < len(text):
        char = text[index]
        if quote == "'" and char == "'":
            if text[index + 1 : index + 2] != "'":
                break
            index += 1  # '' is an escaped quote
        elif quote == '"' and char == "\\" and index + 1 < len(text):
            index += 1
            char = _ESCAPES.get(text[index], text[index])
        elif quote == '"' and char == '"':
            break
        out.append(char)
        index += 1
    return "".join(out)


def _fold(lines: list[str]) -> str:
    """Folded lines: single newlines become spaces, blank lines stay breaks."""
    paragraphs: list[list[str]] = [[]]
    for line in lines:
        if line:
            paragraphs[-1].append(line)
        elif paragraphs[-1]:
            paragraphs.append([])
    return "\n".join(" ".join(words) for words in paragraphs if words).strip()


def _one_line(text: str) -> str:
    """Whitespace collapsed, control characters dropped."""
    return " ".join(_CONTROL.sub(" ", text).split())


def _first_body_line(text: str) -> str:
    """The first non-empty line after the front matter, without heading marks."""
    lines = text.lstrip("\ufeff").splitlines()
    start = 0
    if lines and lines[0].rstrip() == "---":
        for index, line in enumerate(lines[1:], start=1):
            if line.rstrip() in ("---", "..."):
                start = index + 1
                break
    for line in lines[start:]:
        stripped = line.strip().lstrip("#").strip()
        if stripped:
            return _one_line(stripped)
    return ""
