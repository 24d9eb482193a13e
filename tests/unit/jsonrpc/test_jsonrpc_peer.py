"""Peer: a JSON-RPC connection driven through in-memory streams, line by line.

Every test runs a real `Peer` against a scripted client on `trio.testing` memory streams,
under an absolute `trio.fail_after`. Waiting is done on events or with
`wait_all_tasks_blocked`, never with sleeps.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any
from unittest.mock import ANY

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agybridge.jsonrpc import (
    ErrorCode,
    MessageContext,
    Peer,
    PeerClosedError,
    RequestContext,
    RpcError,
)
from agybridge.jsonrpc.errors import FRAMING_CAUSES
from agybridge.jsonrpc.messages import encode_message, result_message
from agybridge.lines import LineBuffer

TIMEOUT_S = 10  # absolute bound per test: a hang fails instead of blocking the suite


class Recorder:
    """A Handler whose methods are a script (see `handle_request`) and that records calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any, int]] = []  # (kind, method, id or params, seq)
        self.entered: defaultdict[str, trio.Event] = defaultdict(trio.Event)
        self.release = trio.Event()
        self.peer: Peer | None = None

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        pass

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        self.calls.append(("request", method, ctx.request_id, ctx.seq))
        self.entered[method].set()
        match method:
            case "echo":
                return params
            case "null":
                return None
            case "invalid_params":
                raise RpcError.invalid_params("cwd must be absolute", data={"cwd": "rel"})
            case "no_session":
                raise RpcError.resource_not_found(data={"sessionId": "s1"})
            case "auth":
                raise RpcError.auth_required()
            case "boom":
                raise ValueError("kaboom")
            case "not_json":
                return {"x": object()}
            case "block":
                await trio.sleep_forever()
            case "wait_release":
                await self.release.wait()
                return "released"
            case "takeover":
                # Like session/prompt: a cancel ends the turn, answered normally.
                cancelled = trio.Event()
                ctx.on_cancel = cancelled.set
                await cancelled.wait()
                return {"stopReason": "cancelled"}
            case "answer_early":
                # Like an ACP v2 prompt: the answer is written before the work ends.
                assert self.peer is not None
                early = result_message(ctx.request_id, "accepted")
                await self.peer.send_encoded(encode_message(early))
                ctx.answered = True
                await self.release.wait()
                if params == ["fail"]:
                    raise RpcError.internal_error()
                return "ignored"
            case "ask_client":
                assert self.peer is not None
                return {"client said": await self.peer.request("client/question", params)}
        raise RpcError.method_not_found(method)

    async def handle_notification(self, method: str, params: Any, ctx: MessageContext) -> None:
        self.calls.append(("notification", method, params, ctx.seq))
        if method == "raise":
            raise ValueError("notification handler bug")
        if method == "reject":
            raise RpcError.invalid_params()


class Client:
    """The far end: writes raw lines, reads and decodes the peer's lines."""

    def __init__(self, stream: trio.StapledStream[Any, Any]) -> None:
        self.stream = stream
        self.lines = LineBuffer(2**30)

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def send(self, *messages: dict[str, Any]) -> None:
        await self.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def request(self, request_id: Any, method: str, params: Any = None) -> None:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def notify(self, method: str, params: Any = None) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def receive(self) -> Any:
        """The next message; fails on EOF."""
        message = await self._next()
        assert message is not None, "unexpected EOF from the peer"
        return message

    async def receive_until_eof(self) -> list[Any]:
        """Every remaining message, once the peer has stopped and its stream closed."""
        messages = []
        while (message := await self._next()) is not None:
            messages.append(message)
        return messages

    async def close(self) -> None:
        """EOF towards the peer."""
        await self.stream.send_eof()

    async def _next(self) -> Any:
        while (line := self.lines.next_line()) is None:
            if self.lines.at_eof:
                return None
            data = await self.stream.receive_some()
            if data:
                self.lines.feed(data)
            else:
                self.lines.feed_eof()
        return json.loads(line)


async def start_peer(
    nursery: trio.Nursery,
    handler: Recorder,
    *,
    pair: Callable[[], tuple[Any, Any]] = trio.testing.memory_stream_pair,
    **kwargs: Any,
) -> tuple[Peer, Client]:
    """Start a Peer in ``nursery``; when run() returns its output stream is closed."""
    ours, theirs = pair()
    peer = Peer(ours, ours, handler, **kwargs)
    handler.peer = peer

    async def run_then_close(*, task_status: trio.TaskStatus[None]) -> None:
        try:
            await peer.run(task_status=task_status)
        finally:
            ours.send_stream.close()  # EOF for the client: nothing more will come

    await nursery.start(run_then_close)
    return peer, Client(theirs)


def rpc_error(code: int, request_id: Any = None, **error: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, **error}}


def framing_error(code: int, request_id: Any = None, **data: Any) -> dict[str, Any]:
    """An error this layer answers by itself: its data names its catalogue cause."""
    cause = {"_meta": {"agybridge": {"cause": FRAMING_CAUSES[ErrorCode(code)]}}}
    return rpc_error(code, request_id, data={**data, **cause})


def strip_message(response: dict[str, Any]) -> dict[str, Any]:
    """The response with error.message removed (compared separately, by substring)."""
    response = json.loads(json.dumps(response))
    response.get("error", {}).pop("message", None)
    return response


# -- errors: raw line -> the one response expected, then the peer keeps serving

# (name, raw line, expected response without error.message, substring of error.message)
ERROR_CASES: list[tuple[str, bytes, dict[str, Any], str]] = [
    ("garbage", b"{not json", framing_error(-32700, details=ANY), "Parse error"),
    ("invalid UTF-8", b"\xff\xfe{}", framing_error(-32700, details=ANY), "Parse error"),
    ("batch", b'[{"jsonrpc":"2.0","id":1,"method":"echo"}]', framing_error(-32600), "batch"),
    ("not an object", b'"hi"', framing_error(-32600), "must be an object"),
    (
        "bad version",
        b'{"jsonrpc":"1.0","id":5,"method":"echo"}',
        framing_error(-32600, 5),
        '"jsonrpc"',
    ),
    ("no version", b'{"id":5,"method":"echo"}', framing_error(-32600, 5), '"jsonrpc"'),
    (
        "method not a string",
        b'{"jsonrpc":"2.0","id":5,"method":1}',
        framing_error(-32600, 5),
        "method",
    ),
    (
        "oversized line",
        b'{"x":"' + b"y" * 5000 + b'"}',
        framing_error(-32600, limitBytes=1024),
        "1024 bytes",
    ),
    (
        "unknown method",
        b'{"jsonrpc":"2.0","id":5,"method":"nope"}',
        rpc_error(-32601, 5),
        "Method not found: 'nope'",
    ),
    (
        "invalid params",
        b'{"jsonrpc":"2.0","id":"a","method":"invalid_params"}',
        rpc_error(-32602, "a", data={"cwd": "rel"}),
        "cwd must be absolute",
    ),
    (
        "unknown session",
        b'{"jsonrpc":"2.0","id":5,"method":"no_session"}',
        rpc_error(-32002, 5, data={"sessionId": "s1"}),
        "Resource not found",
    ),
    (
        "auth required",
        b'{"jsonrpc":"2.0","id":5,"method":"auth"}',
        rpc_error(-32000, 5),
        "Authentication required",
    ),
    (
        "unexpected exception",
        b'{"jsonrpc":"2.0","id":5,"method":"boom"}',
        rpc_error(-32603, 5, data={"details": "ValueError: kaboom"}),
        "Internal error",
    ),
    (
        "unserialisable result",
        b'{"jsonrpc":"2.0","id":5,"method":"not_json"}',
        rpc_error(
            -32603, 5, data={"details": "TypeError: Object of type object is not JSON serializable"}
        ),
        "Internal error",
    ),
]


@pytest.mark.parametrize(
    ("line", "expected", "message"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
async def test_error_responses(line: bytes, expected: dict[str, Any], message: str) -> None:
    """Each bad line gets exactly one error response, and the next request is served."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, Recorder(), max_line_bytes=1024)
            await client.send_raw(line + b"\n")
            await client.request(0, "echo", {"after": True})
            await client.close()
            response, after = await client.receive_until_eof()
    assert strip_message(response) == expected
    assert message in response["error"]["message"]
    assert after == {"jsonrpc": "2.0", "id": 0, "result": {"after": True}}


async def test_unexpected_exception_is_logged_with_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A handler bug is logged with its traceback under the peer's logger."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, Recorder())
            await client.request(1, "boom")
            await client.receive()
            await client.close()
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.name == "agybridge.jsonrpc.peer"
    assert record.exc_info is not None
    assert "'boom'" in record.getMessage()


async def test_wire_format_and_blank_lines() -> None:
    """Responses are compact UTF-8 lines; blank lines and CRLF are tolerated."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, Recorder())
            await client.send_raw(
                b'\n  \r\n{"jsonrpc":"2.0","id":1,"method":"echo","params":{"t":"\xc3\xa9"}}\r\n'
            )
            data = await client.stream.receive_some()
            await client.close()
    assert data == '{"jsonrpc":"2.0","id":1,"result":{"t":"é"}}\n'.encode()


# -- incoming requests


async def test_multi_mib_messages_both_ways() -> None:
    """A 10 MiB request (a base64 image, say) and its 10 MiB response pass whole."""
    blob = "A" * (10 * 2**20)
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, Recorder())
            await client.request(1, "echo", {"data": blob})
            response = await client.receive()
            await client.close()
    assert response == {"jsonrpc": "2.0", "id": 1, "result": {"data": blob}}


async def test_request_ids_are_echoed_exactly() -> None:
    """Ids 0 (falsy), strings and null come back unchanged; result null is sent as null."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, Recorder())
            await client.request(0, "null")
            await client.request("", "echo", [1])
            await client.request(None, "echo", {})
            await client.close()
            responses = await client.receive_until_eof()
    assert sorted(responses, key=repr) == sorted(
        [
            {"jsonrpc": "2.0", "id": 0, "result": None},
            {"jsonrpc": "2.0", "id": "", "result": [1]},
            {"jsonrpc": "2.0", "id": None, "result": {}},
        ],
        key=repr,
    )


async def test_cancel_request_answers_request_cancelled() -> None:
    """$/cancel_request cancels the handler's task and the peer answers -32800."""
    handler = Recorder()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, handler)
            await client.request(0, "block")
            await handler.entered["block"].wait()
            assert peer.statistics().requests_in_flight == 1
            await client.notify("$/cancel_request", {"requestId": 0})
            response = await client.receive()
            assert peer.statistics().requests_in_flight == 0
            await client.close()
    assert response == rpc_error(-32800, 0, message="Request cancelled")
    assert [c[1] for c in handler.calls] == ["block"]  # the handler never saw the cancel


async def test_cancel_before_the_request_task_starts() -> None:
    """A cancel in the same chunk as its request still ends that request with -32800."""
    handler = Recorder()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, handler)
            await client.send(
                {"jsonrpc": "2.0", "id": "p", "method": "block"},
                {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "p"}},
            )
            response = await client.receive()
            await client.close()
    assert response == rpc_error(-32800, "p", message="Request cancelled")


async def test_on_cancel_takes_over() -> None:
    """A handler that set on_cancel is told instead, and answers with a normal result."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, handler := Recorder())
            await client.request(7, "takeover")
            await handler.entered["takeover"].wait()
            await client.notify("$/cancel_request", {"requestId": 7})
            response = await client.receive()
            await client.close()
    assert response == {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "cancelled"}}


@pytest.mark.parametrize("then", ["succeed", "fail"])
async def test_a_handler_that_answered_early_gets_no_second_answer(then: str) -> None:
    """ctx.answered: the handler wrote its answer itself; whatever it returns or
    raises later, the peer writes nothing more for that request."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, handler := Recorder())
            await client.request(3, "answer_early", [then])
            first = await client.receive()
            handler.release.set()
            await client.request(4, "echo", ["next"])
            second = await client.receive()
            await client.close()
            rest = await client.receive_until_eof()
    assert first == {"jsonrpc": "2.0", "id": 3, "result": "accepted"}
    assert second == {"jsonrpc": "2.0", "id": 4, "result": ["next"]}
    assert rest == []


class EarlyTakeover(Recorder):
    """Takes over cancelling ``takeover_early`` in ``request_received``, as the
    agent does for a prompt (the peer then runs it without a scope of its own)."""

    def __init__(self) -> None:
        super().__init__()
        self.cancelled = trio.Event()

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        if method == "takeover_early":
            ctx.on_cancel = self.cancelled.set

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        if method != "takeover_early":
            return await super().handle_request(method, params, ctx)
        self.entered[method].set()
        await self.cancelled.wait()
        return {"stopReason": "cancelled"}


@pytest.mark.parametrize("started", [True, False])
async def test_on_cancel_taken_over_before_the_task_starts(started: bool) -> None:
    """An on_cancel set in request_received is told of a cancel, also one in the
    same chunk as the request, and the request is answered normally."""
    handler = EarlyTakeover()
    request = {"jsonrpc": "2.0", "id": 7, "method": "takeover_early"}
    cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}}
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, handler)
            if started:
                await client.send(request)
                await handler.entered["takeover_early"].wait()
                await client.send(cancel)
            else:
                await client.send(request, cancel)
            response = await client.receive()
            await client.close()
    assert response == {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "cancelled"}}


async def test_early_takeover_ends_unanswered_when_the_peer_is_cancelled() -> None:
    """Cancelling the whole peer still ends such a request at once, unanswered."""
    handler = EarlyTakeover()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, handler)
            await client.request(7, "takeover_early")
            await handler.entered["takeover_early"].wait()
            nursery.cancel_scope.cancel()
    assert not handler.cancelled.is_set()
    assert peer.statistics().requests_in_flight == 0


def test_on_cancel_cannot_be_unset() -> None:
    """A request's on_cancel, once set, stays set (the peer relies on it)."""
    ctx = RequestContext(request_id=1, method="m", seq=0)
    ctx.on_cancel = print
    with pytest.raises(ValueError, match="cannot be unset"):
        ctx.on_cancel = None
    assert ctx.on_cancel is print


@pytest.mark.parametrize(
    "params",
    [{"requestId": 99}, {"requestId": "0"}, {"requestId": None}, {"requestId": [0]}, {}, [0], None],
)
async def test_cancel_of_unknown_or_malformed_id_is_ignored(params: Any) -> None:
    """A cancel that matches no in-flight request (or makes no sense) changes nothing."""
    handler = Recorder()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, handler)
            await client.request(0, "wait_release")
            await handler.entered["wait_release"].wait()
            await client.notify("$/cancel_request", params)
            await client.notify("$/progress", {"x": 1})  # other $/ notifications: ignored
            await trio.testing.wait_all_tasks_blocked()
            handler.release.set()
            response = await client.receive()
            await client.close()
    assert response == {"jsonrpc": "2.0", "id": 0, "result": "released"}
    assert [c[1] for c in handler.calls] == ["wait_release"]
    assert peer.statistics().messages_received == 3


async def test_duplicate_in_flight_id_is_rejected() -> None:
    """A second request reusing an unfinished request's id gets -32600; the first goes on."""
    handler = Recorder()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, handler)
            await client.request(3, "wait_release")
            await client.request(3, "echo", {})
            rejection = await client.receive()
            handler.release.set()
            await client.close()
            rest = await client.receive_until_eof()
    assert strip_message(rejection) == framing_error(-32600, 3)
    assert rest == [{"jsonrpc": "2.0", "id": 3, "result": "released"}]


async def test_notifications_are_ordered_with_later_requests() -> None:
    """Notifications run inline, before any later message; seq numbers give wire order."""
    handler = Recorder()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, handler)
            await client.send(
                {"jsonrpc": "2.0", "method": "first", "params": {"n": 1}},
                {"jsonrpc": "2.0", "id": 0, "method": "echo", "params": {}},
                {"jsonrpc": "2.0", "method": "raise"},  # a failing handler is only logged
                {"jsonrpc": "2.0", "method": "reject"},
                {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {}},
                {"jsonrpc": "2.0", "method": "last"},
            )
            await client.close()
            responses = await client.receive_until_eof()
    assert len(responses) == 2
    notifications = [(c[1], c[3]) for c in handler.calls if c[0] == "notification"]
    assert notifications == [("first", 0), ("raise", 2), ("reject", 3), ("last", 5)]
    requests = sorted((c[2], c[3]) for c in handler.calls if c[0] == "request")
    assert requests == [(0, 1), (1, 4)]


# -- outgoing requests


async def test_outgoing_request_result_null_and_ids_from_zero() -> None:
    """Our ids count from 0; "result": null returns None; results match by id."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, Recorder())
            results: dict[str, Any] = {}

            async def call(name: str) -> None:
                results[name] = await peer.request("fs/write_text_file", {"name": name})

            nursery.start_soon(call, "a")
            first = await client.receive()
            nursery.start_soon(call, "b")
            second = await client.receive()
            assert peer.statistics().pending_outgoing == 2
            await client.send(
                {"jsonrpc": "2.0", "id": 1, "result": {"ok": "b"}},
                {"jsonrpc": "2.0", "id": 0, "result": None},
            )
            await trio.testing.wait_all_tasks_blocked()
            assert peer.statistics().pending_outgoing == 0
            await client.close()
    assert first == {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "fs/write_text_file",
        "params": {"name": "a"},
    }
    assert second["id"] == 1
    assert results == {"a": None, "b": {"ok": "b"}}


async def test_error_response_raises_rpc_error() -> None:
    """An error response raises RpcError with the peer's code, message and data."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, Recorder())

            async def answer() -> None:
                request = await client.receive()
                await client.send(
                    rpc_error(-32002, request["id"], message="gone", data={"uri": "x"})
                )

            nursery.start_soon(answer)
            with pytest.raises(RpcError) as info:
                await peer.request("fs/read_text_file", {})
            await client.close()
    assert (info.value.code, info.value.message, info.value.data) == (-32002, "gone", {"uri": "x"})


async def test_unknown_response_ids_are_ignored(caplog: pytest.LogCaptureFixture) -> None:
    """Responses for ids we never sent (or null) are logged and dropped."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, Recorder())
            await client.send(
                {"jsonrpc": "2.0", "id": 41, "result": {}},
                {"jsonrpc": "2.0", "id": "0", "result": {}},
                rpc_error(-32700, None, message="Parse error"),
            )
            await client.request(0, "echo", ["still here"])
            assert (await client.receive())["result"] == ["still here"]
            await client.close()
    assert peer.statistics().parse_errors == 0
    assert sum("unknown id" in r.getMessage() for r in caplog.records) == 2
    assert any("could not read" in r.getMessage() for r in caplog.records)


async def test_cancelled_caller_sends_cancel_request() -> None:
    """Cancelling a caller drops its pending entry and sends $/cancel_request."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, Recorder())
            scope = trio.CancelScope()

            async def caller() -> None:
                with scope:
                    await peer.request("session/request_permission", {})

            nursery.start_soon(caller)
            request = await client.receive()
            scope.cancel()
            cancel = await client.receive()
            assert peer.statistics().pending_outgoing == 0
            await client.send({"jsonrpc": "2.0", "id": 0, "result": {}})  # too late: ignored
            await client.close()
    assert request["id"] == 0
    assert cancel == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 0}}
    assert scope.cancelled_caught


async def test_cancelled_caller_does_not_wait_for_a_busy_writer() -> None:
    """With the writer stuck on a client that does not read, a cancel returns at once."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(
                nursery, Recorder(), pair=trio.testing.lockstep_stream_pair
            )
            scope = trio.CancelScope()

            async def caller() -> None:
                with scope:
                    await peer.request("session/request_permission", {})

            nursery.start_soon(caller)
            assert (await client.receive())["id"] == 0
            nursery.start_soon(peer.notify, "session/update", {"n": 1})
            await trio.testing.wait_all_tasks_blocked()  # the writer blocks in send_all
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert peer.statistics().pending_outgoing == 0  # the caller has left already
            update = await client.receive()
            cancel = await client.receive()
            await client.close()
    assert update["method"] == "session/update"
    assert cancel["params"] == {"requestId": 0}


async def test_handler_can_call_back_into_the_client() -> None:
    """A request handler may make its own outgoing request while the reader goes on."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, Recorder())
            await client.request(0, "ask_client", {"q": 1})
            question = await client.receive()
            await client.send({"jsonrpc": "2.0", "id": question["id"], "result": "yes"})
            answer = await client.receive()
            await client.close()
    assert question == {"jsonrpc": "2.0", "id": 0, "method": "client/question", "params": {"q": 1}}
    assert answer == {"jsonrpc": "2.0", "id": 0, "result": {"client said": "yes"}}


# -- the connection going away


async def test_eof_fails_pending_requests_promptly_and_waits_for_in_flight() -> None:
    """On EOF, pending outgoing requests fail at once; in-flight requests still answer."""
    handler = Recorder()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, handler)
            await client.request(0, "wait_release")
            await handler.entered["wait_release"].wait()
            failed = trio.Event()

            async def caller() -> None:
                with pytest.raises(PeerClosedError):
                    await peer.request("session/request_permission", {})
                failed.set()

            nursery.start_soon(caller)
            await client.receive()  # the permission request
            assert not peer.receive_closed
            await client.close()
            await peer.wait_receive_closed()
            await failed.wait()  # while the incoming request is still running
            assert peer.receive_closed
            with pytest.raises(PeerClosedError):
                await peer.request("too/late", {})
            await peer.notify("session/update", {"last": True})  # output still flows
            handler.release.set()
            rest = await client.receive_until_eof()  # returns once run() has returned
    assert rest == [
        {"jsonrpc": "2.0", "method": "session/update", "params": {"last": True}},
        {"jsonrpc": "2.0", "id": 0, "result": "released"},
    ]


class BrokenReceiveStream(trio.abc.ReceiveStream):
    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        await trio.lowlevel.checkpoint()
        raise trio.BrokenResourceError("pipe broke")

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_broken_receive_stream_is_eof() -> None:
    """A receive stream that breaks ends the peer like EOF."""
    with trio.fail_after(TIMEOUT_S):
        send_stream, _ = trio.testing.memory_stream_one_way_pair()
        peer = Peer(BrokenReceiveStream(), send_stream, Recorder())
        await peer.run()
    assert peer.receive_closed
    with pytest.raises(PeerClosedError):
        await peer.request("x", {})


async def test_client_that_stops_reading_never_makes_writes_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """After the client closed its reading end, notify() and responses drop silently."""
    handler = Recorder()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, handler)
            client.stream.receive_stream.close()
            with pytest.raises(PeerClosedError):  # its line broke the writer
                await peer.request("session/request_permission", {})
            with pytest.raises(PeerClosedError):  # refused up front now
                await peer.request("session/request_permission", {})
            for n in range(5):
                await peer.notify("session/update", {"n": n})
            await client.request(0, "echo", {})  # answered into the void
            await client.request(1, "boom")
            await client.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "output stream broke" in warnings[0].getMessage()
    assert peer.statistics().messages_sent == 0
    assert len(handler.calls) == 2


async def test_notify_after_run_returned_is_dropped() -> None:
    """Once the peer has stopped, notify() still does not raise."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, Recorder())
            await client.close()
        await peer.notify("session/update", {})
        with pytest.raises(PeerClosedError):
            await peer.request("x", {})


async def test_cancelling_run_stops_everything_without_responses() -> None:
    """Cancelling run() ends in-flight requests unanswered and fails pending ones."""
    handler = Recorder()
    pending_failed = False
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as outer:
            async with trio.open_nursery() as nursery:
                peer, client = await start_peer(nursery, handler)
                await client.request(0, "block")
                await handler.entered["block"].wait()

                async def caller() -> None:
                    nonlocal pending_failed
                    with pytest.raises(PeerClosedError):
                        await peer.request("x", {})
                    pending_failed = True

                outer.start_soon(caller)
                await client.receive()
                nursery.cancel_scope.cancel()
            assert await client.receive_until_eof() == []
    assert pending_failed
    assert peer.receive_closed


async def test_run_twice_is_an_error() -> None:
    """A Peer serves one connection."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, Recorder())
            with pytest.raises(RuntimeError, match="only be called once"):
                await peer.run()
            await client.close()


async def test_statistics() -> None:
    """statistics() counts messages both ways and parse errors."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(nursery, Recorder())
            await client.send_raw(b"garbage\n[]\n")
            await client.request(0, "echo", {})
            await client.notify("n")
            await client.close()
            assert len(await client.receive_until_eof()) == 3
    stats = peer.statistics()
    assert (stats.messages_received, stats.messages_sent, stats.parse_errors) == (2, 3, 2)
    assert (stats.pending_outgoing, stats.requests_in_flight) == (0, 0)


# -- properties

hypothesis_settings = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@st.composite
def chunkings(draw: st.DrawFn, data: bytes) -> list[bytes]:
    if not data:
        return []
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(data) - 1)), max_size=30)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if a < b]


@hypothesis_settings
@given(n=st.integers(0, 20), string_ids=st.booleans(), data=st.data())
async def test_any_chunking_answers_every_request_once(
    n: int, string_ids: bool, data: st.DataObject
) -> None:
    """N request lines, cut anywhere, give exactly N responses with matching ids."""
    ids = [f"r{i}" if string_ids else i for i in range(n)]
    stream = b"".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "echo", "params": {"i": i}}).encode()
        + b"\n"
        for i in ids
    )
    chunks = data.draw(chunkings(stream))
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, Recorder())
            for chunk in chunks:
                await client.send_raw(chunk)
            await client.close()
            responses = await client.receive_until_eof()
    assert sorted(map(repr, (r["id"] for r in responses))) == sorted(map(repr, ids))
    assert all(r["result"] == {"i": r["id"]} for r in responses)


garbage = st.one_of(
    st.sampled_from([b"{", b'{"jsonrpc":', b"\xff", b"nope", b"}{", b'{"a":1}}']),
    st.binary(max_size=20).map(lambda b: b"!" + b.replace(b"\n", b"")),
)
items = st.one_of(
    st.just("request"), st.just("notification"), garbage.map(lambda g: ("garbage", g))
)


@hypothesis_settings
@given(script=st.lists(items, max_size=30), data=st.data())
async def test_interleaving_requests_notifications_and_garbage(
    script: list[Any], data: st.DataObject
) -> None:
    """Every request is answered once, every garbage line gets -32700, notifications keep order."""
    lines: list[bytes] = []
    request_ids: list[int] = []
    notified: list[int] = []
    valid: list[tuple[str, int]] = []  # wire order of the lines that are messages
    for k, item in enumerate(script):
        if item == "request":
            message = {"jsonrpc": "2.0", "id": k, "method": "echo", "params": [k]}
            request_ids.append(k)
            valid.append(("request", k))
        elif item == "notification":
            message = {"jsonrpc": "2.0", "method": "note", "params": [k]}
            notified.append(k)
            valid.append(("notification", k))
        else:
            lines.append(item[1])
            continue
        lines.append(json.dumps(message).encode())
    stream = b"".join(line + b"\n" for line in lines)
    handler = Recorder()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            _, client = await start_peer(nursery, handler)
            for chunk in data.draw(chunkings(stream)):
                await client.send_raw(chunk)
            await client.close()
            responses = await client.receive_until_eof()
    results = [r for r in responses if "result" in r]
    errors = [r for r in responses if "error" in r]
    assert sorted(r["id"] for r in results) == request_ids
    assert all(r["result"] == [r["id"]] for r in results)
    assert len(errors) == len(script) - len(valid)
    assert all(e["id"] is None and e["error"]["code"] == ErrorCode.PARSE_ERROR for e in errors)
    assert [c[2] for c in handler.calls if c[0] == "notification"] == [[k] for k in notified]
    seq_of = {(c[0], c[2] if c[0] == "request" else c[2][0]): c[3] for c in handler.calls}
    assert [seq_of[kind, k] for kind, k in valid] == list(range(len(valid)))


async def test_wait_requests_done_and_flush_for_shutdown() -> None:
    """Shutdown waits until every in-flight request has answered and the answer is
    written, with no sleep: wait_requests_done() then flush()."""
    handler = Recorder()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(
                nursery, handler, pair=trio.testing.lockstep_stream_pair
            )
            await peer.wait_requests_done()  # nothing in flight: returns at once
            await client.request(1, "wait_release")
            await handler.entered["wait_release"].wait()
            flushed = trio.Event()

            async def shut_down() -> None:
                await peer.wait_requests_done()
                await peer.flush()
                flushed.set()

            nursery.start_soon(shut_down)
            await trio.testing.wait_all_tasks_blocked()
            assert not flushed.is_set()
            handler.release.set()
            # Lockstep streams: flush() can only finish once the client has
            # read the whole response.
            assert await client.receive() == {"jsonrpc": "2.0", "id": 1, "result": "released"}
            await flushed.wait()
            nursery.cancel_scope.cancel()


async def test_flush_after_eof_waits_for_the_last_lines() -> None:
    """After EOF the writer channel closes while the writer still sends the last
    answers: flush() then waits for the writer to finish, so a shutdown that
    flushes and then cancels never cuts an answer short."""
    handler = Recorder()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer, client = await start_peer(
                nursery, handler, pair=trio.testing.lockstep_stream_pair
            )
            await client.request(1, "wait_release")
            await handler.entered["wait_release"].wait()
            await client.close()
            await peer.wait_receive_closed()
            flushed = trio.Event()

            async def shut_down() -> None:
                await peer.wait_requests_done()
                await peer.flush()
                flushed.set()

            nursery.start_soon(shut_down)
            handler.release.set()
            await trio.testing.wait_all_tasks_blocked()
            # The answer is stuck in send_all until the client reads it.
            assert not flushed.is_set()
            assert await client.receive() == {"jsonrpc": "2.0", "id": 1, "result": "released"}
            await flushed.wait()


async def test_cancel_requests_answers_every_request_in_flight() -> None:
    """Shutdown: each request still running is cancelled and answered (-32800, or
    its handler's own answer when it took over cancellation)."""
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            recorder = Recorder()
            peer, client = await start_peer(nursery, recorder)
            await client.send(
                {"jsonrpc": "2.0", "id": 1, "method": "block", "params": None},
                {"jsonrpc": "2.0", "id": 2, "method": "takeover", "params": None},
            )
            await recorder.entered["block"].wait()
            await recorder.entered["takeover"].wait()
            assert peer.cancel_requests() == 2
            responses = {r["id"]: r for r in [await client.receive(), await client.receive()]}
            assert responses[1]["error"]["code"] == -32800
            assert responses[2]["result"] == {"stopReason": "cancelled"}
            assert peer.cancel_requests() == 0
            nursery.cancel_scope.cancel()
