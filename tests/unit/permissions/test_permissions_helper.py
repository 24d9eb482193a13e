"""The hook helper as agy runs it: a real subprocess, real sockets, explicit decisions."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from time import perf_counter

import pytest
import trio

from agybridge.permissions import (
    BAD_TOKEN_REASON,
    ENV_SOCKET,
    ENV_TIMEOUT,
    ENV_TOKEN,
    Broker,
    Decision,
    HookRequest,
    HookRoot,
    child_env,
    helper_command,
)
from agybridge.permissions import hook as hook_module

PAYLOAD = {
    "toolCall": {"name": "run_command", "args": {"CommandLine": "ls -la", "Cwd": "/ws"}},
    "stepIdx": 3,
    "conversationId": "c-1",
    "workspacePaths": ["/ws"],
}
LIMIT_S = 20  # every test's absolute bound (helpers start in ~20 ms)

Handler = Callable[[trio.SocketStream], Awaitable[None]]


@pytest.fixture
def root() -> Iterator[HookRoot]:
    made = HookRoot.create(hook_timeout_s=30, helper_timeout_s=20)
    yield made
    made.remove()


def base_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


async def run_helper(
    env: dict[str, str], stdin: bytes | None = None
) -> tuple[dict[str, str], float]:
    """Run the helper like agy does; returns its one decision and the wall time."""
    data = json.dumps(PAYLOAD).encode() if stdin is None else stdin
    start = perf_counter()
    with trio.fail_after(LIMIT_S):
        done = await trio.run_process(
            list(helper_command()),
            stdin=data,
            capture_stdout=True,
            capture_stderr=True,
            env=env,
            check=False,
        )
    elapsed = perf_counter() - start
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    lines = done.stdout.decode().splitlines()
    assert len(lines) == 1, done.stdout
    decision = json.loads(lines[0])
    assert decision["decision"] in ("allow", "deny")
    if decision["decision"] == "deny":
        assert decision["reason"].strip()
    return decision, elapsed


@asynccontextmanager
async def broker_running(
    root: HookRoot, decide: Callable[[HookRequest], Awaitable[Decision]], **kwargs: float
) -> AsyncIterator[Broker]:
    broker = Broker(root.socket_path, root.token, decide, **kwargs)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        yield broker
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def raw_server(path: str, handler: Handler) -> AsyncIterator[None]:
    """A stand-in broker that does whatever ``handler`` does with each connection."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(8)
    listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
    async with trio.open_nursery() as nursery:
        await nursery.start(trio.serve_listeners, handler, [listener])
        yield
        nursery.cancel_scope.cancel()


async def read_request(stream: trio.SocketStream) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some()
        if not chunk:
            break
        data += chunk
    return data


async def test_allow_round_trip(root: HookRoot) -> None:
    """An allow from decide is printed as agy's allow; decide sees the full payload."""
    seen: list[HookRequest] = []

    async def decide(request: HookRequest) -> Decision:
        seen.append(request)
        return Decision.allow()

    async with broker_running(root, decide):
        decision, _ = await run_helper({**base_env(), **root.env})
    assert decision == {"decision": "allow"}
    (request,) = seen
    assert request.tool_name == "run_command"
    assert request.args == {"CommandLine": "ls -la", "Cwd": "/ws"}
    assert (request.step_idx, request.conversation_id) == (3, "c-1")
    assert request.workspace_paths == ("/ws",)
    assert request.raw == PAYLOAD


async def test_deny_round_trip(root: HookRoot) -> None:
    """A deny from decide is printed with its reason."""

    async def decide(request: HookRequest) -> Decision:
        return Decision.deny("the user rejected this")

    async with broker_running(root, decide):
        decision, _ = await run_helper({**base_env(), **root.env})
    assert decision == {"decision": "deny", "reason": "the user rejected this"}


async def test_no_environment_denies() -> None:
    """Without the broker variables the helper denies at once."""
    decision, _ = await run_helper(base_env())
    assert decision == {
        "decision": "deny",
        "reason": "agybridge: permission broker not configured",
    }


async def test_broker_down_denies(root: HookRoot) -> None:
    """No listener on the socket path (or no socket at all) is a deny."""
    decision, _ = await run_helper({**base_env(), **root.env})
    assert decision["decision"] == "deny"
    assert "unreachable" in decision["reason"]
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(root.socket_path)  # bound, never listening: connection refused
    try:
        decision, _ = await run_helper({**base_env(), **root.env})
    finally:
        dead.close()
    assert decision["decision"] == "deny" and "unreachable" in decision["reason"]


async def test_an_observer_fails_open_but_passes_the_brokers_deny(root: HookRoot) -> None:
    """Observing an ungated agy (issue 27), a failure allows: agy's own checks
    decide, as without the hook. A deny the broker gives is still printed."""
    observer = child_env(root, base_env(), observer=True)
    assert observer[hook_module.ENV_OBSERVE] == "1"
    assert hook_module.ENV_OBSERVE not in child_env(root, observer)  # not inherited
    decision, _ = await run_helper(observer)  # the broker is down
    assert decision == {"decision": "allow"}
    decision, _ = await run_helper(observer, stdin=b"not json")
    assert decision == {"decision": "allow"}

    async def decide(request: HookRequest) -> Decision:
        return Decision.deny("agybridge: this call touches the permission gate")

    async with broker_running(root, decide):
        decision, _ = await run_helper(observer)
    assert decision == {
        "decision": "deny",
        "reason": "agybridge: this call touches the permission gate",
    }


async def test_wrong_token_denies(root: HookRoot) -> None:
    """A helper with a wrong token gets the broker's deny; decide is never called."""
    called = False

    async def decide(request: HookRequest) -> Decision:
        nonlocal called
        called = True
        return Decision.allow()

    env = {**base_env(), **root.env, ENV_TOKEN: "0" * 64}
    async with broker_running(root, decide) as broker:
        decision, _ = await run_helper(env)
    assert decision == {"decision": "deny", "reason": BAD_TOKEN_REASON}
    assert not called and broker.statistics().bad_tokens == 1


async def test_oversized_input_denies(root: HookRoot) -> None:
    """More than 4 MiB on stdin is denied without reaching the broker."""
    called = False

    async def decide(request: HookRequest) -> Decision:
        nonlocal called
        called = True
        return Decision.allow()

    big = json.dumps(
        {"toolCall": {"name": "write_to_file", "args": {"CodeContent": "x" * (4 * 2**20)}}}
    ).encode()
    assert len(big) > hook_module.MAX_INPUT_BYTES
    async with broker_running(root, decide):
        decision, _ = await run_helper({**base_env(), **root.env}, stdin=big)
    assert decision["decision"] == "deny" and "larger than" in decision["reason"]
    assert not called


async def test_input_just_under_the_limit_is_forwarded(root: HookRoot) -> None:
    """A payload near 4 MiB still reaches decide intact."""
    body = "y" * (hook_module.MAX_INPUT_BYTES - 200)
    payload = {"toolCall": {"name": "write_to_file", "args": {"CodeContent": body}}}

    async def decide(request: HookRequest) -> Decision:
        ok = request.args["CodeContent"] == body
        return Decision.allow() if ok else Decision.deny("mangled")

    async with broker_running(root, decide):
        decision, _ = await run_helper(
            {**base_env(), **root.env}, stdin=json.dumps(payload).encode()
        )
    assert decision == {"decision": "allow"}


@pytest.mark.parametrize(
    ("stdin", "reason"),
    [
        (b"not json", "agybridge: hook input is not JSON"),
        (b"[1, 2]", "agybridge: hook input is not a JSON object"),
        (b"", "agybridge: hook input is not JSON"),
    ],
)
async def test_bad_input_denies(root: HookRoot, stdin: bytes, reason: str) -> None:
    """stdin that is not a JSON object is denied."""
    decision, _ = await run_helper({**base_env(), **root.env}, stdin=stdin)
    assert decision == {"decision": "deny", "reason": reason}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (b"not json\n", "malformed reply"),
        (b"[]\n", "malformed reply"),
        (b"{}\n", "no allow/deny decision"),
        (b'{"decision":"ask"}\n', "no allow/deny decision"),
        (b'{"decision":"allow"', "malformed reply"),
        (b"", "closed the connection without an answer"),
        (b"x" * (hook_module.MAX_REPLY_BYTES + 10), "reply too large"),
    ],
)
async def test_bad_replies_deny(root: HookRoot, reply: bytes, expected: str) -> None:
    """Garbage, decision-less, truncated, missing or huge replies become denies."""

    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(reply)
        await stream.aclose()

    async with raw_server(root.socket_path, handler):
        decision, _ = await run_helper({**base_env(), **root.env})
    assert decision["decision"] == "deny"
    assert expected in decision["reason"]


async def test_unterminated_allow_then_close_is_accepted(root: HookRoot) -> None:
    """A complete JSON reply without its newline, then EOF, still counts."""

    async def handler(stream: trio.SocketStream) -> None:
        await read_request(stream)
        await stream.send_all(b'{"decision":"deny","reason":"no"}')
        await stream.aclose()

    async with raw_server(root.socket_path, handler):
        decision, _ = await run_helper({**base_env(), **root.env})
    assert decision == {"decision": "deny", "reason": "no"}


async def test_slow_broker_denies_after_the_read_timeout(root: HookRoot) -> None:
    """A broker that never answers yields a deny once the helper's timeout passes."""
    requests: list[bytes] = []

    async def handler(stream: trio.SocketStream) -> None:
        requests.append(await read_request(stream))
        await trio.sleep_forever()

    env = {**base_env(), **root.env, ENV_TIMEOUT: "0.5"}
    async with raw_server(root.socket_path, handler):
        decision, elapsed = await run_helper(env)
    assert decision["decision"] == "deny" and "in time" in decision["reason"]
    assert 0.5 <= elapsed < 5
    (line,) = requests
    assert json.loads(line) == {"token": root.token, "payload": PAYLOAD}


async def test_helper_timeout_cancels_the_pending_decide(root: HookRoot) -> None:
    """When the helper gives up, the broker sees the hang-up and cancels decide."""
    cancelled = trio.Event()

    async def decide(request: HookRequest) -> Decision:
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    env = {**base_env(), **root.env, ENV_TIMEOUT: "0.3"}
    async with broker_running(root, decide, wait_s=60) as broker:
        decision, _ = await run_helper(env)
        with trio.fail_after(5):
            await cancelled.wait()
    assert decision["decision"] == "deny" and "in time" in decision["reason"]
    assert broker.statistics().pending == 0


async def test_stdin_left_open_is_answered(root: HookRoot) -> None:
    """If agy keeps stdin open after a complete payload, the helper still answers."""

    async def decide(request: HookRequest) -> Decision:
        return Decision.allow()

    async with broker_running(root, decide):
        with trio.fail_after(LIMIT_S):
            process = await trio.lowlevel.open_process(
                list(helper_command()),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**base_env(), **root.env},
            )
            assert process.stdin is not None and process.stdout is not None
            await process.stdin.send_all(json.dumps(PAYLOAD).encode())
            out = b""
            while not out.endswith(b"\n"):
                chunk = await process.stdout.receive_some()
                assert chunk, "helper exited without a decision"
                out += chunk
            await process.stdin.aclose()
            assert await process.wait() == 0
            await process.stdout.aclose()
    assert json.loads(out) == {"decision": "allow"}


def test_helper_imports_only_the_standard_library() -> None:
    """Loading hook.py pulls in neither trio, attrs, cattrs nor agybridge."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('h', {hook_module.__file__!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=LIMIT_S,
    )
    modules = set(done.stdout.split())
    assert "socket" in modules
    assert not modules & {"trio", "attrs", "attr", "cattrs", "agybridge", "typing"}


def test_reply_timeout_from_the_environment() -> None:
    """The helper's reply timeout comes from its env; bad values fall back."""
    assert hook_module.reply_timeout({ENV_TIMEOUT: "2.5"}) == 2.5
    for bad in ("", "x", "-1", "0", "nan", "inf"):
        assert hook_module.reply_timeout({ENV_TIMEOUT: bad}) == hook_module.DEFAULT_REPLY_TIMEOUT_S
    assert hook_module.reply_timeout({}) == hook_module.DEFAULT_REPLY_TIMEOUT_S


def test_socket_env_names() -> None:
    """The variables the bridge sets on agy are the ones the helper reads."""
    assert (ENV_SOCKET, ENV_TOKEN, ENV_TIMEOUT) == (
        "AGYBRIDGE_PERMISSION_SOCKET",
        "AGYBRIDGE_PERMISSION_TOKEN",
        "AGYBRIDGE_PERMISSION_TIMEOUT_S",
    )
