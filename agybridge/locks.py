"""`EagerLock`: a lock for the hot paths, taken without a pass through the scheduler.

``trio.Lock`` (and ``trio.CapacityLimiter``) yield even when free, and a ``Lock``
also registers its holder so a task that dies holding it breaks it. On a path run
for every read of agy's output or every journal write that was a measurable share
of a turn (issue 15), and neither is needed where the holder is an ``async with``
block or a worker thread of ``trio.to_thread``.
"""

from __future__ import annotations

import trio


class EagerLock:
    """One holder at a time, in arrival order; taken at once when free (no
    checkpoint then: the caller's own awaits are its checkpoints). Usable in
    ``async with`` and as the ``limiter`` of ``trio.to_thread.run_sync``, which
    takes any object with ``acquire_on_behalf_of``/``release_on_behalf_of``."""

    __slots__ = ("_free",)

    def __init__(self) -> None:
        # A release hands the permit straight to the first waiter, so taking it
        # "at once" never overtakes anybody.
        self._free = trio.Semaphore(1, max_value=1)

    async def __aenter__(self) -> None:
        try:
            self._free.acquire_nowait()
        except trio.WouldBlock:
            await self._free.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self._free.release()

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        await self.__aenter__()

    def release_on_behalf_of(self, borrower: object) -> None:
        self._free.release()
