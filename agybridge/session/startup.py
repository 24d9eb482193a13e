"""What a session settles before its nursery opens (``Session.run``): that agy
runs at all, and the session's private directory. Either failing is an
:class:`~.errors.AgyStartError` that ``session/new`` reports as itself."""

from __future__ import annotations

from ..workspace.private_root import PrivateRootError, prepare_private_root
from ..workspace.staging import StagingArea
from .deps import SessionDeps
from .errors import AgyStartError
from .spec import SessionSpec


async def check_agy_runs(deps: SessionDeps) -> None:
    """Raises:
    AgyStartError: agy cannot be run (missing, not executable, fails ``--version``).
    """
    runs = deps.agy_runs
    failure = await runs.failure() if runs is not None else None
    if failure is not None:
        raise AgyStartError(failure[1], cause=failure[0], fields={"agyBin": deps.agy_bin})


async def prepare_staging(deps: SessionDeps, spec: SessionSpec) -> StagingArea | None:
    """The session's private root (staging area, MCP config).

    Raises:
        AgyStartError: it cannot be made, with what to do.
    """
    try:
        return await prepare_private_root(deps.staging_base, deps.keep_staging, spec.mcp_config)
    except PrivateRootError as exc:
        raise AgyStartError(
            f"{exc.message}: make it a writable directory, or set "
            "AGYBRIDGE_STAGING_DIR to one (`agybridge doctor` checks it)",
            cause="staging_unusable",
            fields={"path": exc.base},
        ) from exc
