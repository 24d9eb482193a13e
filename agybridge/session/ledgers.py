"""The turn core's two ledgers: the prompts waiting for their turn, and the
agy children alive or being retired. Plain bookkeeping, sans-I/O: the core
(``turns.py``) decides what happens to them; these only keep the record.
"""

from __future__ import annotations

from .turn_events import Child


class PromptQueue:
    """Prompts from arrival until their answer, in the order they run:
    steers first, each kind in wire order."""

    def __init__(self) -> None:
        self._queue: list[float] = []
        self._steered: set[float] = set()
        self._ready: set[float] = set()
        self._cancelled_before: float = -1
        self._cancelled: set[float] = set()
        #: Answered prompts whose request task may still tell `PromptArrived`
        #: (ignored then); forgotten at its `PromptDropped`, which comes last.
        self._answered: set[float] = set()
        #: The running turn's prompt, if its request task is done already.
        self._gone: set[float] = set()

    def __contains__(self, seq: float) -> bool:
        return seq in self._queue

    def __bool__(self) -> bool:
        return bool(self._queue)

    def waiting(self, running: float | None) -> tuple[float, ...]:
        return tuple(seq for seq in self._queue if seq != running)

    def head(self) -> float | None:
        return self._queue[0] if self._queue else None

    def known(self, seq: float) -> bool:
        """Queued already, or answered with its request task still running."""
        return seq in self._queue or seq in self._answered

    def was_answered(self, seq: float) -> bool:
        return seq in self._answered

    def add(self, seq: float, *, steer: bool) -> None:
        if steer:
            self._steered.add(seq)
        self._queue.append(seq)
        # The running turn, wherever it sorts, is the core's current turn:
        # only an idle core takes the head.
        self._queue.sort(key=lambda s: (s not in self._steered, s))

    def make_ready(self, seq: float) -> None:
        if seq in self._queue:
            self._ready.add(seq)

    def is_ready(self, seq: float) -> bool:
        return seq in self._ready

    def task_done(self, seq: float, *, running: bool) -> None:
        """Its request task ended (answered, or went away)."""
        self._answered.discard(seq)
        if running:
            self._gone.add(seq)
        elif seq in self._queue:
            self._remove(seq)

    def cancel_before(self, seq: float) -> None:
        self._cancelled_before = max(self._cancelled_before, seq)

    def cancel(self, seq: float) -> None:
        self._cancelled.add(seq)

    def is_cancelled(self, seq: float) -> bool:
        return seq < self._cancelled_before or seq in self._cancelled

    def cancelled(self) -> list[float]:
        return [seq for seq in self._queue if self.is_cancelled(seq)]

    def answered(self, seq: float) -> None:
        """It is answered: out of the queue; remembered until its task ends."""
        if seq in self._queue:
            self._remove(seq)
        if seq in self._gone:
            self._gone.discard(seq)
        else:
            self._answered.add(seq)

    def _remove(self, seq: float) -> None:
        self._queue.remove(seq)
        self._ready.discard(seq)
        self._steered.discard(seq)


class ChildLedger:
    """agy children: the current one (at most one alive or starting) and the
    ones being retired, each with whether to replace it warm once it is gone."""

    def __init__(self) -> None:
        self.current: Child | None = None
        self._retiring: dict[int, bool] = {}
        self._incarnations = 0

    def is_current(self, incarnation: int) -> bool:
        return self.current is not None and self.current.incarnation == incarnation

    @property
    def retiring(self) -> bool:
        """A child is being stopped (never start another meanwhile)."""
        return bool(self._retiring)

    def is_retiring(self, incarnation: int) -> bool:
        return incarnation in self._retiring

    def new(self, *, gated: bool, first: bool) -> Child:
        self._incarnations += 1
        self.current = Child(self._incarnations, gated=gated, first=first)
        return self.current

    def retire(self, child: Child, *, warm: bool) -> None:
        if self.current is child:
            self.current = None
        self._retiring[child.incarnation] = warm

    def gone(self, incarnation: int) -> bool:
        """It exited (or never started); whether to replace it warm."""
        if self.is_current(incarnation):
            self.current = None
        return self._retiring.pop(incarnation, False)
