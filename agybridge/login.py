"""``agybridge login``: agy's interactive sign-in, exit 0 once signed in.

The ACP ``terminal`` auth method runs this in the editor's terminal
(auth.py). If agy is already signed in it says so and exits 0; otherwise
it starts agy's own interactive session in this terminal (agy asks to sign
in on start), and when agy exits checks again.
"""

from __future__ import annotations

import subprocess
import sys

import trio

from .agent.auth import PROBE_TIMEOUT_S
from .agy import SignIn, probe_sign_in
from .config import Settings
from .doctor.checks import agy_binary


def run_login(settings: Settings) -> int:
    """Returns the exit status: 0 signed in, 1 not."""
    check, agy = agy_binary(settings)
    if agy is None:
        print(f"agybridge login: {check.summary}\n  fix: {check.fix}", file=sys.stderr)
        return 1
    state = _probe(agy)
    if state is SignIn.SIGNED_IN:
        print("agy is signed in.")
        return 0
    if not sys.stdin.isatty():
        print(
            "agybridge login: agy is not signed in, and signing in needs a terminal: run "
            "`agybridge login` (or `agy`) in one",
            file=sys.stderr,
        )
        return 1
    print("Starting agy to sign in: follow its instructions, then quit agy (/quit or Ctrl+C).")
    # agy's own TUI owns the terminal until it exits.
    subprocess.run([agy], check=False)
    if _probe(agy) is SignIn.SIGNED_IN:
        print("Signed in: go back to your editor.")
        return 0
    print("agybridge login: agy is still not signed in", file=sys.stderr)
    return 1


def _probe(agy: str) -> SignIn:
    async def probe() -> SignIn:
        with trio.move_on_after(PROBE_TIMEOUT_S):
            return (await probe_sign_in(agy)).state
        return SignIn.UNKNOWN

    return trio.run(probe)
