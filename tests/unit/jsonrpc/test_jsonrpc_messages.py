"""Sans-I/O JSON-RPC: parsing lines into messages, encoding messages, RpcError."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge.acp.text_check import find_bad_text
from agybridge.jsonrpc import ErrorCode, RpcError, messages
from agybridge.jsonrpc.errors import FRAMING_CAUSES
from agybridge.jsonrpc.messages import (
    Invalid,
    Message,
    Notification,
    Request,
    Response,
    encode_message,
    error_message,
    notification_message,
    parse_message,
    request_message,
    result_message,
)

PARSE = ErrorCode.PARSE_ERROR
INVALID = ErrorCode.INVALID_REQUEST

# (name, line, expected message); Invalid rows compare id and code (see `summary`).
PARSE_CASES: list[tuple[str, bytes, Message | None]] = [
    ("blank line", b"", None),
    ("whitespace line", b" \t\r", None),
    (
        "request",
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1}}',
        Request(1, "m", {"a": 1}),
    ),
    ("request id 0", b'{"jsonrpc":"2.0","id":0,"method":"m"}', Request(0, "m", None)),
    ("string id", b'{"jsonrpc":"2.0","id":"x","method":"m","params":[]}', Request("x", "m", [])),
    ("null id request", b'{"jsonrpc":"2.0","id":null,"method":"m"}', Request(None, "m", None)),
    ("null params", b'{"jsonrpc":"2.0","id":1,"method":"m","params":null}', Request(1, "m", None)),
    ("notification", b'{"jsonrpc":"2.0","method":"n","params":{}}', Notification("n", {})),
    ("result", b'{"jsonrpc":"2.0","id":3,"result":{"x":1}}', Response(3, {"x": 1}, None)),
    ("null result", b'{"jsonrpc":"2.0","id":0,"result":null}', Response(0, None, None)),
    (
        "error",
        b'{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"m"}}',
        Response(4, None, None),
    ),
    ("not JSON", b"{nope", Invalid(None, RpcError.parse_error())),
    ("truncated JSON", b'{"jsonrpc":"2.0","id":1', Invalid(None, RpcError.parse_error())),
    ("invalid UTF-8", b'{"jsonrpc":"2.0","method":"\xff"}', Invalid(None, RpcError.parse_error())),
    (
        "UTF-16 is not UTF-8",
        '{"jsonrpc":"2.0"}'.encode("utf-16"),
        Invalid(None, RpcError.parse_error()),
    ),
    (
        "NaN",
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":[NaN]}',
        Invalid(None, RpcError.parse_error()),
    ),
    ("deep nesting", b"[" * 100_000 + b"]" * 100_000, Invalid(None, RpcError.parse_error())),
    (
        "batch",
        b'[{"jsonrpc":"2.0","id":1,"method":"m"}]',
        Invalid(None, RpcError.invalid_request()),
    ),
    ("empty batch", b"[]", Invalid(None, RpcError.invalid_request())),
    ("string", b'"hello"', Invalid(None, RpcError.invalid_request())),
    ("number", b"42", Invalid(None, RpcError.invalid_request())),
    ("null", b"null", Invalid(None, RpcError.invalid_request())),
    ("missing jsonrpc", b'{"id":7,"method":"m"}', Invalid(7, RpcError.invalid_request())),
    (
        "jsonrpc 1.0",
        b'{"jsonrpc":"1.0","id":7,"method":"m"}',
        Invalid(7, RpcError.invalid_request()),
    ),
    (
        "jsonrpc as number",
        b'{"jsonrpc":2.0,"id":"s","method":"m"}',
        Invalid("s", RpcError.invalid_request()),
    ),
    (
        "method not a string",
        b'{"jsonrpc":"2.0","id":7,"method":42}',
        Invalid(7, RpcError.invalid_request()),
    ),
    (
        "method null, no id",
        b'{"jsonrpc":"2.0","method":null}',
        Invalid(None, RpcError.invalid_request()),
    ),
    (
        "float id",
        b'{"jsonrpc":"2.0","id":7.5,"method":"m"}',
        Invalid(None, RpcError.invalid_request()),
    ),
    (
        "boolean id",
        b'{"jsonrpc":"2.0","id":true,"method":"m"}',
        Invalid(None, RpcError.invalid_request()),
    ),
    (
        "object id",
        b'{"jsonrpc":"2.0","id":{},"method":"m"}',
        Invalid(None, RpcError.invalid_request()),
    ),
    (
        "scalar params",
        b'{"jsonrpc":"2.0","id":7,"method":"m","params":3}',
        Invalid(7, RpcError.invalid_request()),
    ),
    ("neither method nor id", b'{"jsonrpc":"2.0"}', Invalid(None, RpcError.invalid_request())),
    ("id without result", b'{"jsonrpc":"2.0","id":3}', Invalid(None, RpcError.invalid_request())),
    # A response's id is in *our* id space: echoing it could complete a client request.
    (
        "bad response version",
        b'{"jsonrpc":"1.0","id":3,"result":{}}',
        Invalid(None, RpcError.invalid_request()),
    ),
    (
        "result and error",
        b'{"jsonrpc":"2.0","id":3,"result":1,"error":{}}',
        Invalid(None, RpcError.invalid_request()),
    ),
    (
        "boolean response id",
        b'{"jsonrpc":"2.0","id":false,"result":1}',
        Invalid(None, RpcError.invalid_request()),
    ),
]


def summary(message: Message | None) -> Any:
    if isinstance(message, Invalid):
        return ("invalid", message.id, message.error.code)
    return message


@pytest.mark.parametrize(
    ("line", "expected"), [c[1:] for c in PARSE_CASES], ids=[c[0] for c in PARSE_CASES]
)
def test_parse(line: bytes, expected: Message | None) -> None:
    """Each line is classified as its message or as the error to answer it with."""
    assert summary(parse_message(line)) == summary(expected)


def test_parse_error_has_details() -> None:
    """A -32700 carries the decoder's complaint in data.details."""
    message = parse_message(b"{nope")
    assert isinstance(message, Invalid)
    wire = message.error.to_wire()
    assert (wire["code"], wire["message"]) == (-32700, "Parse error")
    assert wire["data"]["details"].startswith("JSONDecodeError: Expecting property name")


@pytest.mark.parametrize(
    ("line", "text"),
    [
        (b"[]", "batch requests are not supported"),
        (b"42", "must be an object, not a number"),
        (b'{"id":1,"method":"m"}', '"jsonrpc": "2.0" is missing'),
        (b'{"jsonrpc":"1.0","id":1,"method":"m"}', "must be \"2.0\", not '1.0'"),
        (b'{"jsonrpc":"2.0","id":1,"method":[]}', '"method" must be a string, not an array'),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', '"id" must be an integer, a string or null'),
        (
            b'{"jsonrpc":"2.0","id":1,"method":"m","params":"x"}',
            '"params" must be an object or an array',
        ),
    ],
)
def test_invalid_request_messages_say_what_is_wrong(line: bytes, text: str) -> None:
    """-32600 messages name the offending member and what was found."""
    message = parse_message(line)
    assert isinstance(message, Invalid)
    assert text in message.error.message


def test_error_response_is_parsed_into_rpc_error() -> None:
    """An error member becomes an RpcError with code, message and data."""
    line = b'{"jsonrpc":"2.0","id":4,"error":{"code":-32002,"message":"gone","data":{"s":1}}}'
    message = parse_message(line)
    assert isinstance(message, Response)
    assert message.error is not None
    assert (message.error.code, message.error.message, message.error.data) == (
        -32002,
        "gone",
        {"s": 1},
    )


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        ({"code": 1, "message": "m"}, (1, "m", None)),
        ("oops", (-32603, "malformed error response", {"error": "oops"})),
        ({"code": "x", "message": 5}, (-32603, "5", None)),
        ({"code": True, "message": "m"}, (-32603, "m", None)),
    ],
)
def test_malformed_error_members_never_fail(error: object, expected: tuple[Any, ...]) -> None:
    """RpcError.from_wire accepts anything a peer may send."""
    exc = RpcError.from_wire(error)
    assert (exc.code, exc.message, exc.data) == expected


def test_encode_is_one_compact_utf8_line() -> None:
    """Messages are compact JSON, non-ASCII kept as UTF-8, one b"\\n" at the end."""
    line = encode_message(result_message(1, {"text": "é\nü", "n": None}))
    assert line == '{"jsonrpc":"2.0","id":1,"result":{"text":"é\\nü","n":null}}\n'.encode()


def test_encode_escapes_lone_surrogates() -> None:
    """A lone surrogate (no UTF-8 form) is escaped instead of failing."""
    line = encode_message(notification_message("n", {"t": "a\ud800"}))
    assert line == b'{"jsonrpc":"2.0","method":"n","params":{"t":"a\\ud800"}}\n'
    assert json.loads(line)["params"]["t"] == "a\ud800"


@pytest.mark.parametrize("bad", [object(), float("nan"), {1j: 2}])
def test_encode_rejects_non_json(bad: object) -> None:
    """Unserialisable values raise TypeError or ValueError (NaN is not JSON)."""
    with pytest.raises((TypeError, ValueError)):
        encode_message(result_message(1, bad))


def test_builders() -> None:
    """params are omitted when None; result null and id 0 are kept."""
    assert request_message(0, "m", None) == {"jsonrpc": "2.0", "id": 0, "method": "m"}
    assert notification_message("n", {"a": 1}) == {
        "jsonrpc": "2.0",
        "method": "n",
        "params": {"a": 1},
    }
    assert result_message(0, None) == {"jsonrpc": "2.0", "id": 0, "result": None}
    assert error_message(None, RpcError(5, "x")) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": 5, "message": "x"},
    }


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
ids = st.none() | st.integers() | st.text()


@given(request_id=ids, method=st.text(), params=st.none() | st.dictionaries(st.text(), json_values))
def test_request_roundtrip(request_id: int | str | None, method: str, params: Any) -> None:
    """Whatever we encode as a request parses back as that request, on one line."""
    line = encode_message(request_message(request_id, method, params))
    assert line.count(b"\n") == 1
    assert line.endswith(b"\n")
    assert parse_message(line[:-1]) == Request(request_id, method, params)


#: Any code point: NULs and lone surrogates included.
_any_text = st.text(st.characters() | st.sampled_from("\x00\ud800\\u"))
_any_json = st.recursive(
    st.none() | st.integers() | _any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_any_text, inner, max_size=4),
    max_leaves=12,
)


@given(params=_any_json, ensure_ascii=st.booleans())
def test_a_request_without_escapes_holds_no_bad_text(params: Any, ensure_ascii: bool) -> None:
    """``no_escapes`` is true only when no string of the params (keys
    included) holds a NUL or a lone surrogate, what ``find_bad_text`` looks for."""
    text = json.dumps(request_message(1, "m", {"p": params}), ensure_ascii=ensure_ascii)
    line = text.encode("utf-8", "surrogatepass")  # a raw surrogate: not UTF-8, a parse error
    message = parse_message(line)
    if isinstance(message, Request) and message.no_escapes:
        assert find_bad_text(message.params) is None
    elif isinstance(message, Request):
        assert b"\\u" in line


def test_no_escapes_examples() -> None:
    assert parse_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":["a"]}') == Request(
        1, "m", ["a"], no_escapes=True
    )
    plain = parse_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":["\xc3\xa9"]}')
    assert isinstance(plain, Request) and plain.no_escapes
    escaped = parse_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":["a\\u0000"]}')
    assert isinstance(escaped, Request) and not escaped.no_escapes
    raw_nul = parse_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":["a\x00"]}')
    assert isinstance(raw_nul, Invalid) and raw_nul.error.code == PARSE


def _outcome(decode: Any, text: str) -> Any:
    try:
        return ("value", decode(text))
    except (ValueError, RecursionError) as exc:
        return ("error", type(exc), str(exc))


_spaces = st.text(st.sampled_from(" \t\r\n\x0b"), max_size=2)


@given(
    text=st.tuples(
        _spaces, json_values.map(json.dumps), _spaces, st.sampled_from(["", "x", "{"])
    ).map("".join)
    | st.text(max_size=12)
    | st.sampled_from(["NaN", "[Infinity]", "\ufeff{}", "1 2", "[" * 50_000])
)
def test_decode_is_json_loads(text: str) -> None:
    """The parser's fast path decodes as ``json.loads`` (same value, same error)."""
    loads = functools.partial(json.loads, parse_constant=messages._reject_constant)
    assert _outcome(messages._decode, text) == _outcome(loads, text)


@given(request_id=ids, result=json_values)
def test_result_roundtrip(request_id: int | str | None, result: Any) -> None:
    """Whatever we encode as a result parses back as that response."""
    line = encode_message(result_message(request_id, result))
    assert parse_message(line[:-1]) == Response(request_id, result, None)


# -- RpcError

CONSTRUCTORS: list[tuple[RpcError, int, str]] = [
    (RpcError.parse_error(), -32700, "Parse error"),
    (RpcError.invalid_request(), -32600, "Invalid request"),
    (RpcError.method_not_found("x/y"), -32601, "Method not found: 'x/y'"),
    (RpcError.invalid_params(), -32602, "Invalid params"),
    (RpcError.internal_error(), -32603, "Internal error"),
    (RpcError.auth_required(), -32000, "Authentication required"),
    (RpcError.resource_not_found(), -32002, "Resource not found"),
    (RpcError.request_cancelled(), -32800, "Request cancelled"),
]


@pytest.mark.parametrize(("error", "code", "message"), CONSTRUCTORS)
def test_named_constructors(error: RpcError, code: int, message: str) -> None:
    """Each named constructor has its code and the standard message; the two
    errors this layer answers by itself name their catalogue cause."""
    cause = FRAMING_CAUSES.get(ErrorCode(code))
    data = None if cause is None else {"_meta": {"agybridge": {"cause": cause}}}
    assert (error.code, error.message, error.data) == (code, message, data)
    wire = {"code": code, "message": message}
    assert error.to_wire() == (wire if data is None else {**wire, "data": data})


def test_to_wire_includes_data_only_when_set() -> None:
    """data is on the wire unless it is None (falsy data such as 0 or {} is kept)."""
    assert RpcError.invalid_params("bad", data={}).to_wire() == {
        "code": -32602,
        "message": "bad",
        "data": {},
    }
    assert RpcError.resource_not_found(data={"sessionId": "s"}).to_wire() == {
        "code": -32002,
        "message": "Resource not found",
        "data": {"sessionId": "s"},
    }
    wire = RpcError(ErrorCode.INTERNAL_ERROR, "x", 0).to_wire()
    assert wire == {"code": -32603, "message": "x", "data": 0}
    assert type(wire["code"]) is int


def test_str_and_repr() -> None:
    """str() reads as a sentence; repr() shows every field."""
    error = RpcError.invalid_params("cwd must be absolute", data={"cwd": "x"})
    assert str(error) == "cwd must be absolute (JSON-RPC error -32602)"
    assert (
        repr(error) == "RpcError(code=<ErrorCode.INVALID_PARAMS: -32602>, "
        "message='cwd must be absolute', data={'cwd': 'x'})"
    )
