"""agy-acp-map compatibility: its ``session/new`` launch shapes and its
``initialize`` ``bridgeCapabilities`` (README "Launch flags", "initialize →
bridgeCapabilities" of yitom486/agy-acp-map, read for the shapes only).

agy-acp-map takes a launch setting as a top-level ``session/new`` field, in
``_meta``, in ``config`` or as ``configOptions: [{id|configId, value}]``, plus
``skipPermissions: true`` (= safety ``autonomous`` when no safety is given).
They are merged into one ``_meta``-style mapping, most specific first:
top-level fields, then ``_meta``, then ``config``, then ``configOptions``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..jsonrpc import ErrorCode, RpcError
from ..session.config import META_KEYS


def _bad(path: str, what: str) -> RpcError:
    return RpcError(ErrorCode.INVALID_PARAMS, f"Invalid params: {path} {what}", {"path": path})


def launch_meta(params: Any) -> dict[str, Any]:
    """Every launch key a ``session/new`` carries, in ``META_KEYS`` names.

    Raises:
        RpcError: ``config`` is not an object, or ``configOptions`` not a
            list of ``{id|configId, value}`` objects (-32602).
    """
    return launch_sources(params)[0]


def launch_sources(params: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """:func:`launch_meta`, and the JSON path each value was sent at."""
    if not isinstance(params, dict):
        return {}, {}
    merged: dict[str, tuple[Any, str]] = {}
    options = params.get("configOptions")
    if options is not None:
        if not isinstance(options, list):
            raise _bad("$.configOptions", "must be an array of {id, value} objects")
        for index, option in enumerate(options):
            name = option.get("id", option.get("configId")) if isinstance(option, dict) else None
            if not isinstance(name, str) or "value" not in option:
                raise _bad(f"$.configOptions[{index}]", "must be an object with id and value")
            merged[name] = (option["value"], f"$.configOptions[{index}].value")
    config = params.get("config")
    if config is not None:
        if not isinstance(config, dict):
            raise _bad("$.config", "must be an object")
        merged.update({k: (v, f"$.config.{k}") for k, v in config.items()})
    meta = params.get("_meta")
    if isinstance(meta, dict):
        merged.update({k: (v, f"$._meta.{k}") for k, v in meta.items()})
    merged.update(
        {k: (params[k], f"$.{k}") for k in (*META_KEYS, "skipPermissions") if k in params}
    )
    skip, skip_path = merged.pop("skipPermissions", (None, "$.skipPermissions"))
    if skip is not None and not isinstance(skip, bool):
        raise _bad(skip_path, "must be true or false")
    if skip and "safety" not in merged:
        merged["safety"] = ("autonomous", skip_path)
    chosen = {k: source for k, source in merged.items() if k in META_KEYS}
    return {k: value for k, (value, _) in chosen.items()}, {k: p for k, (_, p) in chosen.items()}


def conversation_id(params: Any) -> str | None:
    """agy-acp-map's ``conversationId`` (top level or ``_meta``): continue that
    agy conversation."""
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    value = params.get("conversationId")
    path = "$.conversationId"
    if value is None and isinstance(meta, dict):
        value, path = meta.get("conversationId"), "$._meta.conversationId"
    if value is None:
        return None
    # Trimmed first: it goes to agy's argv on its own, where "-" starts a flag.
    text = value.strip() if isinstance(value, str) else ""
    if not text or text.startswith("-"):
        raise _bad(
            path, "must be an agy conversation id (a non-empty string not starting with '-')"
        )
    return text


def bridge_capabilities(models: Sequence[str], agents: Sequence[str]) -> dict[str, Any]:
    """agy-acp-map's capability names, where agybridge means the same thing;
    ``models`` (slugs) and ``agents``: what agy offers, as far as known."""
    return {
        "prompt": True,
        "streaming": True,
        "tools": True,
        "resume": True,
        "permissionRoundTrip": True,  # the hook gate asks session/request_permission
        "safetyTiers": ["safe", "autonomous", "autonomous-unsandboxed"],
        "nativeCancel": False,
        "historyReplay": True,
        "dynamicConfig": "restart",
        "richContentInput": "degrade_to_files",
        "richContentOutput": "best_effort",
        "clientFilesystem": False,
        "clientTerminal": False,
        "availableModels": list(models),
        "availableAgents": list(agents),
    }


#: The ACP methods whose ``sessionId`` an older agy-acp-map client may spell
#: ``session_id`` (issue 30): the standard ones that name a session.
LEGACY_SESSION_ID_METHODS = frozenset(
    {
        "session/prompt",
        "session/cancel",
        "session/load",
        "session/resume",
        "session/close",
        "session/delete",
        "session/set_config_option",
        "session/set_mode",
    }
)


def legacy_session_id(method: str, params: Any) -> Any:
    """``params`` with a legacy ``session_id`` read as ``sessionId`` when that
    is absent (the same id twice: the spare one dropped).

    Raises:
        RpcError: both are sent and name different sessions (-32602).
    """
    if (
        method not in LEGACY_SESSION_ID_METHODS
        or not isinstance(params, dict)
        or "session_id" not in params
    ):
        return params
    legacy = params["session_id"]
    rest = {k: v for k, v in params.items() if k != "session_id"}
    if "sessionId" not in params:
        return {"sessionId": legacy, **rest}
    if params["sessionId"] != legacy:
        raise _bad(
            "$.session_id",
            f"is {legacy!r} but sessionId is {params['sessionId']!r}: send sessionId "
            "only (session_id is its legacy spelling)",
        )
    return rest
