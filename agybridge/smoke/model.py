"""The matrix as the runner uses it: run settings, axes, cases, expectations, cells.

Cells are the product of the ``[matrix]`` axes, less ``matrix.exclude`` entries, plus
``matrix.include`` entries (GitHub Actions' rules: an entry that matches existing
combinations on all their axes adds its new keys to them, else it is a combination of
its own), less the case's own ``exclude`` entries. A cell's `Cell.key` lists its axes
sorted by name, so reordering the axes in the file changes no key (baselines match on
it). Axes other than `AXES` are custom: like ``[vars]``, they only fill ``{{name}}``
placeholders in prompts, ``env`` values and text expectations.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import attrs

from .condition import Condition

#: Axes that become session settings (``session/new`` ``_meta``); "default" sets nothing.
AXES = ("mode", "model", "effort", "agent")
#: ``{{name}}`` in a prompt, an env value or a text expectation.
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}")


def fill(text: str, values: dict[str, str]) -> str:
    """``text`` with every ``{{name}}`` replaced (names were checked at load time)."""
    return PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


DEFAULT = "default"
Permissions = Literal["allow", "deny", "fail"]


@attrs.frozen
class RunConfig:
    concurrency: int = 1
    timeout_s: float = 300.0
    retries: int = 0
    #: Longest wait before a retry (a quota that resets later is not transient).
    retry_max_wait_s: float = 60.0
    workspace: Path | None = None
    env: dict[str, str] = attrs.Factory(dict)


@attrs.frozen
class Expect:
    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()
    regex: tuple[re.Pattern[str], ...] = ()
    json_schema: Path | None = None
    #: The schema itself, loaded (and checked) when the matrix is read.
    schema: Any = None
    stop_reason: str | None = None
    #: Kinds of tools that must have completed.
    tool_kinds: tuple[str, ...] = ()
    #: Kinds of tools that must have been tried (whatever their outcome).
    tool_attempts: tuple[str, ...] = ()
    #: True: the cell must not have called any tool.
    no_tools: bool = False
    #: Kinds of tools that must not have been called.
    not_tool_kinds: tuple[str, ...] = ()
    files: dict[str, str] = attrs.Factory(dict)
    #: Workspace files that must not exist after the run.
    files_absent: tuple[str, ...] = ()
    max_seconds: float | None = None
    max_tokens: int | None = None
    #: The last turn's reply must hold at least this many images.
    images: int | None = None
    #: The last prompt must be refused with an error naming this cause (catalogue id).
    error: str | None = None
    #: ``session/list`` for the cell's workspace must name the cell's session.
    listed: bool = False


@attrs.frozen
class Budget:
    max_tokens: int | None = None
    max_seconds: float | None = None


@attrs.frozen
class Case:
    name: str
    prompts: tuple[str, ...]
    attachments: tuple[Path, ...] = ()
    env: dict[str, str] = attrs.Factory(dict)
    skip_if: Condition | None = None
    #: Axis combinations this case does not run (``[[case.exclude]]``-style tables).
    exclude: tuple[dict[str, str], ...] = ()
    permissions: Permissions = "allow"
    #: ``session/set_config_option`` calls (configId -> value) made before the last prompt.
    set_config: dict[str, str] = attrs.Factory(dict)
    expect: Expect = attrs.Factory(Expect)
    budget: Budget = attrs.Factory(Budget)


def cell_key(case: str, axes: dict[str, str]) -> str:
    """A cell's key: the case and its axis values sorted by axis name."""
    text = ", ".join(f"{k}={axes[k]}" for k in sorted(axes)) or DEFAULT
    return f"{case} [{text}]"


def _matches(combo: dict[str, str], entry: dict[str, str]) -> bool:
    return all(combo.get(key) == value for key, value in entry.items())


@attrs.frozen
class Matrix:
    path: Path
    run: RunConfig
    axes: dict[str, tuple[str, ...]]
    cases: tuple[Case, ...]
    include: tuple[dict[str, str], ...] = ()
    exclude: tuple[dict[str, str], ...] = ()
    variables: dict[str, str] = attrs.Factory(dict)
    #: Deprecations met while reading the file (``skip_if``), ``FILE:LINE: ...`` each.
    warnings: tuple[str, ...] = ()

    def combinations(self) -> list[dict[str, str]]:
        """The axis combinations, GitHub-style: product, less exclude, plus include."""
        combos: list[dict[str, str]] = [{}]
        for axis, values in self.axes.items():
            combos = [{**combo, axis: value} for combo in combos for value in values]
        combos = [c for c in combos if not any(_matches(c, e) for e in self.exclude)]
        if not self.axes and self.include:
            combos = []
        for entry in self.include:
            original = {k: v for k, v in entry.items() if k in self.axes}
            extra = {k: v for k, v in entry.items() if k not in self.axes}
            matched = False
            for combo in combos:
                fits = all(combo.get(k, v) == v for k, v in extra.items())
                if _matches(combo, original) and fits:
                    combo.update(extra)
                    matched = True
            if not matched:
                combos.append(dict(entry))
        return combos

    def cells(self, repeat: int = 1) -> list[Cell]:
        """Every case once per combination (and per repetition), in file order."""
        cells: list[Cell] = []
        for case in self.cases:
            for combo in self.combinations():
                if any(_matches(combo, entry) for entry in case.exclude):
                    continue
                for number in range(1, repeat + 1):
                    cells.append(Cell(len(cells), case, combo, self.variables, number, repeat))
        return cells


@attrs.frozen
class Cell:
    index: int
    case: Case
    axes: dict[str, str]
    variables: dict[str, str] = attrs.Factory(dict)
    repeat: int = 1
    repeats: int = 1

    @property
    def label(self) -> str:
        """The JUnit test name: the axis values sorted by axis, or "default" without axes."""
        text = ", ".join(f"{k}={self.axes[k]}" for k in sorted(self.axes)) or DEFAULT
        return text if self.repeats == 1 else f"{text} #{self.repeat}"

    @property
    def key(self) -> str:
        """Stable across runs and axis order, the same for every repetition: baselines' key."""
        return cell_key(self.case.name, self.axes)

    @property
    def id(self) -> str:
        """The key, with the repetition when the run repeats cells (what -k and --lf see)."""
        return self.key if self.repeats == 1 else f"{self.key} #{self.repeat}"

    def values(self) -> dict[str, str]:
        """What ``{{name}}`` placeholders may name: ``[vars]``, then the cell's axes."""
        return {**self.variables, **self.axes}

    @property
    def prompts(self) -> tuple[str, ...]:
        return tuple(fill(p, self.values()) for p in self.case.prompts)

    @property
    def env(self) -> dict[str, str]:
        return {k: fill(v, self.values()) for k, v in self.case.env.items()}

    def session_meta(self) -> dict[str, str]:
        return {k: v for k, v in self.axes.items() if k in AXES and v != DEFAULT}
