"""The matrix as the runner uses it: run settings, axes, cases, expectations, cells."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import attrs

from .condition import Condition

#: Axes that become session settings (``session/new`` ``_meta``); "default" sets nothing.
AXES = ("mode", "model", "effort", "agent")
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
    tool_kinds: tuple[str, ...] = ()
    files: dict[str, str] = attrs.Factory(dict)
    max_seconds: float | None = None
    max_tokens: int | None = None


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
    permissions: Permissions = "allow"
    expect: Expect = attrs.Factory(Expect)
    budget: Budget = attrs.Factory(Budget)


@attrs.frozen
class Matrix:
    path: Path
    run: RunConfig
    axes: dict[str, tuple[str, ...]]
    cases: tuple[Case, ...]

    def cells(self) -> list[Cell]:
        """Every case once per combination of the axes, in file order."""
        combos: list[dict[str, str]] = [{}]
        for axis, values in self.axes.items():
            combos = [{**combo, axis: value} for combo in combos for value in values]
        cells: list[Cell] = []
        for case in self.cases:
            for combo in combos:
                cells.append(Cell(index=len(cells), case=case, axes=combo))
        return cells


@attrs.frozen
class Cell:
    index: int
    case: Case
    axes: dict[str, str]

    @property
    def label(self) -> str:
        """The JUnit test name: the axis values, or "default" without axes."""
        return ", ".join(f"{k}={v}" for k, v in self.axes.items()) or DEFAULT

    @property
    def id(self) -> str:
        """Stable across runs: what baselines match on."""
        return f"{self.case.name} [{self.label}]"

    def session_meta(self) -> dict[str, str]:
        return {k: v for k, v in self.axes.items() if v != DEFAULT}
