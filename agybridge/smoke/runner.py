"""Run every cell of a matrix, at most ``run.concurrency`` at once, with retries.

Each cell runs in its own task of one nursery, gated by the workers taking cells in
file order. A run-wide sequence number orders every cell's start and end (``seq_start``
/ ``seq_end`` in the report), so "cells overlapped" is a fact of the record, not of a
clock. An error classified transient (`causes.Cause.transient`) is retried from
scratch (fresh bridge and workspace) up to ``run.retries`` times, after the quota's
reset time when agy named one, else after an exponential back-off; a cell whose
expectations failed is run again up to ``--reruns`` times. The attempts that did not
pass are kept (`results.Attempt`), and a cell that passed only on a retry or rerun is
``flaky``, not ``passed``.

A cell is judged completely (expectations, then the ``judge`` hook: the baseline)
before the ``finished`` event, so the progress line says what the report will say.
`Runner.stop` (a signal, or ``-x`` after the first failure) cancels the cells still
running (their bridges are stopped on the way out); every cell without a verdict is
then reported ``skipped`` with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import attrs
import trio

from . import expectations
from .causes import Cause
from .cell import Setup, run_attempt
from .model import Cell, Matrix
from .results import Attempt, CellRecord, CellResult, Failure

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
    def __init__(
        self,
        matrix: Matrix,
        setup: Setup,
        events: Events,
        *,
        judge: Callable[[CellResult], None] = lambda result: None,
        stop_on_failure: bool = False,
        reruns: int = 0,
    ) -> None:
        self.matrix = matrix
        self.setup = setup
        self.events = events
        self.judge = judge
        self.stop_on_failure = stop_on_failure
        #: Runs again of a cell whose expectations failed (``--reruns``, as pytest-rerunfailures).
        self.reruns = reruns
        self.results: list[CellResult] = []
        #: Why the run stopped before its end (None: it did not).
        self.stopped: str | None = None
        self._seq = 0
        self._started = 0.0
        self._running: set[int] = set()
        self._scope: trio.CancelScope | None = None

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def stop(self, reason: str) -> None:
        """End the run now: running cells are cancelled, the rest are not started."""
        if self.stopped is None:
            self.stopped = reason
        if self._scope is not None:
            self._scope.cancel(reason=reason)

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
        with trio.CancelScope() as self._scope:
            if self.stopped is not None:
                self._scope.cancel(reason=self.stopped)
            async with trio.open_nursery() as nursery:
                for _ in range(min(self.setup.run.concurrency, len(queue))):
                    nursery.start_soon(self._worker, pending, by_index)
        for cell in cells:
            if cell.index not in by_index:
                was = "cut short" if cell.index in self._running else "not run"
                result = CellResult(cell, "skipped", skip_reason=f"{was}: {self.stopped}")
                by_index[cell.index] = result
                self.events.finished(result)
        self.results = [by_index[cell.index] for cell in cells]
        return self.results

    async def _worker(self, pending: Iterator[Cell], out: dict[int, CellResult]) -> None:
        for cell in pending:
            await self._run_cell(cell, out)

    async def _run_cell(self, cell: Cell, out: dict[int, CellResult]) -> None:
        result = CellResult(cell, "passed")
        result.seq_start = self._next_seq()
        result.started_s = trio.current_time() - self._started
        self._running.add(cell.index)
        self.events.started(cell)
        retries, reruns, attempt = self.setup.run.retries, self.reruns, 0
        while True:
            result.attempts = attempt + 1
            record, cause, leftovers = await run_attempt(
                cell, self.setup, attempt, lambda text: self.events.line(cell, text)
            )
            result.record, result.leftovers = record, leftovers
            result.error, result.failures = _verdict(cell, record, cause, leftovers)
            attempt += 1
            if result.error is not None and result.error.transient and retries:
                retries -= 1
                wait_s = result.error.retry_after_s
                if wait_s is None:
                    wait_s = BACKOFF_S * 2 ** (attempt - 1)
                wait_s = min(wait_s, self.setup.run.retry_max_wait_s)
                why = f"{result.error.kind}: {result.error.message}"
            elif result.error is None and result.failures and reruns:
                reruns -= 1
                wait_s = 0.0
                why = "; ".join(f.text() for f in result.failures)
            else:
                break
            result.earlier.append(Attempt(result.error, result.failures, record.transcript))
            self.events.retrying(cell, why, wait_s)
            await trio.sleep(wait_s)  # a rate limit or quota is waited out by time
        if result.error is not None:
            result.status = "error"
        else:
            result.status = "failed" if result.failures else "passed"
        result.ended_s = trio.current_time() - self._started
        self.judge(result)
        if result.status == "passed" and result.earlier:
            result.status = "flaky"
        result.seq_end = self._next_seq()
        out[cell.index] = result
        self._running.discard(cell.index)
        self.events.finished(result)
        if self.stop_on_failure and result.status in ("failed", "error"):
            word = "failed" if result.status == "failed" else "errored"
            self.stop(f"-x stopped the run after {cell.id} {word}")


def _verdict(
    cell: Cell, record: CellRecord, cause: Cause | None, leftovers: list[str]
) -> tuple[Cause | None, list[Failure]]:
    """One attempt's error, else its failed expectations."""
    if cause is None and leftovers:
        cause = Cause(
            "leftovers",
            "processes were left running after the bridge exited (killed): "
            + "; ".join(leftovers)[:500],
        )
    if cause is not None:
        return cause, []
    return None, expectations.check(cell.case, record, cell.values())
