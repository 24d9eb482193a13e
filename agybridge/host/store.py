"""The session database a bridge process opens: deferred in the stdio bridge
(not before ``initialize`` is answered), at once in the daemon."""

from __future__ import annotations

import contextlib
import functools
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ..store import AsyncStore, StoreError, StoreUnavailableError, check_path

if TYPE_CHECKING:
    from ..store import Store

logger = logging.getLogger(__name__)


def deferred_store(path: Path | None) -> AsyncStore:
    """The session database, opened by its first use (issue 15: not before
    ``initialize`` is answered); in memory (with a warning) if it cannot be
    used, so the bridge always starts (a corrupt file is moved aside).

    Raises:
        StorePathError: the path names a directory, FIFO, device...: the user's
            mistake, and maybe the user's data, so the bridge does not start.
    """
    if path is not None:
        # One stat(2), so that a bad path still stops the start; one that cannot
        # even be looked at is for the open to report (then memory).
        with contextlib.suppress(StoreUnavailableError):
            check_path(path)
    return AsyncStore.deferred(functools.partial(_open_or_memory, path))


async def open_store(path: Path | None) -> AsyncStore:
    """`deferred_store`, opened now (the daemon: it serves many clients)."""
    store = deferred_store(path)
    await store.wait_open()
    return store


def _open_or_memory(path: Path | None) -> Store:
    """(In the store's worker thread.) The database at ``path``, else in memory."""
    from ..store import Store  # noqa: PLC0415 - sqlite3 is loaded by the first use

    if path is not None:
        try:
            return Store.open(path)
        except StoreError as exc:  # a bad path was refused at start-up (check_path)
            logger.warning("session history unavailable (%s); keeping sessions in memory", exc)
    return Store.open_memory()
