"""``/doctor`` in a session: the same checks, from what the running bridge knows.

Nothing here runs agy: discovery, the gate check and sign-in are reported as
the bridge last saw them, and as "checking…" while they are still running.
Only cheap ``stat`` calls touch the disk (the database is in use; its
statistics come from ``agybridge doctor``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..agent.auth import SignInState
from ..agy import ProbeResult, SignIn
from ..config import Settings
from ..host.catalog import CatalogService
from ..session.gate import Gate
from . import checks
from .checks import Check, Status


def live_checks(
    settings: Settings,
    catalog: CatalogService,
    sign_in: SignInState,
    gates: Sequence[Gate | None],
) -> list[Check]:
    binary, agy = checks.agy_binary(settings)
    discovering = not catalog.refreshed.is_set()
    if agy is None:
        agy_checks = [
            checks.skipped(name, "agy was not found")
            for name in ("version", "signed in", "permission gate", "models and agents")
        ]
    else:
        agy_checks = [
            _version(catalog),
            checks.sign_in(sign_in.last or _sign_in_from_gates(gates)),
            _gate(gates),
            checks.discovery(
                [m.slug for m in catalog.catalog.models],
                list(catalog.catalog.agents),
                catalog.error,
                pending=discovering,
            ),
        ]
    path = settings.db_path
    database = (
        Check("session database", Status.OK, "in memory (nothing is kept)")
        if path is None
        else Check("session database", Status.OK, f"{path} (in use by this bridge)")
    )
    return [
        binary,
        *agy_checks,
        database,
        checks.private_dir("staging dir", settings.staging_dir),
        checks.log_file(settings.log_file),
        checks.operating_system(),
    ]


def _version(catalog: CatalogService) -> Check:
    if not catalog.refreshed.is_set():
        return checks.version(None)
    if catalog.catalog.agy_version:
        return checks.version(catalog.catalog.agy_version)
    return checks.skipped("version", "discovery failed (see models and agents)")


def _sign_in_from_gates(gates: Sequence[Gate | None]) -> ProbeResult | None:
    """A gate's ``agy -p /hooks`` check also shows sign-in (gate.py)."""
    ready = [g for g in gates if g is not None and g.ready.is_set()]
    if any(g.signed_out for g in ready):
        return ProbeResult(SignIn.SIGNED_OUT, "agy -p /hooks asked to sign in")
    if any(g.verified for g in ready):
        return ProbeResult(SignIn.SIGNED_IN, "agy -p /hooks answered")
    return None


def _gate(gates: Sequence[Gate | None]) -> Check:
    known = [g for g in gates if g is not None]
    if not known:
        return Check(
            "permission gate", Status.PENDING, "not checked yet (checked when a session starts)"
        )
    if any(not g.ready.is_set() for g in known):
        return checks.gate(None, pending=True)
    failed = next((g.failure for g in known if g.failure is not None), None)
    return checks.gate(failed)
