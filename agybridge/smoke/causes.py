"""Why a cell could not run or a turn did not end normally: one table of cause ids.

`CAUSES` is the runner's only list of cause ids; whether a retry can help
(``transient``) is read from it, never decided elsewhere. When the bridge's error
catalogue lands, this table is what gets replaced.

The bridge classifies agy's failures and the runner reads what it puts on the wire:

* a prompt error's ``data``: ``stderrTail``, ``exitCode`` (agy exited), ``reason``
  (``stall`` / ``startup``: agy printed nothing for too long), ``availableModels``
  (a model agy does not know), ``details`` (the text of a pre-turn failure); ``-32000``
  is "not signed in", ``-32602`` a setting the bridge or agy refused;
* ``_meta.agyError`` of a prompt response (``errorCode``, ``status``, ``retryable``,
  ``resetsIn``);
* the notices the bridge writes into the reply (`NOTICES`): today the only sign of
  agy's print timeout and of an agy error that has no ``AGY_ERROR`` line;
* ``stopReason: cancelled`` that the runner did not ask for: agy was interrupted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from ..agy.stderr import StderrKind, classify_stderr
from ..jsonrpc import ErrorCode, RpcError

# Go durations as agy prints them ("100h23m59s", "42s", "1.5m").
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
# "UNAVAILABLE (code 503)" in the text of a failure before the turn started.
_STATUS_CODE = re.compile(r"\b([A-Z_]{5,}) \(code (\d{3})\)")


@attrs.frozen
class CauseKind:
    transient: bool
    meaning: str


#: Every cause id a report can carry (JUnit ``<error type>``, JSON ``error.cause``).
CAUSES: dict[str, CauseKind] = {
    "auth": CauseKind(False, "agy is not signed in"),
    "quota": CauseKind(True, "agy's quota is used up and resets within run.retry_max_wait_s"),
    "quota_exhausted": CauseKind(False, "agy's quota is used up and resets later than that"),
    "rate_limit": CauseKind(True, "agy was rate limited (429 / RESOURCE_EXHAUSTED)"),
    "unavailable": CauseKind(True, "agy's service answered 5xx / UNAVAILABLE"),
    "agy_error": CauseKind(False, "agy ended the turn with an error"),
    "print_timeout": CauseKind(False, "agy's print timeout cut the turn short"),
    "stall": CauseKind(False, "agy printed nothing for longer than the bridge's stall timeout"),
    "agy_start_timeout": CauseKind(True, "agy did not start within the bridge's limit"),
    "interrupted": CauseKind(False, "agy ended the turn cancelled though nobody cancelled it"),
    "crash": CauseKind(False, "agy exited mid-turn"),
    "invalid_setting": CauseKind(False, "a model, mode or effort the bridge or agy refused"),
    "agy_unusable": CauseKind(False, "AGY_BIN is not an executable agy"),
    "timeout": CauseKind(False, "the cell ran past run.timeout_s"),
    "bridge_error": CauseKind(False, "the bridge answered with an error it did not classify"),
    "bridge_crash": CauseKind(False, "the bridge closed the connection"),
    "bridge_start": CauseKind(False, "the bridge could not be started or did not initialize"),
    "leftovers": CauseKind(False, "processes outlived the bridge (they were killed)"),
}

#: Texts the bridge writes into the reply, and the cause each one means (first match).
#: ``agybridge.translate.notices.PRINT_TIMEOUT_MESSAGE`` and the mapper's "agy error:"
#: notice; the runner may not import the session, so the words are repeated here.
NOTICES: tuple[tuple[str, str], ...] = (
    ("agy's print timeout cut this turn short", "print_timeout"),
    ("⚠️ agy error: print timeout", "print_timeout"),
    ("⚠️ agy error: ", "agy_error"),
)


#: The bridge's ``data.cause`` of a session/new that failed because agy cannot be
#: used (agy/binary.py): unset or missing, a folder, not executable, failing at once.
AGY_UNUSABLE = frozenset({"agy_not_found", "agy_is_directory", "agy_not_executable", "agy_fails"})

#: Lines of the bridge's stderr that name the cause of an error it did not classify on
#: the wire (today an agy that cannot be executed reaches the client as -32603
#: "Internal error"; the bridge's log has the AgyStartError).
BRIDGE_STDERR: tuple[tuple[str, str], ...] = (("AgyStartError: ", "agy_unusable"),)


@attrs.frozen
class Cause:
    """An error a cell ran into: ``kind`` (a `CAUSES` id) is what a CI engineer filters on."""

    kind: str = attrs.field(validator=attrs.validators.in_(CAUSES))
    message: str
    #: Seconds to wait before a retry can succeed (a quota's reset), if known.
    retry_after_s: float | None = None
    details: Mapping[str, Any] = attrs.Factory(dict)
    #: agy said a retry will not help (``retryable: false``), whatever the kind.
    final: bool = False

    @property
    def transient(self) -> bool:
        return CAUSES[self.kind].transient and not self.final

    def to_json(self) -> dict[str, Any]:
        return {
            "cause": self.kind,
            "message": self.message,
            "transient": self.transient,
            "retry_after_s": self.retry_after_s,
            "details": dict(self.details),
        }


def go_duration_s(text: str) -> float | None:
    """Seconds in a Go duration string, or None if it is not one."""
    parts = _DURATION.findall(text)
    if not parts or "".join(v + u for v, u in parts) != text.strip():
        return None
    return sum(float(value) * _UNIT_S[unit] for value, unit in parts)


def from_agy_error(meta: Mapping[str, Any], retry_max_wait_s: float) -> Cause:
    """A turn agy could not run (``_meta.agyError`` of the prompt response)."""
    code = meta.get("errorCode")
    status = str(meta.get("status") or "")
    message = str(meta.get("error") or meta.get("shortError") or "agy could not run the turn")
    said = _STATUS_CODE.search(message)
    if code is None and not status and said is not None:
        # agy's words only (no AGY_ERROR line was read before the answer): a
        # 5xx is `unavailable` wherever it happens, a 429 a rate limit.
        status, code = said.group(1), int(said.group(2))
    resets_s = go_duration_s(str(meta["resetsIn"])) if meta.get("resetsIn") else None
    final = meta.get("retryable") is False
    if (isinstance(code, int) and code >= 500) or status == "UNAVAILABLE":
        return Cause("unavailable", message, None, meta, final)
    if code == 429 or status == "RESOURCE_EXHAUSTED" or resets_s is not None:
        if resets_s is None:
            return Cause("rate_limit", message, None, meta, final)
        if resets_s <= retry_max_wait_s:
            return Cause("quota", message, resets_s, meta, final)
        return Cause("quota_exhausted", message, None, meta, final)
    return Cause("agy_error", message, None, meta, final)


def from_rpc_error(exc: RpcError, retry_max_wait_s: float) -> Cause:
    """A failed request: the bridge's JSON-RPC error, classified by its data."""
    data = exc.data if isinstance(exc.data, dict) else {}
    details = {"code": exc.code, "message": exc.message, "data": exc.data}
    if exc.code == ErrorCode.AUTH_REQUIRED:
        return Cause("auth", exc.message, details=details)
    if exc.code == ErrorCode.INVALID_PARAMS:
        return Cause("invalid_setting", exc.message, details=details)
    if data.get("cause") in AGY_UNUSABLE:
        return Cause("agy_unusable", exc.message, details=details)
    if data.get("reason") == "stall":
        return Cause("stall", exc.message, details=details)
    if data.get("reason") == "startup":
        return Cause("agy_start_timeout", exc.message, details=details)
    tail = data.get("stderrTail")
    if isinstance(tail, list):
        lines = [classify_stderr(str(line)) for line in tail]
        for line in lines:
            if line.kind is StderrKind.AGY_ERROR and line.details is not None:
                meta = {_camel(k): v for k, v in line.details.items()}
                meta.setdefault("error", exc.message)
                found = from_agy_error(meta, retry_max_wait_s)
                return attrs.evolve(found, details={**details, "agyError": line.details})
        if any(line.kind is StderrKind.AUTH for line in lines):
            return Cause("auth", exc.message, details=details)
        return Cause("crash", exc.message, details=details)
    if "exitCode" in data:
        return Cause("crash", exc.message, details=details)
    # A failure before the turn started names agy's status only in its text.
    status = _STATUS_CODE.search(str(data.get("details") or exc.message))
    if status is not None:
        meta = {"error": exc.message, "status": status.group(1), "errorCode": int(status[2])}
        return attrs.evolve(from_agy_error(meta, retry_max_wait_s), details=details)
    return Cause("bridge_error", f"{exc.code}: {exc.message}", details=details)


def from_notices(text: str) -> Cause | None:
    """The cause a bridge notice in a turn's reply names (`NOTICES`), if any."""
    for marker, kind in NOTICES:
        at = text.find(marker)
        if at >= 0:
            line = text[at:].split("\n", 1)[0].removeprefix("⚠️ ").strip()
            return Cause(kind, f"the bridge reported: {line}", details={"notice": line})
    return None


def from_bridge_stderr(cause: Cause, lines: list[str]) -> Cause:
    """``cause`` (a ``bridge_error``) made precise by the bridge's stderr, if it says more."""
    if cause.kind != "bridge_error":
        return cause
    for line in reversed(lines):
        for marker, kind in BRIDGE_STDERR:
            at = line.find(marker)
            if at >= 0:
                said = line[at + len(marker) :].strip()
                return Cause(kind, said, details={**cause.details, "bridge_stderr": line.strip()})
    return cause


def interrupted() -> Cause:
    return Cause(
        "interrupted",
        "the turn ended `cancelled` though the runner did not cancel it (agy was interrupted)",
    )


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
