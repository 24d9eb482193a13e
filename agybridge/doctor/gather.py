"""``agybridge doctor``: learn every fact by running agy, then build the checks.

agy runs with stdin closed, in its own process group, each run bounded by
:data:`PROBE_TIMEOUT_S` (a remote fetch takes 6-8 s when healthy,
contract.md §6). Sign-in is checked first: a signed-out agy fails every
other agy check for the same reason, so those are skipped, not counted.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import trio

from ..agy import ProbeResult, SignIn, probe_sign_in
from ..agy.discovery import DiscoveryError, discover_agents, discover_models, run_subcommand
from ..config import Settings
from ..permissions import HookRoot, HookRootError, child_env
from ..session.hooks_check import check_hooks_loaded
from ..store import Store, StoreBadFileError, StoreError
from . import checks
from .checks import Check, Status

PROBE_TIMEOUT_S = 60.0
T = TypeVar("T")


async def run_checks(settings: Settings) -> list[Check]:
    """Every check, in display order.

    Cancellation stops any agy still running, with its whole tree (``run_owned``).
    """
    binary, agy = checks.agy_binary(settings)
    local = await trio.to_thread.run_sync(functools.partial(local_checks, settings))
    if agy is None:
        reason = "agy was not found"
        names = ("version", "signed in", "permission gate", "models and agents")
        return [binary, *(checks.skipped(name, reason) for name in names), *local]
    found: dict[str, Check] = {}

    async def version() -> None:
        try:
            text, error = await _bounded(run_subcommand(agy, "--version"))
        except DiscoveryError as exc:
            text, error = None, str(exc)
        found["version"] = checks.version((text or "").strip(), error)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(version)
        signed = await _bounded(probe_sign_in(agy))
    result = signed[0] or ProbeResult(SignIn.UNKNOWN, signed[1] or "no answer")
    found["signed in"] = checks.sign_in(result)
    if result.state is not SignIn.SIGNED_IN:
        reason = "agy is not signed in" if result.state is SignIn.SIGNED_OUT else "see above"
        found["permission gate"] = checks.skipped("permission gate", reason)
        found["models and agents"] = checks.skipped("models and agents", reason)
    else:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_gate_into, found, agy)
            nursery.start_soon(_discovery_into, found, agy)
    order = ("version", "signed in", "permission gate", "models and agents")
    return [binary, *(found[name] for name in order), *local]


def local_checks(settings: Settings) -> list[Check]:
    """Checks that need no agy (blocking file system calls: run in a thread)."""
    return [
        _database(settings.db_path),
        checks.private_dir("staging dir", settings.staging_dir),
        _runtime_dir(),
        checks.log_file(settings.log_file),
        checks.operating_system(),
    ]


async def _bounded(work: Awaitable[T]) -> tuple[T | None, str | None]:
    with trio.move_on_after(PROBE_TIMEOUT_S):
        return await work, None
    return None, f"no answer within {PROBE_TIMEOUT_S:.0f} s"


async def _gate_into(found: dict[str, Check], agy: str) -> None:
    try:
        root = await trio.to_thread.run_sync(HookRoot.create)
    except HookRootError as exc:
        found["permission gate"] = checks.gate(f"no private runtime directory: {exc}")
        return
    try:
        check, error = await _bounded(check_hooks_loaded(agy, root, child_env(root, None)))
    finally:
        root.remove()
    found["permission gate"] = checks.gate(check.failure if check else error)


async def _discovery_into(found: dict[str, Check], agy: str) -> None:
    async def listing() -> tuple[list[str], list[str]]:
        models = await discover_models(agy)
        return [m.slug for m in models], await discover_agents(agy)

    try:
        lists, error = await _bounded(listing())
    except DiscoveryError as exc:
        lists, error = None, str(exc)
    models, agents = lists or ([], [])
    found["models and agents"] = checks.discovery(models, agents, error)


def _database(path: Path | None) -> Check:
    if path is None:
        return Check("session database", Status.OK, "in memory (nothing is kept)")
    if not path.exists():
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            return checks.database(path, None, f"cannot be created: {parent} is not a directory")
        if not os.access(parent, os.W_OK):
            return checks.database(path, None, f"cannot be created: {parent} is not writable")
        return checks.database(path, None, None)
    if not os.access(path, os.W_OK):
        return checks.database(path, None, "not writable")
    try:
        stats = Store.inspect(path)  # a look only: a bad file is reported, not moved
    except StoreBadFileError as exc:
        return checks.database(path, None, exc.reason, bad_file=True)
    except StoreError as exc:
        return checks.database(path, None, str(exc))
    return checks.database(path, stats, None)


def _runtime_dir() -> Check:
    try:
        root = HookRoot.create()
    except (HookRootError, OSError) as exc:
        return Check("runtime dir", Status.FAIL, f"no private runtime directory: {exc}",
                     "set TMPDIR (or XDG_RUNTIME_DIR) to a short private path")  # fmt: skip
    base = os.path.dirname(root.runtime_dir)
    root.remove()
    return Check("runtime dir", Status.OK, f"private 0700 directories under {base}")
