"""Request parameters: parsed once, checked completely, errors that name the field."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from .. import causes
from ..acp import codec, models
from ..acp.text_check import find_bad_text
from ..jsonrpc import ErrorCode, RpcError
from ..session import SessionError
from ..session.config import ConfigValueError, LaunchSettings, settings_from_meta

T = TypeVar("T")


def session_rpc_error(exc: SessionError) -> RpcError:
    """A session failure as the JSON-RPC error that answers it, in one place:
    the code is its cause's (the catalogue, `agybridge.causes`), ``data``
    carries ``_meta.agybridge.cause`` and the cause's fields, and ``details``
    (what Zed shows) the message."""
    row = causes.cause(exc.cause)
    code = row.code if row.code is not None else ErrorCode.INTERNAL_ERROR
    return RpcError(code, exc.message, {"details": exc.message, **exc.data, "_meta": exc.meta()})


#: The cause of an error raised without one, by its code (the client's
#: mistakes; -32603 is a bug by definition).
_CAUSE_BY_CODE = {
    ErrorCode.INVALID_PARAMS: "invalid_params",
    ErrorCode.INVALID_REQUEST: "invalid_request",
    ErrorCode.METHOD_NOT_FOUND: "unknown_method",
    ErrorCode.RESOURCE_NOT_FOUND: "unknown_session",
    ErrorCode.REQUEST_CANCELLED: "cancelled",
    ErrorCode.AUTH_REQUIRED: "not_signed_in",
    ErrorCode.INTERNAL_ERROR: "bridge_bug",
}


def name_cause(exc: RpcError) -> None:
    """Give an error answer that names no cause the one its code means, in
    ``data._meta.agybridge.cause`` (``data`` that is not an object is kept
    as it is: a client may read it)."""
    if causes.cause_of(exc.data) is not None or exc.code not in _CAUSE_BY_CODE:
        return
    if exc.data is None or isinstance(exc.data, dict):
        found = causes.meta(_CAUSE_BY_CODE[ErrorCode(exc.code)])
        exc.data = {**(exc.data or {}), "_meta": {**(exc.data or {}).get("_meta", {}), **found}}


@contextmanager
def translate_session_errors() -> Iterator[None]:
    """Session failures -> JSON-RPC errors (`session_rpc_error`)."""
    try:
        yield
    except SessionError as exc:
        raise session_rpc_error(exc) from None


def check_text(params: Any) -> None:
    """-32602 for a string nothing downstream could use (see ``text_check``)."""
    problem = find_bad_text(params)
    if problem is not None:
        path, what = problem
        raise RpcError(ErrorCode.INVALID_PARAMS, f"Invalid params: {path} {what}", {"path": path})


def parse(params: Any, cls: type[T]) -> T:
    try:
        return codec.structure(params if params is not None else {}, cls)
    except Exception as exc:
        problems = codec.describe_error(exc)
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"Invalid params: {problems[0]}" if problems else "Invalid params",
            {"problems": problems},
        ) from None


def object_params(params: Any) -> dict[str, Any]:
    """An extension's params: an object (absent: empty); each field is checked
    by the method that reads it (`int_param`, `bool_param`, `str_param`)."""
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise RpcError(ErrorCode.INVALID_PARAMS, "Invalid params: params must be an object")
    return params


def int_param(params: dict[str, Any], name: str, *, required: bool = False) -> int | None:
    """A non-negative integer parameter (-32602 naming it otherwise)."""
    value = params.get(name)
    if value is None:
        if required:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"Invalid params: {name} is required",
                {"path": f"$.{name}"},
            )
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"Invalid params: {name} must be an integer >= 0, not {value!r}",
            {"path": f"$.{name}"},
        )
    return value


def ranged_int_param(params: dict[str, Any], name: str, low: int, high: int) -> int | None:
    """An optional integer from ``low`` to ``high`` (-32602 naming it otherwise)."""
    value = int_param(params, name)
    if value is not None and not low <= value <= high:
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"Invalid params: {name} must be {low} to {high}, not {value}",
            {"path": f"$.{name}"},
        )
    return value


def bool_param(params: dict[str, Any], name: str) -> bool:
    value = params.get(name, False)
    if not isinstance(value, bool):
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"Invalid params: {name} must be true or false, not {value!r}",
            {"path": f"$.{name}"},
        )
    return value


def str_param(params: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = params.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"Invalid params: {name} must be a non-empty string",
            {"path": f"$.{name}"},
        )
    return value


def session_params(params: Any, *, null_lists: bool = True) -> Any:
    """Session request params with a ``null`` ``mcpServers`` or
    ``additionalDirectories`` as ``[]`` (unless ``null_lists`` is False:
    session/list's filter, where null is no filter) and a ``_meta`` that is not
    an object left out (the schema's x-deserialize-default-on-error; the TS
    SDK's defaultOnNull and defaultOnError): not -32602."""
    if not isinstance(params, dict):
        return params
    fixed = dict(params)
    for key in ("mcpServers", "additionalDirectories") if null_lists else ():
        if key in fixed and fixed[key] is None:
            fixed[key] = []
    if "_meta" in fixed and not isinstance(fixed["_meta"], dict):
        del fixed["_meta"]
    return fixed


#: The schema's ``ProtocolVersion``: an unsigned 16-bit integer.
MAX_PROTOCOL_VERSION = 65535


def initialize_request(params: Any) -> models.InitializeRequest:
    """``initialize``'s params: -32602 for a ``protocolVersion`` the schema
    refuses (as the TS SDK's router answers). ``clientInfo``,
    ``clientCapabilities`` (each of its fields) and ``_meta`` are defaulted when
    malformed: the schema marks them ``x-deserialize-default-on-error``, and
    both SDKs do so; a client is not locked out over what it says of itself."""
    if params is not None and not isinstance(params, dict):
        return parse(params, models.InitializeRequest)  # -32602: not an object
    raw = params or {}
    version = raw.get("protocolVersion")
    if type(version) is not int or not 0 <= version <= MAX_PROTOCOL_VERSION:
        given = json.dumps(version) if "protocolVersion" in raw else "missing"
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            "Invalid params: protocolVersion must be an integer from 0 to "
            f"{MAX_PROTOCOL_VERSION} (the latest ACP version the client supports), not {given}",
            {"path": "$.protocolVersion"},
        )
    cleaned: dict[str, Any] = {
        "protocolVersion": version,
        "clientCapabilities": _client_capabilities(raw.get("clientCapabilities")),
    }
    info = raw.get("clientInfo")
    if isinstance(info, dict) and all(isinstance(info.get(k), str) for k in ("name", "version")):
        cleaned["clientInfo"] = {
            k: info[k] for k in ("name", "version", "title") if isinstance(info.get(k), str)
        }
    if isinstance(raw.get("_meta"), dict):
        cleaned["_meta"] = raw["_meta"]
    return parse(cleaned, models.InitializeRequest)


def _client_capabilities(value: Any) -> dict[str, Any]:
    """The well-formed part of ``clientCapabilities`` (the rest: defaults)."""
    if not isinstance(value, dict):
        return {}
    fs = value.get("fs")
    cleaned: dict[str, Any] = {
        "fs": {
            k: fs[k]
            for k in ("readTextFile", "writeTextFile")
            if isinstance(fs, dict) and isinstance(fs.get(k), bool)
        }
    }
    if isinstance(value.get("terminal"), bool):
        cleaned["terminal"] = value["terminal"]
    for key in ("auth", "elicitation", "session", "_meta"):
        if isinstance(value.get(key), dict):
            cleaned[key] = value[key]
    return cleaned


def settings_from(
    defaults: LaunchSettings, meta: Any, paths: dict[str, str] | None = None
) -> LaunchSettings:
    """``paths``: where each key was sent (default ``$._meta.<key>``)."""
    try:
        return settings_from_meta(defaults, meta if isinstance(meta, dict) else None, paths)
    except ConfigValueError as exc:
        path = exc.path or "$._meta"
        setting = "model" if path.endswith(".model") else path
        raise setting_error(exc, setting, {"path": path}) from None


def setting_error(exc: ConfigValueError, setting: str, data: dict[str, Any]) -> RpcError:
    """-32602 for a model, mode, effort or other setting the bridge refuses:
    ``invalid_model`` or ``invalid_setting``, naming the setting."""
    cause = "invalid_model" if setting == "model" else "invalid_setting"
    meta = causes.meta(cause, setting=setting, value=data.get("value"))
    return RpcError(ErrorCode.INVALID_PARAMS, str(exc), {**data, "_meta": meta})


ON_DISCONNECT = ("keep", "cancel")


def on_disconnect_from(meta: Any) -> str | None:
    """``_meta.onDisconnect``: the session's policy when its client goes away."""
    value = meta.get("onDisconnect") if isinstance(meta, dict) else None
    if value is None:
        return None
    if value not in ON_DISCONNECT:
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"_meta.onDisconnect must be 'keep' or 'cancel', not {value!r}",
            {"path": "$._meta.onDisconnect", "value": value},
        )
    return str(value)


def unknown_session(session_id: str) -> RpcError:
    return RpcError(
        ErrorCode.RESOURCE_NOT_FOUND,
        f"Resource not found: no live session {session_id!r}",
        {"sessionId": session_id},
    )


def normalise(path: str) -> str:
    return os.path.normpath(path)


def listed_directories(request: models.ListSessionsRequest) -> tuple[str, ...] | None:
    """``session/list``'s exact-match folder filter: ``_meta.additionalDirectories``
    (the stable v1 schema has no such field), or the top-level
    ``additionalDirectories`` of the draft it came from. None: no filter.

    Raises:
        RpcError: ``_meta.additionalDirectories`` is not an array of absolute
            paths (-32602).
    """
    meta = request.meta if isinstance(request.meta, dict) else {}
    in_meta = meta.get("additionalDirectories")
    if in_meta is None:
        dirs = request.additional_directories
        return None if dirs is None else tuple(normalise(d) for d in dirs)
    field = "_meta.additionalDirectories"
    if not isinstance(in_meta, list) or not all(isinstance(d, str) for d in in_meta):
        raise _bad_filter(field, field)
    relative = next((i for i, d in enumerate(in_meta) if not os.path.isabs(d)), None)
    if relative is not None:
        raise _bad_filter(field, f"{field}[{relative}]", in_meta[relative])
    return tuple(normalise(d) for d in in_meta)


def _bad_filter(field: str, where: str, value: str | None = None) -> RpcError:
    """-32602 for session/list's folder filter (cause ``list_filter_invalid``)."""
    row = causes.cause("list_filter_invalid")
    message = row.render(field=field) + (f", not {value!r}" if value is not None else "")
    data: dict[str, Any] = {"path": f"$.{where}", "_meta": causes.meta(row.id)}
    if value is not None:
        data["value"] = value
    return RpcError(ErrorCode.INVALID_PARAMS, message, data)


def check_directories(paths: list[str] | None) -> tuple[str, ...]:
    checked = [
        check_directory(path, f"additionalDirectories[{i}]") for i, path in enumerate(paths or [])
    ]
    return tuple(dict.fromkeys(checked))  # each root once, in order


def check_directory(path: str, field: str, *, must_exist: bool = True) -> str:
    if not os.path.isabs(path):
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"{field} must be an absolute path, not {path!r}",
            {"path": f"$.{field}", "value": path},
        )
    if must_exist and not os.path.isdir(path):
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"{field} {path!r} does not exist or is not a directory",
            {"path": f"$.{field}", "value": path},
        )
    tidy = os.path.normpath(path)
    if must_exist and not _same_directory(path, tidy):
        # normpath cuts "link/.." from the text; the kernel goes up from link's target.
        return os.path.realpath(path)
    return tidy


def _same_directory(path: str, tidy: str) -> bool:
    if ".." not in path.split("/"):
        return True  # only "//" and "." were tidied away
    try:
        return os.path.samefile(path, tidy)
    except OSError:
        return False


# --- each method's params model (routes.py); the models load on first use --


def authenticate(params: Any) -> models.AuthenticateRequest:
    return parse(params, models.AuthenticateRequest)


def new_session(params: Any) -> models.NewSessionRequest:
    return parse(session_params(params), models.NewSessionRequest)


def list_sessions(params: Any) -> models.ListSessionsRequest:
    return parse(session_params(params, null_lists=False), models.ListSessionsRequest)


def open_session(params: Any) -> models.OpenSessionRequest:
    """session/load and session/resume."""
    return parse(session_params(params), models.OpenSessionRequest)


def session_id(params: Any) -> models.SessionIdParams:
    """session/close and session/delete."""
    return parse(params, models.SessionIdParams)


def set_config_option(params: Any) -> models.SetConfigOptionRequest:
    return parse(params, models.SetConfigOptionRequest)


def set_mode(params: Any) -> models.SetModeRequest:
    return parse(params, models.SetModeRequest)


def prompt(params: Any) -> models.PromptRequest:
    return codec.structure_plain_prompt(params) or parse(params, models.PromptRequest)


def steer(params: Any) -> models.PromptRequest:
    """``_agybridge/session/steer {sessionId, text}``: the text prompt it is."""
    if not isinstance(params, dict) or not isinstance(params.get("text"), str):
        raise RpcError(
            ErrorCode.INVALID_PARAMS, "Invalid params: text must be a string", {"path": "$.text"}
        )
    if not params["text"].strip():
        # Named as the steer's field, not as the prompt block it becomes.
        raise RpcError(
            ErrorCode.INVALID_PARAMS, "Invalid params: text is empty", {"path": "$.text"}
        )
    as_prompt = {
        # -32602 naming the field, as every extension (session/prompt's
        # own check would answer a list of problems).
        "sessionId": str_param(params, "sessionId", required=True),
        "prompt": [{"type": "text", "text": params["text"]}],
    }
    return prompt(as_prompt)
