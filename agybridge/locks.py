"""`EagerLock`: a lock for the hot paths, taken without a pass through the
scheduler; `try_file_lock`: an ``flock`` between processes (one daemon per
session database, store/claim.py).

``trio.Lock`` (and ``trio.CapacityLimiter``) yield even when free, and a ``Lock``
also registers its holder so a task that dies holding it breaks it. Neither is
needed where the holder is an ``async with`` block or a worker thread of
``trio.to_thread``, and a lock taken for every read of agy's output or every
journal write should not make each of them wait for the scheduler.
"""

from __future__ import annotations

import fcntl
import os

import trio


class EagerLock:
    """One holder at a time, in arrival order; taken at once when free (no
    checkpoint then: the caller's own awaits are its checkpoints). Usable in
    ``async with`` and as the ``limiter`` of ``trio.to_thread.run_sync``, which
    takes any object with ``acquire_on_behalf_of``/``release_on_behalf_of``."""

    __slots__ = ("_held", "_lot", "_waiting")

    def __init__(self) -> None:
        self._held = False
        # A release hands the lock straight to the first waiter, so taking it
        # "at once" never overtakes anybody.
        self._lot = trio.lowlevel.ParkingLot()
        #: Tasks in the lot, or just cancelled out of it.
        self._waiting = 0

    async def __aenter__(self) -> None:
        if not self._held:
            self._held = True
            return
        self._waiting += 1
        try:
            # Woken holding it: a release hands it over (``_held`` stays True),
            # so a newcomer taking it "at once" never overtakes a waiter.
            await self._lot.park()
        finally:
            self._waiting -= 1

    async def __aexit__(self, *exc_info: object) -> None:
        self._release()

    def locked(self) -> bool:
        """Someone holds the lock (or it is being handed to a waiter)."""
        return self._held

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        await self.__aenter__()

    def release_on_behalf_of(self, borrower: object) -> None:
        self._release()

    def _release(self) -> None:
        # Still held if handed to a waiter. A cancelled waiter has left the lot
        # but may still be counted: then nobody is woken and the lock is free.
        if not (self._waiting and self._lot.unpark()):
            self._held = False


def try_file_lock(path: str, *, exclusive: bool) -> int | None:
    """``path`` opened (created 0600 if missing, never through a symlink) and
    ``flock``-ed without waiting: its fd, held until closed; None when another
    process holds a conflicting lock on it.

    Raises:
        OSError: it cannot be opened (``ELOOP``: it is a symlink).
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    fd = os.open(path, flags, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd
