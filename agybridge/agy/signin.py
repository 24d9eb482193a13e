"""Is agy signed in? A cheap, real check (contract.md §4 "Auth").

``agy -p /hooks --output-format json`` is answered by agy itself without a
model turn (hooks-and-tools.md §A2), yet it needs the account: signed out it
fails with ``authentication failed or timed out`` (or the not-logged-in
line). Its stderr lines and the result's ``error`` go through the stderr
classifier, so the sign-in verdict uses the same texts as a failed turn. agy's
own log says "not logged into Antigravity" even on good runs, so only this
process's output counts (contract.md §4).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence

import attrs

from .stderr import StderrKind, classify_stderr
from .tree import run_owned

#: The probe's argv after the binary: no model turn, no tokens spent.
PROBE_ARGS = ("-p", "/hooks", "--output-format", "json")


class SignIn(enum.Enum):
    SIGNED_IN = "signed_in"
    SIGNED_OUT = "signed_out"
    #: agy failed for another reason (crash, network): sign-in not known.
    UNKNOWN = "unknown"


@attrs.frozen
class ProbeResult:
    state: SignIn
    #: The line that decided it (agy's words), or why it is unknown.
    detail: str


def classify_probe(returncode: int, stdout: str, stderr: str) -> ProbeResult:
    """The sign-in state a finished probe shows (pure)."""
    texts = [line for line in stderr.splitlines() if line.strip()]
    error = _result_error(stdout)
    if error:
        texts.append(error)
    for text in texts:
        if classify_stderr(text).kind is StderrKind.AUTH:
            return ProbeResult(SignIn.SIGNED_OUT, text.strip())
    if returncode == 0 and not error:
        return ProbeResult(SignIn.SIGNED_IN, "agy answered without asking to sign in")
    last = texts[-1].strip() if texts else f"exit code {returncode}"
    return ProbeResult(SignIn.UNKNOWN, f"agy -p /hooks failed: {last}")


@attrs.frozen
class ProbeRun:
    """A finished ``agy -p /hooks`` run: its stdout (the hooks listing) and
    what it says about sign-in."""

    returncode: int
    stdout: bytes
    sign_in: ProbeResult
    #: False when agy could not be started at all (then ``sign_in`` says why).
    spawned: bool = True


async def run_probe(
    agy_bin: str, extra_args: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> ProbeRun:
    """Run ``agy -p /hooks --output-format json [extra_args]`` (stdin closed,
    own process group) and classify it.

    Never raises for agy failures (a spawn failure is ``spawned=False``).
    Owned like every agy invocation (``tree.run_owned``): cancellation stops
    its whole tree; the caller bounds it with a deadline.
    """
    try:
        done = await run_owned([agy_bin, *PROBE_ARGS, *extra_args], label="agy -p /hooks", env=env)
    except OSError as exc:
        failure = ProbeResult(SignIn.UNKNOWN, f"could not run {agy_bin!r}: {exc}")
        return ProbeRun(-1, b"", failure, spawned=False)
    sign_in = classify_probe(
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )
    return ProbeRun(done.returncode, done.stdout, sign_in)


async def probe_sign_in(agy_bin: str, env: Mapping[str, str] | None = None) -> ProbeResult:
    """Is agy signed in? (see :func:`run_probe`)."""
    return (await run_probe(agy_bin, env=env)).sign_in


def _result_error(stdout: str) -> str | None:
    """``error`` of the json envelope (``{"result": {...}}`` or flat)."""
    lines = stdout.strip().splitlines()
    try:
        envelope = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    if isinstance(envelope, dict) and isinstance(envelope.get("result"), dict):
        envelope = envelope["result"]
    if isinstance(envelope, dict) and envelope.get("status") == "ERROR":
        error = envelope.get("error")
        return str(error) if error else "agy reported an error"
    return None
