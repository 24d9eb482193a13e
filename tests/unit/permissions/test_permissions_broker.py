"""Broker: bounded reads, token check, wait bound, hang-ups, busy, deny_all_pending."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from agybridge.permissions import (
    BAD_TOKEN_REASON,
    BUSY_REASON,
    TIMEOUT_REASON,
    Broker,
    Decision,
    HookRequest,
    HookRoot,
    HookRootError,
)
from agybridge.permissions.models import PayloadError, encode_decision

LIMIT_S = 10
PAYLOAD: dict[str, Any] = {
    "toolCall": {"name": "view_file", "args": {"AbsolutePath": "/ws/a.py"}},
    "stepIdx": 7,
    "conversationId": "conv",
    "workspacePaths": ["/ws"],
}


@pytest.fixture
def root() -> Iterator[HookRoot]:
    made = HookRoot.create(hook_timeout_s=30)
    yield made
    made.remove()


@asynccontextmanager
async def serving(
    root: HookRoot, decide: Callable[[HookRequest], Awaitable[Decision]], **kwargs: Any
) -> AsyncIterator[Broker]:
    broker = Broker(root.socket_path, root.token, decide, **kwargs)
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        yield broker
        nursery.cancel_scope.cancel()


def request_line(token: str, payload: Any = None) -> bytes:
    body = {"token": token, "payload": PAYLOAD if payload is None else payload}
    return json.dumps(body).encode() + b"\n"


async def read_reply(stream: trio.SocketStream) -> dict[str, Any] | None:
    """The one reply line, or None if the broker closed without one."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some()
        if not chunk:
            break
        data += chunk
    if not data:
        return None
    reply: dict[str, Any] = json.loads(data)
    return reply


async def ask(root: HookRoot, line: bytes) -> dict[str, Any] | None:
    stream = await trio.open_unix_socket(root.socket_path)
    async with stream:
        await stream.send_all(line)
        return await read_reply(stream)


def gone(path: str) -> bool:
    return not os.path.exists(path)


async def allow(request: HookRequest) -> Decision:
    return Decision.allow()


async def test_socket_is_0600_and_removed_on_cancel(root: HookRoot) -> None:
    """The socket file is 0600 in the 0700 dir while serving and gone afterwards."""
    with trio.fail_after(LIMIT_S):
        async with serving(root, allow):
            info = os.lstat(root.socket_path)
            assert stat.S_ISSOCK(info.st_mode)
            assert stat.S_IMODE(info.st_mode) == 0o600
            assert stat.S_IMODE(os.lstat(root.runtime_dir).st_mode) == 0o700
        assert gone(root.socket_path)
        with pytest.raises(OSError):
            await trio.open_unix_socket(root.socket_path)


async def test_refuses_a_non_private_directory(root: HookRoot) -> None:
    """run() will not listen in a directory others can enter."""
    os.chmod(root.runtime_dir, 0o755)
    broker = Broker(root.socket_path, root.token, allow)
    with trio.fail_after(LIMIT_S), pytest.raises(HookRootError):
        await broker.run()


async def test_allow_and_parsed_request(root: HookRoot) -> None:
    """decide gets a parsed HookRequest; its decision goes back as one line."""
    seen: list[HookRequest] = []

    async def decide(request: HookRequest) -> Decision:
        seen.append(request)
        return Decision.deny("not today")

    with trio.fail_after(LIMIT_S):
        async with serving(root, decide) as broker:
            reply = await ask(root, request_line(root.token))
    assert reply == {"decision": "deny", "reason": "not today"}
    (request,) = seen
    assert request == HookRequest(
        tool_name="view_file",
        args={"AbsolutePath": "/ws/a.py"},
        step_idx=7,
        conversation_id="conv",
        workspace_paths=("/ws",),
        raw=PAYLOAD,
    )
    assert broker.statistics().served == 1


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"garbage\n", "agybridge: malformed permission request"),
        (b"[1]\n", "agybridge: malformed permission request"),
        (b'{"payload": {}}\n', BAD_TOKEN_REASON),
        (b'{"token": 5, "payload": {}}\n', BAD_TOKEN_REASON),
        (b'{"token": "\xc3\xa9", "payload": {}}\n', BAD_TOKEN_REASON),
        (b'{"token": "\\ud800", "payload": {}}\n', BAD_TOKEN_REASON),
        (None, "agybridge: hook payload has no toolCall object"),
    ],
)
async def test_bad_requests_are_denied(root: HookRoot, line: bytes | None, reason: str) -> None:
    """Malformed lines, missing or wrong tokens and bad payloads are denied, not asked."""
    called = False

    async def decide(request: HookRequest) -> Decision:
        nonlocal called
        called = True
        return Decision.allow()

    if line is None:
        line = request_line(root.token, {"stepIdx": 1})
    with trio.fail_after(LIMIT_S):
        async with serving(root, decide):
            reply = await ask(root, line)
    assert reply == {"decision": "deny", "reason": reason}
    assert not called


async def test_wrong_token_is_denied_and_counted(
    root: HookRoot, caplog: pytest.LogCaptureFixture
) -> None:
    """A token that differs is refused, logged and counted."""
    with trio.fail_after(LIMIT_S):
        async with serving(root, allow) as broker:
            reply = await ask(root, request_line("f" * 64))
            good = await ask(root, request_line(root.token))
    assert reply == {"decision": "deny", "reason": BAD_TOKEN_REASON}
    assert good == {"decision": "allow"}
    assert broker.statistics().bad_tokens == 1
    assert "wrong token" in caplog.text


async def test_oversized_request_is_denied(root: HookRoot) -> None:
    """A request line beyond the byte limit is denied without reading it all."""
    with trio.fail_after(LIMIT_S):
        async with serving(root, allow, max_request_bytes=1024):
            stream = await trio.open_unix_socket(root.socket_path)
            async with stream:
                await stream.send_all(b"x" * 4096)
                reply = await read_reply(stream)
    assert reply == {"decision": "deny", "reason": "agybridge: permission request too large"}


async def test_slow_request_is_denied(root: HookRoot) -> None:
    """A client that never finishes its line gets a deny after io_timeout_s."""
    with trio.fail_after(LIMIT_S):
        async with serving(root, allow, io_timeout_s=0.2):
            stream = await trio.open_unix_socket(root.socket_path)
            async with stream:
                await stream.send_all(b'{"token": ')
                reply = await read_reply(stream)
    assert reply is not None and "timed out reading" in reply["reason"]


async def test_wait_bound_denies(root: HookRoot) -> None:
    """A decide slower than wait_s is cancelled and answered 'did not answer in time'."""
    cancelled = False

    async def decide(request: HookRequest) -> Decision:
        nonlocal cancelled
        try:
            await trio.sleep_forever()
        finally:
            cancelled = True
        raise AssertionError("unreachable")

    with trio.fail_after(LIMIT_S):
        async with serving(root, decide, wait_s=0.2):
            start = trio.current_time()
            reply = await ask(root, request_line(root.token))
            elapsed = trio.current_time() - start
    assert reply == {"decision": "deny", "reason": TIMEOUT_REASON}
    assert cancelled and 0.2 <= elapsed < 5


async def test_early_close_cancels_decide(root: HookRoot) -> None:
    """When the hook connection closes, the pending decide is cancelled."""
    started, cancelled = trio.Event(), trio.Event()

    async def decide(request: HookRequest) -> Decision:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    with trio.fail_after(LIMIT_S):
        async with serving(root, decide) as broker:
            stream = await trio.open_unix_socket(root.socket_path)
            await stream.send_all(request_line(root.token))
            await started.wait()
            assert broker.statistics().pending == 1
            await stream.aclose()
            await cancelled.wait()
            await trio.testing.wait_all_tasks_blocked()
            stats = broker.statistics()
            assert (stats.pending, stats.connections, stats.served) == (0, 0, 0)


async def test_deny_all_pending_counts_and_is_bounded(root: HookRoot) -> None:
    """The count is the number of pending requests and the replies arrive within 1 s."""
    started = trio.Semaphore(0)

    async def decide(request: HookRequest) -> Decision:
        started.release()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    replies: list[dict[str, Any] | None] = []
    both_answered = trio.Event()

    async def client() -> None:
        replies.append(await ask(root, request_line(root.token)))
        if len(replies) == 2:
            both_answered.set()

    with trio.fail_after(LIMIT_S):
        async with serving(root, decide) as broker, trio.open_nursery() as nursery:
            for _ in range(2):
                nursery.start_soon(client)
            for _ in range(2):
                await started.acquire()
            with trio.fail_after(1):
                assert broker.deny_all_pending("session cancelled") == 2
                await both_answered.wait()
            assert broker.deny_all_pending("again") == 0
    assert replies == [{"decision": "deny", "reason": "session cancelled"}] * 2
    assert broker.statistics().pending == 0


async def test_concurrency_limit_answers_busy(root: HookRoot) -> None:
    """Beyond max_connections a request gets the busy deny; the others keep waiting."""
    release = trio.Event()
    started = trio.Semaphore(0)

    async def decide(request: HookRequest) -> Decision:
        started.release()
        await release.wait()
        return Decision.allow()

    replies: list[dict[str, Any] | None] = []

    async def client() -> None:
        replies.append(await ask(root, request_line(root.token)))

    with trio.fail_after(LIMIT_S):
        async with serving(root, decide, max_connections=3) as broker:
            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(client)
                for _ in range(3):
                    await started.acquire()
                busy = await ask(root, request_line(root.token))
                assert busy == {"decision": "deny", "reason": BUSY_REASON}
                assert broker.statistics().busy == 1
                release.set()
            after = await ask(root, request_line(root.token))
    assert replies == [{"decision": "allow"}] * 3
    assert after == {"decision": "allow"}


async def test_decide_errors_become_denies(root: HookRoot) -> None:
    """A decide that raises or returns garbage is answered with a deny."""

    async def broken(request: HookRequest) -> Decision:
        raise RuntimeError("boom")

    async def garbage(request: HookRequest) -> Decision:
        return "allow"  # type: ignore[return-value]

    with trio.fail_after(LIMIT_S):
        for decide in (broken, garbage):
            async with serving(root, decide):
                reply = await ask(root, request_line(root.token))
            assert reply is not None and reply["decision"] == "deny"
            assert "internal error" in reply["reason"]


async def test_cancelling_run_answers_nothing_more(root: HookRoot) -> None:
    """Cancelling run() cancels pending decides and closes connections unanswered."""
    started, cancelled = trio.Event(), trio.Event()

    async def decide(request: HookRequest) -> Decision:
        started.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    broker = Broker(root.socket_path, root.token, decide)
    with trio.fail_after(LIMIT_S):
        async with trio.open_nursery() as outer:
            scope = trio.CancelScope()

            async def serve(task_status: trio.TaskStatus[None]) -> None:
                with scope:
                    await broker.run(task_status=task_status)

            await outer.start(serve)
            stream = await trio.open_unix_socket(root.socket_path)
            async with stream:
                await stream.send_all(request_line(root.token))
                await started.wait()
                scope.cancel()
                assert await read_reply(stream) is None
            await cancelled.wait()
    assert gone(root.socket_path)


def test_constructor_checks() -> None:
    """Empty tokens and non-positive bounds are refused."""
    with pytest.raises(ValueError, match="token"):
        Broker("/x", "", allow)
    with pytest.raises(ValueError, match="positive"):
        Broker("/x", "t", allow, wait_s=0)


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (
            {"toolCall": {"name": "x", "args": '{"A": 1}'}, "stepIdx": "12"},
            HookRequest("x", {"A": 1}, 12, None, (), {}),
        ),
        (
            {"toolCall": {"name": "x"}, "stepIdx": True, "workspacePaths": ["/a", 3]},
            HookRequest("x", {}, None, None, ("/a",), {}),
        ),
    ],
)
def test_payload_parsing(payload: dict[str, Any], expected: HookRequest) -> None:
    """protojson string integers and string-encoded args are accepted."""
    got = HookRequest.from_payload(payload)
    assert (got.tool_name, got.args, got.step_idx, got.workspace_paths) == (
        expected.tool_name,
        expected.args,
        expected.step_idx,
        expected.workspace_paths,
    )
    assert got.raw == payload


@pytest.mark.parametrize(
    "payload",
    [
        None,
        [],
        {"toolCall": []},
        {"toolCall": {"name": ""}},
        {"toolCall": {"name": "x", "args": "nope"}},
        {"toolCall": {"name": "x", "args": [1]}},
    ],
)
def test_payload_errors(payload: Any) -> None:
    """Payloads without a tool name or with unusable args raise PayloadError."""
    with pytest.raises(PayloadError):
        HookRequest.from_payload(payload)


def test_decision_encoding() -> None:
    """Replies are agy's decision JSON on one line; a deny always has a reason."""
    assert encode_decision(Decision.allow()) == b'{"decision":"allow"}\n'
    assert (
        encode_decision(Decision.deny("é\nx")) == '{"decision":"deny","reason":"é\\nx"}\n'.encode()
    )
    assert json.loads(encode_decision(Decision.deny(""))) == {
        "decision": "deny",
        "reason": "denied by agybridge",
    }
