"""Baselines: each cell's history of timings and tokens, and the noise model that reads it.

A baseline file keeps, per cell key (`model.Cell.key`: case and axes sorted by name, so
the axis order in the matrix does not matter), the last ``keep`` samples of each
measured phase: ``turn_s`` (first prompt sent -> last response: no bridge start-up, no
retry back-off), ``first_chunk_s`` (prompt -> first reply chunk) and ``tokens``. A cell
regresses when its value exceeds the median of its history by BOTH the ratio and the
absolute floor (`Limits`): the floor keeps a 0.8 s turn that took 1.96 s on a loaded
machine from crying wolf (seen under two CPU hogs), the ratio keeps a 60 s turn from
failing on 2.1 s of noise.
A history of fewer than ``min_samples`` samples reports its deltas but fails nothing
(its median is one noisy sample); ``--repeat`` fills a new history in one run.

`Baseline.update` appends a passing run's samples (every repetition of ``--repeat``) to
the history and drops the oldest past ``keep``: the reference is the median of the kept
history, never simply the last run, so slowdowns cannot ratchet through one by one.
An earlier ``--json`` report is accepted as a one-sample history.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs

from .model import cell_key
from .results import CellResult, Failure

KIND = "agybridge-smoke-baseline"
VERSION = 1
#: Samples kept per cell and phase.
KEEP = 5
#: The phases compared: name -> (JSON key of the cell report, unit).
PHASES = {"turn_s": "s", "first_chunk_s": "s", "tokens": "tokens"}


class BaselineError(Exception):
    """The baseline file cannot be read or is not a baseline or report of this tool."""


@attrs.frozen
class Limits:
    max_slowdown: float = 1.5
    #: Seconds a phase must grow by, beyond the ratio, to count as slower.
    slowdown_floor_s: float = 2.0
    max_token_growth: float = 1.5
    token_floor: int = 200
    #: Samples a phase's history needs before it can fail a cell: the median of one or
    #: two loaded-machine samples is itself noise (deltas are still reported).
    min_samples: int = 3

    def regressed(self, phase: str, now: float, reference: float) -> bool:
        if PHASES[phase] == "s":
            ratio, floor = self.max_slowdown, self.slowdown_floor_s
        else:
            ratio, floor = self.max_token_growth, float(self.token_floor)
        return now > reference * ratio and now - reference > floor


@attrs.define
class Comparison:
    """What a run compared: the loud failure of "0 compared" is decided from it."""

    held: list[str] = attrs.Factory(list)
    compared: set[str] = attrs.Factory(set)
    #: Held cells this run could not compare through no fault of theirs (absent, skipped).
    missed: list[str] = attrs.Factory(list)

    def problem(self) -> str | None:
        """Why the comparison is not to be trusted, or None."""
        if not self.held:
            return "the baseline holds none of the selected cells: nothing was compared"
        if self.missed:
            shown = ", ".join(self.missed[:5]) + (" …" if len(self.missed) > 5 else "")
            return (
                f"compared {len(self.compared)} of the {len(self.held)} cells the baseline "
                f"holds; not compared: {shown}"
            )
        return None


def _number(value: Any) -> float | None:
    """A finite number, else None (Python's json reads NaN and Infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


@attrs.define
class Baseline:
    #: cell key -> phase -> samples, oldest first.
    cells: dict[str, dict[str, list[float]]] = attrs.Factory(dict)
    keep: int = KEEP

    @classmethod
    def load(cls, path: Path) -> Baseline:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BaselineError(f"cannot read the baseline {path}: {exc}") from None
        if isinstance(data, dict) and data.get("kind") == KIND:
            return cls._from_baseline(path, data)
        if isinstance(data, dict) and data.get("kind") == "agybridge-smoke":
            return cls._from_report(path, data)
        raise BaselineError(
            f"{path} is neither a baseline nor an `agybridge smoke run --json` report"
        )

    @classmethod
    def _from_baseline(cls, path: Path, data: dict[str, Any]) -> Baseline:
        cells = data.get("cells")
        keep = data.get("keep", KEEP)
        if not isinstance(cells, dict) or not isinstance(keep, int) or keep < 1:
            raise BaselineError(f"{path}: not a valid baseline (cells, keep)")
        found: dict[str, dict[str, list[float]]] = {}
        for key, phases in cells.items():
            if not isinstance(phases, dict):
                raise BaselineError(f"{path}: cell {key!r} is not a table of phases")
            found[key] = {
                phase: [n for n in map(_number, samples) if n is not None]
                for phase, samples in phases.items()
                if phase in PHASES and isinstance(samples, list)
            }
        return cls(found, keep)

    @classmethod
    def _from_report(cls, path: Path, data: dict[str, Any]) -> Baseline:
        cells = data.get("cells")
        if not isinstance(cells, list) or not all(isinstance(c, dict) for c in cells):
            raise BaselineError(f"{path} is not an `agybridge smoke run --json` report")
        baseline = cls()
        for cell in cells:
            if cell.get("status") not in ("passed", "flaky"):
                continue
            key = cell.get("key") or _key(cell)
            for phase in PHASES:
                value = _number(cell.get(phase))
                if value is not None:
                    baseline.cells.setdefault(str(key), {}).setdefault(phase, []).append(value)
        return baseline

    def reference(self, key: str, phase: str) -> float | None:
        samples = self.cells.get(key, {}).get(phase)
        return statistics.median(samples) if samples else None

    def compare(
        self, result: CellResult, limits: Limits, comparison: Comparison | None = None
    ) -> None:
        """Annotate ``result`` with its deltas; add a failure per regressed phase."""
        key = result.cell.key
        if key not in self.cells or result.status not in ("passed", "flaky", "failed"):
            return
        deltas: dict[str, Any] = {}
        for phase, unit in PHASES.items():
            now = _measure(result, phase)
            reference = self.reference(key, phase)
            if now is None or reference is None:
                continue
            ratio = now / reference if reference > 0 else None
            samples = len(self.cells[key][phase])
            judged = samples >= limits.min_samples
            deltas[phase] = {
                "now": round(now, 3),
                "median": round(reference, 3),
                "samples": samples,
                "ratio": None if ratio is None else round(ratio, 3),
                "judged": judged,
            }
            if judged and limits.regressed(phase, now, reference):
                result.failures.append(
                    Failure(
                        f"baseline.{phase}",
                        f"≤ {_limit_text(limits, unit)} over the median {reference:.6g} {unit}",
                        f"{now:.6g} {unit}" + ("" if ratio is None else f" ({ratio:.2f}×)"),
                    )
                )
        result.baseline = deltas
        if comparison is not None and deltas:
            comparison.compared.add(key)
        if result.failures and result.status != "failed":
            result.status = "failed"

    def comparison(self, selected: Callable[[str], bool]) -> Comparison:
        return Comparison(held=[key for key in self.cells if selected(key)])

    def update(self, results: Iterable[CellResult]) -> None:
        """Append each passing cell's samples to its history, keeping the last ``keep``."""
        for result in results:
            if result.status not in ("passed", "flaky"):
                continue
            history = self.cells.setdefault(result.cell.key, {})
            for phase in PHASES:
                value = _measure(result, phase)
                if value is not None:
                    samples = history.setdefault(phase, [])
                    samples.append(round(value, 4))
                    del samples[: -self.keep]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "version": VERSION,
            "keep": self.keep,
            "cells": {key: self.cells[key] for key in sorted(self.cells)},
        }


def finish(comparison: Comparison, results: list[CellResult]) -> Comparison:
    """Record which held cells were not compared through no fault of their own."""
    ran_badly = {r.cell.key for r in results if r.status in ("failed", "error")}
    comparison.missed = [
        key for key in comparison.held if key not in comparison.compared and key not in ran_badly
    ]
    return comparison


def _measure(result: CellResult, phase: str) -> float | None:
    record = result.record
    if phase == "turn_s":
        return record.turn_s
    if phase == "first_chunk_s":
        return record.first_chunk_s
    return float(record.tokens) if record.turns else None


def _limit_text(limits: Limits, unit: str) -> str:
    if unit == "s":
        return f"{limits.max_slowdown:g}× and +{limits.slowdown_floor_s:g} s"
    return f"{limits.max_token_growth:g}× and +{limits.token_floor} tokens"


def _key(cell: dict[str, Any]) -> str:
    """A version-1 report's cell id made canonical (its axes were in file order)."""
    axes = cell.get("axes")
    return cell_key(str(cell.get("case")), axes if isinstance(axes, dict) else {})
