"""Why a cell could not run: agy's or the bridge's classified cause, never a guess.

The bridge already classifies agy's failures: a prompt error carries ``data``
(``stderrTail``, ``exitCode``; ``-32000`` is "not signed in") and a turn agy could not
run ends with ``_meta.agyError`` (``errorCode``, ``status``, ``retryable``,
``resetsIn``). We read those fields, and agy's stderr lines through the bridge's own
classifier (`agybridge.agy.stderr`), to name the cause and decide whether a retry can
help: rate limits, 5xx and a quota that resets soon are transient; a crash, auth or a
quota that resets in hours is not.
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


@attrs.frozen
class Cause:
    """An error a cell ran into: ``kind`` is what a CI engineer filters on."""

    #: auth, quota, rate_limit, unavailable, agy_error, crash, timeout, bridge_error,
    #: bridge_crash, bridge_start
    kind: str
    message: str
    transient: bool = False
    #: Seconds to wait before a retry can succeed (a quota's reset), if known.
    retry_after_s: float | None = None
    details: Mapping[str, Any] = attrs.Factory(dict)

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
    resets_s = go_duration_s(str(meta["resetsIn"])) if meta.get("resetsIn") else None
    retryable = meta.get("retryable") is not False
    if (isinstance(code, int) and code >= 500) or status == "UNAVAILABLE":
        return Cause("unavailable", message, retryable, None, meta)
    if code == 429 or status == "RESOURCE_EXHAUSTED" or resets_s is not None:
        if resets_s is None:
            return Cause("rate_limit", message, retryable, None, meta)
        soon = retryable and resets_s <= retry_max_wait_s
        return Cause("quota", message, soon, resets_s if soon else None, meta)
    return Cause("agy_error", message, False, None, meta)


def from_rpc_error(exc: RpcError, retry_max_wait_s: float) -> Cause:
    """A failed request: the bridge's JSON-RPC error, classified by its data."""
    data = exc.data if isinstance(exc.data, dict) else {}
    details = {"code": exc.code, "message": exc.message, "data": exc.data}
    if exc.code == ErrorCode.AUTH_REQUIRED:
        return Cause("auth", exc.message, details=details)
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
    return Cause("bridge_error", f"{exc.code}: {exc.message}", details=details)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)
