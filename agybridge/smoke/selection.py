"""Which cells a run takes: ``-k EXPR`` (as pytest reads it) and ``--lf`` (last failed).

``-k``: words joined by ``and``, ``or``, ``not`` and parentheses; a word matches a cell
whose id (``case [axis=value, ...]``) contains it, ignoring case — ``-k "one-word and
mode=safe"``, ``-k "not slow"``. ``--lf``: the ids of the cells that failed or errored
in the last run of the same matrix file, kept in ``CACHE_DIR/lastfailed.json`` (one
entry per matrix path); with no recorded failure every cell runs, as pytest does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from pathlib import Path

#: Default cache directory (relative to the working directory), like pytest's.
CACHE_DIR = Path(".agybridge-smoke-cache")
_LASTFAILED = "lastfailed.json"
_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


class SelectionError(ValueError):
    """``-k`` does not parse."""


def keyword(expression: str) -> Callable[[str], bool]:
    """A predicate over cell ids for a ``-k`` expression."""
    tokens = [m.group(1) for m in _TOKEN.finditer(expression) if m.group(1).strip()]
    if not tokens:
        raise SelectionError("-k: the expression is empty")
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        if position >= len(tokens):
            raise SelectionError(f"-k {expression!r}: the expression ends too early")
        position += 1
        return tokens[position - 1]

    def joined(
        word: str, inner: Callable[[], Callable[[str], bool]], combine: Callable[..., bool]
    ) -> Callable[[str], bool]:
        """``inner (word inner)*``, the parts combined by ``any`` or ``all``."""
        parts = [inner()]
        while peek() == word:
            take()
            parts.append(inner())
        return lambda text: combine(part(text) for part in parts)

    def disjunction() -> Callable[[str], bool]:
        return joined("or", conjunction, any)

    def conjunction() -> Callable[[str], bool]:
        return joined("and", negation, all)

    def negation() -> Callable[[str], bool]:
        if peek() == "not":
            take()
            inner = negation()
            return lambda text: not inner(text)
        token = take()
        if token == "(":
            inner = disjunction()
            if take() != ")":
                raise SelectionError(f"-k {expression!r}: a '(' is not closed")
            return inner
        if token in (")", "and", "or"):
            raise SelectionError(f"-k {expression!r}: unexpected {token!r}")
        word = token.lower()
        return lambda text: word in text.lower()

    found = disjunction()
    if position != len(tokens):
        raise SelectionError(f"-k {expression!r}: unexpected {tokens[position]!r}")
    return found


def _cache_file(cache_dir: Path) -> Path:
    return cache_dir / _LASTFAILED


def last_failed(cache_dir: Path, matrix: Path) -> set[str]:
    """Ids that failed in the last run of ``matrix`` (empty: none recorded)."""
    try:
        data = json.loads(_cache_file(cache_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    found = data.get(str(matrix.resolve())) if isinstance(data, dict) else None
    return {str(item) for item in found} if isinstance(found, list) else set()


def record_failed(cache_dir: Path, matrix: Path, failed: Iterable[str]) -> None:
    """Remember this run's failed ids for ``--lf`` (an unwritable cache is not fatal)."""
    path = _cache_file(cache_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    data[str(matrix.resolve())] = sorted(failed)
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "README").write_text(
        "agybridge smoke's cache (--lf reads lastfailed.json). Safe to delete.\n"
    )
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
