"""Run every cell of a matrix, at most ``run.concurrency`` at once, with retries.

Each cell runs in its own task of one nursery, gated by a `trio.CapacityLimiter`.
A run-wide sequence number orders every cell's start and end (``seq_start`` /
``seq_end`` in the report), so "cells overlapped" is a fact of the record, not of a
clock. An error classified transient (`causes.Cause.transient`) is retried from
scratch (fresh bridge and workspace) up to ``run.retries`` times, after the quota's
reset time when agy named one, else after an exponential back-off.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import attrs
import trio

from . import expectations
from .causes import Cause
from .cell import Setup, run_attempt
from .model import Cell, Matrix
from .results import CellResult

#: First back-off before retrying a transient error (doubles per attempt).
BACKOFF_S = 2.0


@attrs.define
class Events:
    """Hooks the progress view implements (all synchronous, all quick)."""

    started: Callable[[Cell], None] = lambda cell: None
    finished: Callable[[CellResult], None] = lambda result: None
    line: Callable[[Cell, str], None] = lambda cell, text: None
    retrying: Callable[[Cell, str, float], None] = lambda cell, why, wait_s: None


class Runner:
    def __init__(self, matrix: Matrix, setup: Setup, events: Events) -> None:
        self.matrix = matrix
        self.setup = setup
        self.events = events
        self.results: list[CellResult] = []
        self._seq = 0
        self._started = 0.0

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    async def run(self, cells: list[Cell], skipped: dict[int, str]) -> list[CellResult]:
        """Run ``cells`` (``skipped`` maps cell index -> reason); results in cell order.

        ``run.concurrency`` workers take the cells in file order.
        """
        self._started = trio.current_time()
        by_index: dict[int, CellResult] = {}
        queue = [cell for cell in cells if cell.index not in skipped]
        for cell in cells:
            if cell.index in skipped:
                result = CellResult(cell, "skipped", skip_reason=skipped[cell.index])
                by_index[cell.index] = result
                self.events.finished(result)
        # One iterator shared by the workers: each takes the next cell in file order
        # without a checkpoint in between, so the start order is the file order.
        pending = iter(queue)
        async with trio.open_nursery() as nursery:
            for _ in range(min(self.setup.run.concurrency, len(queue))):
                nursery.start_soon(self._worker, pending, by_index)
        self.results = [by_index[cell.index] for cell in cells]
        return self.results

    async def _worker(self, pending: Iterator[Cell], out: dict[int, CellResult]) -> None:
        for cell in pending:
            await self._run_cell(cell, out)

    async def _run_cell(self, cell: Cell, out: dict[int, CellResult]) -> None:
        result = CellResult(cell, "passed")
        result.seq_start = self._next_seq()
        result.started_s = trio.current_time() - self._started
        self.events.started(cell)
        retries = self.setup.run.retries
        for attempt in range(retries + 1):
            result.attempts = attempt + 1
            record, cause, leftovers = await run_attempt(
                cell, self.setup, attempt, lambda text: self.events.line(cell, text)
            )
            result.record, result.error, result.leftovers = record, cause, leftovers
            if cause is None or not cause.transient or attempt == retries:
                break
            wait_s = cause.retry_after_s
            if wait_s is None:
                wait_s = BACKOFF_S * 2**attempt
            wait_s = min(wait_s, self.setup.run.retry_max_wait_s)
            self.events.retrying(cell, f"{cause.kind}: {cause.message}", wait_s)
            await trio.sleep(wait_s)  # a rate limit or quota is waited out by time
        if result.error is None and result.leftovers:
            result.error = Cause(
                "bridge_error",
                "processes were left running after the bridge exited (killed): "
                + "; ".join(result.leftovers)[:500],
            )
        if result.error is not None:
            result.status = "error"
        else:
            result.failures = expectations.check(cell.case, result.record)
            result.status = "failed" if result.failures else "passed"
        result.ended_s = trio.current_time() - self._started
        result.seq_end = self._next_seq()
        out[cell.index] = result
        self.events.finished(result)
