"""Where a key of a TOML file was written: tomllib keeps no positions, so we scan.

The scan understands what a matrix file uses: ``[table]`` and ``[[array]]`` headers
(``[case.expect]`` after a ``[[case]]`` belongs to that case), ``key = ...`` and dotted
``a.b = ...`` lines, and skips multi-line strings. Inline tables map their inner keys to
the line of their own key, which is where a reader looks anyway.
"""

from __future__ import annotations

import re

Path = tuple[str | int, ...]

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)
_PART = re.compile(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""")


def _parts(dotted: str) -> list[str]:
    return [p.strip("\"'") for p in _PART.findall(dotted)]


class LineIndex:
    """Maps key paths (``("case", 2, "expect", "contains")``) to 1-based line numbers."""

    def __init__(self, text: str) -> None:
        self._lines: dict[Path, int] = {}
        arrays: dict[tuple[str, ...], int] = {}
        table: Path = ()
        in_string: str | None = None
        for number, line in enumerate(text.splitlines(), start=1):
            if in_string is not None:
                if line.count(in_string) % 2 == 1:
                    in_string = None
                continue
            header = _HEADER.match(line)
            if header is not None and not line.lstrip().startswith(('["', "['")):
                names = _parts(header.group(2))
                if header.group(1) == "[[":
                    arrays[tuple(names)] = arrays.get(tuple(names), -1) + 1
                table = self._resolve(names, arrays)
                self._lines.setdefault(table, number)
                continue
            key = _KEY.match(line)
            if key is None:
                continue
            self._lines.setdefault((*table, *_parts(key.group(1))), number)
            rest = line[key.end() :]
            for quote in ('"""', "'''"):
                if rest.count(quote) % 2 == 1:
                    in_string = quote

    @staticmethod
    def _resolve(names: list[str], arrays: dict[tuple[str, ...], int]) -> Path:
        """A header's path, with the index of each enclosing array of tables."""
        path: list[str | int] = []
        for depth, name in enumerate(names, start=1):
            path.append(name)
            index = arrays.get(tuple(names[:depth]))
            if index is not None:
                path.append(index)
        return tuple(path)

    def line(self, path: Path) -> int | None:
        """The line of ``path`` or of its nearest written ancestor."""
        for end in range(len(path), 0, -1):
            found = self._lines.get(path[:end])
            if found is not None:
                return found
        return None
