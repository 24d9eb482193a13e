"""JSON-RPC 2.0 messages: parse one line into an event, encode one message as a line.

Sans-I/O (no trio): `parse_message` turns a line from `agybridge.lines.LineBuffer` into
a `Request`, `Notification`, `Response` or `Invalid`; `encode_message` turns a message
object into the bytes of one line. The peer does the I/O.

Wire rules (acp/brief.md §1, transports.mdx): UTF-8, one message per line, no batches.
Ids are int | str | null and 0 is a real id. An unusable line becomes `Invalid`, which
the peer answers with its error; the error echoes the line's id only when the line
claims to be a request (has "method"), because the id of anything else belongs to *our*
id space and echoing it could complete one of the client's own requests.
"""

from __future__ import annotations

import json
from typing import Any, TypeAlias

import attrs

from .errors import RpcError

RequestId: TypeAlias = int | str | None

_SEPARATORS = (",", ":")
# One encoder for every message: json.dumps with options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=_SEPARATORS, allow_nan=False)


@attrs.frozen
class Request:
    id: RequestId
    method: str
    params: Any
    #: The line held no ``\u`` escape: no string in ``params`` can hold a NUL
    #: or a lone surrogate (raw, neither is valid in JSON text or UTF-8), so a
    #: handler need not look for them (False: unknown).
    no_escapes: bool = attrs.field(default=False, eq=False)


@attrs.frozen
class Notification:
    method: str
    params: Any


@attrs.frozen
class Response:
    """A response to one of our requests: ``error`` is None on success."""

    id: RequestId
    result: Any
    error: RpcError | None = attrs.field(eq=False)


@attrs.frozen
class Invalid:
    """A line that must be answered with ``error`` (under ``id``) and otherwise dropped."""

    id: RequestId
    error: RpcError = attrs.field(eq=False)


Message: TypeAlias = Request | Notification | Response | Invalid


def encode_message(message: dict[str, Any]) -> bytes:
    """Encode one message as one line (compact JSON, UTF-8, b"\\n"-terminated).

    Raises:
      TypeError, ValueError: ``message`` is not JSON-serialisable (NaN included).
    """
    try:
        data = _ENCODER.encode(message).encode()
    except UnicodeEncodeError:
        # A lone surrogate (say, echoed from a "\ud800" escape we received) has no UTF-8
        # form; as an ASCII escape it is still valid JSON.
        data = json.dumps(message, separators=_SEPARATORS, allow_nan=False).encode()
    # json.dumps escapes control characters, so the only b"\n" is the terminator.
    return data + b"\n"


def request_message(request_id: RequestId, method: str, params: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def notification_message(method: str, params: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


def result_message(request_id: RequestId, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_message(request_id: RequestId, error: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()}


def parse_message(line: bytes) -> Message | None:
    """Classify one line; None for a blank line (ignored, as most NDJSON readers do)."""
    try:
        obj = _decode(line.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        if line.isspace() or not line:
            return None
        return Invalid(None, RpcError.parse_error(data={"details": _details(exc)}))
    if type(obj) is not dict:
        if type(obj) is list:
            # No batches in ACP; the TS SDK answers them the same way (acp/brief.md §1).
            return Invalid(None, RpcError.invalid_request("batch requests are not supported"))
        return _invalid(None, f"a JSON-RPC message must be an object, not {_kind(obj)}")

    is_request = "method" in obj
    request_id = obj.get("id")
    # bool is an int subclass, and True == 1 would match pending request 1
    # (json.loads makes no other subclass).
    id_ok = request_id is None or type(request_id) is int or type(request_id) is str
    reply_id = request_id if is_request and id_ok else None

    if "jsonrpc" not in obj:
        return _invalid(reply_id, '"jsonrpc": "2.0" is missing')
    if obj["jsonrpc"] != "2.0":
        return _invalid(reply_id, f'"jsonrpc" must be "2.0", not {_show(obj["jsonrpc"])}')
    if not id_ok:
        return _invalid(None, f'"id" must be an integer, a string or null, not {_kind(request_id)}')

    if is_request:
        method = obj["method"]
        if type(method) is not str:
            return _invalid(reply_id, f'"method" must be a string, not {_kind(method)}')
        params = obj.get("params")
        if params is not None and type(params) is not dict and type(params) is not list:
            return _invalid(
                reply_id, f'"params" must be an object or an array, not {_kind(params)}'
            )
        if "id" in obj:
            return Request(request_id, method, params, b"\\u" not in line)
        return Notification(method, params)

    if "id" not in obj:
        return _invalid(None, 'a message needs a "method" or an "id"')
    has_result, has_error = "result" in obj, "error" in obj
    if has_result == has_error:
        return _invalid(None, 'a response needs exactly one of "result" and "error"')
    if has_error:
        return Response(request_id, None, RpcError.from_wire(obj["error"]))
    return Response(request_id, obj["result"], None)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_raw_decode = json.JSONDecoder(parse_constant=_reject_constant).raw_decode


def _decode(text: str) -> Any:
    """``json.loads(text, parse_constant=...)`` with one decoder for every
    line: a client's lines rarely have whitespace around them, so the decoder
    can start at the first character. Anything else, errors included (which
    ``json.loads`` words), goes the long way."""
    try:
        obj, end = _raw_decode(text)
        if end == len(text):
            return obj
    except ValueError:
        pass
    return json.loads(text, parse_constant=_reject_constant)


def _invalid(reply_id: RequestId, message: str) -> Invalid:
    return Invalid(reply_id, RpcError.invalid_request(message))


def _details(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _kind(value: object) -> str:
    """The JSON name of a value's type, for messages (never the value: it may be huge)."""
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case list():
            return "an array"
        case dict():
            return "an object"
    return type(value).__name__  # pragma: no cover - json.loads makes nothing else


def _show(value: object) -> str:
    if isinstance(value, str) and len(value) <= 20:
        return repr(value)
    return _kind(value)
