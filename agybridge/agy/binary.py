"""Where agy is and whether it runs, explained once for ``doctor`` and
``session/new`` alike: unset, missing, a directory, not executable, or a
program that fails at once each get their own words and fix.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import attrs
import trio

#: Where to read how to install agy.
INSTALL_URL = "https://antigravity.google/docs/cli"
#: The cause id of an agy that is found but fails at once (``--version``).
AGY_FAILS = "agy_fails"
#: How long ``agy --version`` may take before the check gives up (and lets the
#: spawn go ahead: a slow answer is no proof that agy is broken).
VERSION_CHECK_TIMEOUT_S = 15.0


@attrs.frozen
class AgyBinary:
    """The agy program as configured: its absolute path, or what is wrong."""

    path: str | None
    #: What is wrong (naming AGY_BIN or the path), and what to do about it.
    problem: str | None = None
    fix: str | None = None
    #: A stable id for the problem: agy_not_found, agy_is_directory,
    #: agy_not_executable.
    cause: str | None = None

    def message(self) -> str:
        """One line a person can act on."""
        return f"{self.problem}: {self.fix}" if self.problem else f"agy is {self.path}"


def locate(name: str, *, from_env: bool) -> AgyBinary:
    """Where ``name`` (AGY_BIN, or ``agy``) is, telling unset / missing / a
    directory / not executable apart."""
    if not from_env or os.sep not in name:
        found = shutil.which(name)
        if found is not None:
            return AgyBinary(found)
        if not from_env:
            return AgyBinary(
                None,
                "agy is not on PATH and AGY_BIN is not set",
                f"install agy ({INSTALL_URL}) or set AGY_BIN=/path/to/agy (an editor "
                "started from the desktop may have a shorter PATH than your terminal)",
                "agy_not_found",
            )
        return AgyBinary(
            None,
            f"AGY_BIN={name!r} is not a program on PATH",
            "set AGY_BIN to the absolute path of the agy program",
            "agy_not_found",
        )
    path = Path(name).expanduser()
    shown = f"AGY_BIN={name}"
    if not path.exists():
        return AgyBinary(
            None,
            f"{shown} does not exist",
            "correct AGY_BIN (`command -v agy` in a terminal shows where agy is)",
            "agy_not_found",
        )
    if path.is_dir():
        inside = path / "agy"
        fix = (
            f"set AGY_BIN={inside}"
            if inside.is_file()
            else "set AGY_BIN to the agy program itself, not its folder"
        )
        return AgyBinary(
            None, f"{shown} is a directory, not the agy program", fix, "agy_is_directory"
        )
    if not os.access(path, os.X_OK):
        return AgyBinary(
            None,
            f"{shown} is not executable",
            f"chmod +x {path}",
            "agy_not_executable",
        )
    return AgyBinary(str(path.resolve()))


class AgyRuns:
    """Whether the configured agy runs at all (``agy --version``), asked before
    a bridge's first session: a broken install fails ``session/new`` in its own
    words instead of the first prompt failing with an exit code. A success is
    remembered for the bridge's life (the model discovery asks for the same
    version); a failure is asked again next time (the user may repair agy
    while a long-lived daemon runs)."""

    def __init__(self, name: str, *, from_env: bool) -> None:
        self._name = name
        self._from_env = from_env
        self._lock = trio.Lock()
        self._version: str | None = None

    def located(self) -> AgyBinary:
        """Where the configured agy is now (or what is wrong with it)."""
        return locate(self._name, from_env=self._from_env)

    async def version(self) -> str:
        """``agy --version``'s answer (run once while it succeeds).

        Raises:
            DiscoveryError: agy could not run, or failed; its message says why.
        Cancellation stops the check's agy with its whole tree.
        """
        from .discovery import DiscoveryError, run_subcommand  # noqa: PLC0415 - first session

        async with self._lock:
            if self._version is None:
                binary = self.located()
                if binary.path is None:
                    raise DiscoveryError(binary.message())
                self._version = (await run_subcommand(binary.path, "--version")).strip()
            return self._version

    async def failure(self) -> tuple[str, str] | None:
        """None when agy runs (or did not answer within
        :data:`VERSION_CHECK_TIMEOUT_S`: slow is no proof of broken); else a
        cause id and why it does not run and what to do, naming AGY_BIN or
        the path."""
        from .discovery import DiscoveryError  # noqa: PLC0415 - first session

        with trio.move_on_after(VERSION_CHECK_TIMEOUT_S):
            try:
                await self.version()
            except DiscoveryError as exc:
                binary = self.located()
                if binary.path is None:
                    return binary.cause or "agy_not_found", binary.message()
                where = f"AGY_BIN={self._name}" if self._from_env else binary.path
                return AGY_FAILS, (
                    f"agy ({where}) does not run: {exc}. Repair the agy installation or "
                    "set AGY_BIN to a working agy (`agybridge doctor` checks it)"
                )
        return None
