"""The session's private ``--add-dir`` root: staged attachments and the
editor's MCP servers (never the user's project or agy's global config)."""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

import trio

from .mcp import write_mcp_config
from .staging import StagingArea, StagingError


async def prepare_private_root(
    base: str | None, keep: bool, mcp_config: Mapping[str, Any]
) -> StagingArea | None:
    """Create it (None without a staging base, e.g. in tests).

    Raises:
        PrivateRootError: it could not be made (session/new fails with it).
    Cancellation: a directory made already is removed again.
    """
    if base is None:
        return None
    try:
        staging = await trio.to_thread.run_sync(
            functools.partial(StagingArea.create, base, keep=keep)
        )
    except (StagingError, ValueError, OSError) as exc:
        raise _start_error(exc, base) from exc
    try:
        if mcp_config.get("mcpServers"):
            await trio.to_thread.run_sync(write_mcp_config, staging.root, dict(mcp_config))
    except BaseException as exc:
        # Nobody else knows the directory yet: remove it (and release its lock).
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(staging.remove)
        if isinstance(exc, ValueError | OSError):
            raise _start_error(exc, base) from exc
        raise
    return staging


class PrivateRootError(StagingError):
    """The session's private directory could not be made under ``base``."""

    def __init__(self, message: str, base: str) -> None:
        super().__init__(message)
        self.message = message
        self.base = base


def _start_error(exc: Exception, base: str) -> PrivateRootError:
    cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
    if os.path.exists(base) and not os.path.isdir(base):
        reason = "it is not a directory"
    elif isinstance(cause, OSError) and cause.strerror:
        reason = cause.strerror
    else:
        reason = str(cause)
    return PrivateRootError(
        f"the session's private directory could not be made under {base!r} ({reason})", base
    )
