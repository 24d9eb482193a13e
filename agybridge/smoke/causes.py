"""Why a cell could not run or a turn did not end normally: the bridge's catalogue ids.

The runner's causes *are* the bridge's catalogue (`agybridge.causes`): what
agybridge puts in ``_meta.agybridge.cause`` (an error's ``data._meta``, a prompt
response's ``_meta``) is taken as it is, and whether a retry can help
(``transient``) is the catalogue row's. The runner adds only what it sees
itself (`RUNNER_CAUSES`: its own timeout, a bridge that died, would not start,
left processes behind, or answered an error that names no cause).

A bridge that names no cause (another ACP agent, an older agybridge) is
classified from what it does say, with the same catalogue ids:

* a prompt error's ``data``: ``stderrTail``, ``exitCode``, ``reason`` (``stall`` /
  ``startup``), ``availableModels``, ``details``; ``-32000`` is "not signed in",
  ``-32602`` a setting refused;
* ``_meta.agyError`` of a prompt response (``errorCode``, ``status``, ``retryable``,
  ``resetsIn``), classified by the catalogue's own `classify_agy_failure`;
* the notices in the reply (`NOTICES`);
* ``stopReason: cancelled`` that the runner did not ask for: agy was interrupted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from .. import causes as catalogue
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


#: What only the runner sees (never a bridge's cause).
RUNNER_CAUSES: dict[str, CauseKind] = {
    "timeout": CauseKind(False, "the cell ran past run.timeout_s"),
    "bridge_error": CauseKind(False, "the bridge answered an error that names no cause"),
    "bridge_crash": CauseKind(False, "the bridge closed the connection"),
    "bridge_start": CauseKind(False, "the bridge could not be started or did not initialize"),
    "leftovers": CauseKind(False, "processes outlived the bridge (they were killed)"),
}

#: Every cause id a report can carry (JUnit ``<error type>``, JSON ``error.cause``):
#: the catalogue's rows, then the runner's own.
CAUSES: dict[str, CauseKind] = {
    **{row.id: CauseKind(row.transient, row.when) for row in catalogue.CAUSES.values()},
    **RUNNER_CAUSES,
}

#: Texts a bridge writes into the reply, and the cause each one means (first match),
#: for a reply whose response names no cause. The words of agybridge's notices.
NOTICES: tuple[tuple[str, str], ...] = (
    ("agy's print timeout cut this turn short", "print_timeout"),
    ("⚠️ agy error: print timeout", "print_timeout"),
    ("⚠️ agy error: ", "agy_error"),
)

#: Causes that mean agy cannot be used at all (``--require-agy`` exits 3 on them).
AGY_UNUSABLE = frozenset(
    {"agy_not_found", "agy_is_directory", "agy_not_executable", "agy_fails", "agy_too_old",
     "agy_garbage"}
)  # fmt: skip


@attrs.frozen
class Cause:
    """An error a cell ran into: ``kind`` (a `CAUSES` id) is what a CI engineer filters on."""

    kind: str = attrs.field(validator=attrs.validators.in_(tuple(CAUSES)))
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
    message = str(meta.get("error") or meta.get("shortError") or "agy could not run the turn")
    details = {"error_code": meta.get("errorCode"), "status": meta.get("status")}
    if meta.get("resetsIn"):
        details["resets_in"] = meta["resetsIn"]
    kind = catalogue.classify_agy_failure(message, details)
    return _cause(kind, message, meta, retry_max_wait_s)


def _cause(kind: str, message: str, meta: Mapping[str, Any], retry_max_wait_s: float) -> Cause:
    """A `Cause` of ``kind``: a quota is worth waiting for only when it resets
    within ``retry_max_wait_s``; agy's ``retryable: false`` is final."""
    final = meta.get("retryable") is False
    resets = meta.get("resetsIn")
    resets_s = go_duration_s(str(resets)) if resets else None
    if kind == "quota":
        if resets_s is None or resets_s > retry_max_wait_s:
            return Cause(kind, message, None, meta, final=True)
        return Cause(kind, message, resets_s, meta, final)
    return Cause(kind, message, None, meta, final)


def from_rpc_error(exc: RpcError, retry_max_wait_s: float) -> Cause:
    """A failed request: the bridge's JSON-RPC error, by the cause it names
    (``data._meta.agybridge.cause``), else classified by its data."""
    data = exc.data if isinstance(exc.data, dict) else {}
    details = {"code": exc.code, "message": exc.message, "data": exc.data}
    named = catalogue.cause_of(data)
    if named is not None:
        fields = data["_meta"]["agybridge"]
        return attrs.evolve(_cause(named, exc.message, fields, retry_max_wait_s), details=details)
    if exc.code == ErrorCode.AUTH_REQUIRED:
        return Cause("not_signed_in", exc.message, details=details)
    if exc.code == ErrorCode.INVALID_PARAMS:
        kind = "invalid_model" if "availableModels" in data else "invalid_setting"
        return Cause(kind, exc.message, details=details)
    if data.get("reason") == "stall":
        return Cause("stall_timeout", exc.message, details=details)
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
            return Cause("not_signed_in", exc.message, details=details)
        return Cause("agy_crashed", exc.message, details=details)
    if "exitCode" in data:
        return Cause("agy_crashed", exc.message, details=details)
    # A failure before the turn started names agy's status only in its text.
    status = _STATUS_CODE.search(str(data.get("details") or exc.message))
    if status is not None:
        meta = {"error": exc.message, "status": status.group(1), "errorCode": int(status[2])}
        return attrs.evolve(from_agy_error(meta, retry_max_wait_s), details=details)
    return Cause("bridge_error", f"{exc.code}: {exc.message}", details=details)


def from_response_meta(meta: Mapping[str, Any], retry_max_wait_s: float) -> Cause | None:
    """The cause a prompt response's ``_meta.agybridge`` names (a turn that did
    not end well: print timeout, interrupted, quota...), if any."""
    named = catalogue.cause_of(meta)
    if named is None:
        return None
    fields = meta["agybridge"]
    message = catalogue.cause(named).when
    found = _cause(named, f"the bridge reported: {message}", fields, retry_max_wait_s)
    return attrs.evolve(found, details=dict(fields))


def from_notices(text: str) -> Cause | None:
    """The cause a bridge notice in a turn's reply names (`NOTICES`), if any."""
    for marker, kind in NOTICES:
        at = text.find(marker)
        if at >= 0:
            line = text[at:].split("\n", 1)[0].removeprefix("⚠️ ").strip()
            return Cause(kind, f"the bridge reported: {line}", details={"notice": line})
    return None


def interrupted() -> Cause:
    return Cause(
        "interrupted",
        "the turn ended `cancelled` though the runner did not cancel it (agy was interrupted)",
    )


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
