"""What the runner shows while it works: a live view on a terminal, plain lines in CI.

Plain (not a TTY, e.g. a CI log): one line per judged cell (PASS/FLAKY/FAIL/ERROR/SKIP
with the reason; printed once the expectations AND the baseline judged it), one per
retry; ``-v`` adds a START line per cell and its transcript lines as they happen,
prefixed with the cell id. Live (a TTY): the same permanent lines, with
a status block under them that is redrawn in place — counts, elapsed time and one line
per running cell with its own elapsed time — refreshed on every event and by `tick`.
"""

from __future__ import annotations

from typing import TextIO

import trio

from .model import Cell
from .results import STATUSES, CellResult
from .runner import Events

_CLEAR_BLOCK = "\x1b[{n}F\x1b[J"  # cursor up n lines to column 0, clear to the end
REFRESH_S = 0.5


class Progress:
    def __init__(self, out: TextIO, total: int, *, live: bool, verbose: bool) -> None:
        self.out = out
        self.total = total
        self.live = live
        self.verbose = verbose
        self.running: dict[int, tuple[Cell, float]] = {}
        self.done: dict[str, int] = dict.fromkeys(STATUSES, 0)
        self.started = trio.current_time()
        self._block_lines = 0

    def events(self) -> Events:
        return Events(self.cell_started, self.cell_finished, self.cell_line, self.retrying)

    # -- events

    def cell_started(self, cell: Cell) -> None:
        self.running[cell.index] = (cell, trio.current_time())
        self._emit(f"START {cell.id}" if self.verbose else None)

    def cell_finished(self, result: CellResult) -> None:
        self.running.pop(result.cell.index, None)
        self.done[result.status] += 1
        word = {
            "passed": "PASS ",
            "flaky": "FLAKY",
            "failed": "FAIL ",
            "error": "ERROR",
            "skipped": "SKIP ",
        }
        text = f"{word[result.status]} {result.cell.id}"
        if result.status != "skipped":
            text += f"  {result.duration_s:.2f}s"
        if result.error is not None:
            text += f"  {result.error.kind}: {_one_line(result.error.message)}"
        elif result.earlier:
            kinds = ", ".join(a.error.kind if a.error else "failure" for a in result.earlier)
            text += f"  (passed on attempt {result.attempts} after: {kinds})"
        elif result.failures:
            text += "  " + "; ".join(_one_line(f.text()) for f in result.failures)
        elif result.skip_reason:
            text += f"  ({result.skip_reason})"
        self._emit(text)

    def cell_line(self, cell: Cell, text: str) -> None:
        if self.verbose:
            for line in text.splitlines() or [""]:
                self._emit(f"  [{cell.id}] {line}")

    def retrying(self, cell: Cell, why: str, wait_s: float) -> None:
        self._emit(f"RETRY {cell.id} in {wait_s:.1f}s  ({_one_line(why)})")

    # -- drawing

    async def tick(self) -> None:
        """Redraw the live block every `REFRESH_S` (elapsed times move); run until cancelled."""
        while self.live:
            await trio.sleep(REFRESH_S)
            self._emit(None)

    def close(self) -> None:
        """Remove the live block (the summary follows it)."""
        if self.live and self._block_lines:
            self.out.write(_CLEAR_BLOCK.format(n=self._block_lines))
            self._block_lines = 0
            self.out.flush()

    def _emit(self, permanent: str | None) -> None:
        if not self.live:
            if permanent is not None:
                print(permanent, file=self.out, flush=True)
            return
        chunks = []
        if self._block_lines:
            chunks.append(_CLEAR_BLOCK.format(n=self._block_lines))
        if permanent is not None:
            chunks.append(permanent + "\n")
        block = self._block()
        chunks.append("".join(line + "\n" for line in block))
        self._block_lines = len(block)
        self.out.write("".join(chunks))
        self.out.flush()

    def _block(self) -> list[str]:
        now = trio.current_time()
        finished = sum(self.done.values())
        header = (
            f"agybridge smoke: {finished}/{self.total} done · {self.done['passed']} passed · "
            f"{self.done['flaky']} flaky · "
            f"{self.done['failed']} failed · {self.done['error']} errors · "
            f"{self.done['skipped']} skipped · {len(self.running)} running · "
            f"{now - self.started:.1f}s"
        )
        return [header] + [
            f"  ▸ {cell.id}  {now - since:.1f}s" for cell, since in self.running.values()
        ]


def _one_line(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
