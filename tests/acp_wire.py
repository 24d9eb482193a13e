"""Wire-level helpers for the conformance tests: schema validation, a raw client, leftovers.

* `WireValidator` checks raw JSON-RPC messages, in both directions, against the official
  ACP schema (``@agentclientprotocol/sdk`` 2.4.0's ``schema/v1/schema.json``, installed by
  ``npm ci --prefix tests``). The schema's root is an ``anyOf`` over every type, too loose
  to tell which type a message must match, so we use the per-type annotations instead
  (acp/brief.md §10): every request/response/notification ``$def`` carries ``x-side``
  (who handles it) and ``x-method``. A request is checked against its ``...Request`` def
  and remembered as pending in its direction; the response travelling the other way is
  checked against the matching ``...Response`` def, or its ``error`` against ``Error``.
* `open_bridge` spawns ``python -m agybridge`` with an environment from `bridge_env`, and
  yields a `RawClient`: NDJSON over the child's pipes on trio, every line validated.
* `leftover_processes` finds processes carrying this test's ``AGYBRIDGE_TEST_MARKER``
  (children inherit the bridge's environment, so agy and its tool children carry it too).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs
import jsonschema
import pytest
import trio

from agybridge.acp import codec, models
from agybridge.smoke.processes import marked as marked_processes

TESTS_DIR = Path(__file__).resolve().parent
REPO_DIR = TESTS_DIR.parent
SCHEMA_PATH = TESTS_DIR / "node_modules/@agentclientprotocol/sdk/schema/v1/schema.json"
NODE_BIN_DIR = TESTS_DIR / "node_modules/.bin"
FAKE_AGY = REPO_DIR / "bin/fake-agy"
BRIDGE_CMD = (sys.executable, "-m", "agybridge")
MARKER_VAR = "AGYBRIDGE_TEST_MARKER"

Direction = Literal["c2a", "a2c"]  # client -> agent, agent -> client
T = TypeVar("T")

_KINDS = ("Request", "Response", "Notification")


# --------------------------------------------------------------------------- node deps


def node_deps_skipped() -> bool:
    """AGYBRIDGE_SKIP_NODE=1 turns a missing ``tests/node_modules`` into a skip."""
    return os.environ.get("AGYBRIDGE_SKIP_NODE", "") not in ("", "0")


def require_node_file(path: Path) -> Path:
    """``path`` inside tests/node_modules; fails (never skips) the test when it is missing."""
    if path.exists():
        return path
    message = (
        f"{path} is missing: run `npm ci --prefix tests` (installs the pinned ACP schema and "
        "acpx from tests/package-lock.json); set AGYBRIDGE_SKIP_NODE=1 to skip these tests"
    )
    if node_deps_skipped():
        pytest.skip(message)
    pytest.fail(message, pytrace=False)


@functools.cache
def _load_schema(path: Path) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return schema


def load_schema() -> dict[str, Any]:
    """The official ACP v1 schema (see `require_node_file` for a missing install)."""
    return _load_schema(require_node_file(SCHEMA_PATH))


# --------------------------------------------------------------------------- validation


@attrs.define
class _Pending:
    method: str | None  # None: a deliberately invalid request; only an error may answer it
    index: int


class WireValidator:
    """Validates a stream of raw JSON-RPC messages against the ACP schema.

    Feed every message in wire order with its direction (`feed`); `problems` collects
    readable findings (``#<n> a2c session/prompt result: @ ['stopReason']: ...``).
    Requests are tracked per direction, since both sides count ids from 0.
    """

    def __init__(self, schema: Mapping[str, Any] | None = None) -> None:
        self.schema = dict(schema) if schema is not None else load_schema()
        self._defs: dict[str, Any] = self.schema["$defs"]
        # (handler side, method, kind) -> $def name; side "protocol" is either direction.
        self.index: dict[tuple[str, str, str], str] = {}
        for name, definition in self._defs.items():
            if "x-method" in definition:
                kind = next(k for k in _KINDS if name.endswith(k)).lower()
                self.index[(definition["x-side"], definition["x-method"], kind)] = name
        self._validators: dict[str, jsonschema.Draft202012Validator] = {}
        self.pending: dict[Direction, dict[Any, _Pending]] = {"c2a": {}, "a2c": {}}
        self.problems: list[str] = []
        self.count = 0

    # -- public

    def feed(
        self, direction: Direction | None, message: Any, *, expect_invalid: bool = False
    ) -> list[str]:
        """Check one message; returns (and records) its problems.

        ``direction`` None infers it from the method's ``x-side`` (responses: from the
        pending request). ``expect_invalid`` marks a request the test sends malformed on
        purpose: its own shape is not checked, but it is tracked so that its answer
        must be a schema-valid error.
        """
        self.count += 1
        label = f"#{self.count} {direction or '?'}"
        found: list[str] = []
        try:
            found = self._feed(direction, message, expect_invalid, label)
        except Exception as exc:  # a validator bug must not hide as a pass
            found = [f"{label}: validator crashed on {_short(message)}: {exc!r}"]
        self.problems.extend(found)
        return found

    def feed_line(self, direction: Direction | None, line: bytes | str) -> list[str]:
        """Parse one wire line and `feed` it (unparsable lines are problems)."""
        try:
            message = json.loads(line)
        except ValueError as exc:
            self.count += 1
            found = [f"#{self.count} {direction or '?'}: not JSON ({exc}): {_short(line)}"]
            self.problems.extend(found)
            return found
        return self.feed(direction, message)

    def unanswered(self) -> list[str]:
        """Requests that never got a response, as readable strings."""
        return [
            f"{direction} request id={request_id!r} ({entry.method}, message #{entry.index})"
            for direction, pending in self.pending.items()
            for request_id, entry in pending.items()
        ]

    def report(self) -> str:
        """All problems, one per line, for assertion messages."""
        lines = [f"{self.count} messages, {len(self.problems)} problems"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)

    def errors_for(self, def_name: str, instance: Any) -> list[str]:
        """Readable schema errors of ``instance`` against ``$defs/<def_name>`` (max 3)."""
        validator = self._validators.get(def_name)
        if validator is None:
            validator = self._validators[def_name] = jsonschema.Draft202012Validator(
                {
                    "$schema": self.schema["$schema"],
                    "$defs": self._defs,
                    "$ref": f"#/$defs/{def_name}",
                }
            )
        out = []
        for error in sorted(validator.iter_errors(instance), key=lambda e: list(e.path))[:3]:
            best = _discriminated_suberror(error)
            where = list(best.absolute_path) if best is not None else list(error.absolute_path)
            text = best.message if best is not None else error.message
            out.append(f"{def_name} @ {where}: {text[:300]}")
        return out

    # -- internals

    def _feed(
        self, direction: Direction | None, message: Any, expect_invalid: bool, label: str
    ) -> list[str]:
        if not isinstance(message, dict):
            if expect_invalid:
                return []
            return [f"{label}: not a JSON-RPC object: {_short(message)}"]
        if expect_invalid and "method" not in message:
            return []  # a malformed non-request: nothing will answer it by id
        problems = [] if expect_invalid else _envelope_problems(message)
        if "method" in message:
            return problems + self._on_call(direction, message, expect_invalid, label)
        return problems + self._on_response(direction, message, label)

    def _on_call(
        self, direction: Direction | None, message: dict[str, Any], expect_invalid: bool, label: str
    ) -> list[str]:
        method = message["method"]
        is_request = "id" in message
        kind = "request" if is_request else "notification"
        if expect_invalid:
            # Track it only if an answer can carry its id (otherwise the answer has id null).
            if is_request and direction is not None and _usable_id(message["id"]):
                self._remember(direction, message["id"], None, label)
            return []
        if not isinstance(method, str):
            return [f"{label}: method is not a string: {_short(message)}"]
        if method.startswith("_"):
            # Extension method: the ACP schema says nothing about its payloads
            # (extension_schema.py checks agybridge's), but its answer must come.
            if is_request and direction is not None and _usable_id(message["id"]):
                return self._remember(direction, message["id"], method, label)
            return []
        name, direction = self._def_for(direction, method, kind)
        if name is None or direction is None:
            return [f"{label}: unknown {kind} method {method!r} for this direction"]
        problems = []
        if is_request:
            problems += self._remember(direction, message["id"], method, label)
        params = message.get("params")
        problems += [f"{label} {method} params: {e}" for e in self.errors_for(name, params)]
        return problems

    def _def_for(
        self, direction: Direction | None, method: str, kind: str
    ) -> tuple[str | None, Direction | None]:
        choices: list[tuple[Direction, str]] = (
            [("c2a", "agent"), ("a2c", "client")]
            if direction is None
            else [(direction, "agent" if direction == "c2a" else "client")]
        )
        for candidate, side in choices:
            name = self.index.get((side, method, kind)) or self.index.get(
                ("protocol", method, kind)
            )
            if name is not None:
                return name, candidate
        return None, direction

    def _remember(
        self, direction: Direction, request_id: Any, method: str | None, label: str
    ) -> list[str]:
        if request_id in self.pending[direction]:
            return [f"{label}: request id {request_id!r} reused while still pending"]
        self.pending[direction][request_id] = _Pending(method, self.count)
        return []

    def _on_response(
        self, direction: Direction | None, message: dict[str, Any], label: str
    ) -> list[str]:
        request_id = message.get("id")
        request_dirs: list[Direction] = (
            ["a2c" if direction == "c2a" else "c2a"] if direction is not None else ["c2a", "a2c"]
        )
        is_error = "error" in message
        if request_id is None and is_error:
            # -32700/-32600 for a line that had no usable id (JSON-RPC 2.0 §5).
            return [
                f"{label} error (id null): {e}" for e in self.errors_for("Error", message["error"])
            ]
        candidates = [
            (d, self.pending[d][request_id]) for d in request_dirs if request_id in self.pending[d]
        ]
        if not candidates:
            return [
                f"{label}: response to unknown or already answered id {request_id!r}: "
                f"{_short(message)}"
            ]
        results = []
        for request_dir, entry in candidates:
            results.append(
                (request_dir, entry, self._response_problems(request_dir, entry, message, label))
            )
        request_dir, entry, problems = next((r for r in results if not r[2]), results[0])
        del self.pending[request_dir][request_id]
        return problems

    def _response_problems(
        self, request_dir: Direction, entry: _Pending, message: dict[str, Any], label: str
    ) -> list[str]:
        what = entry.method or "<invalid request>"
        if "error" in message:
            return [
                f"{label} {what} error: {e}" for e in self.errors_for("Error", message["error"])
            ]
        if entry.method is None:
            return [f"{label}: a result answered a malformed request: {_short(message)}"]
        side = "agent" if request_dir == "c2a" else "client"
        name = self.index.get((side, entry.method, "response"))
        if name is None:
            return []  # a protocol-level or extension request: no response type
        return [f"{label} {what} result: {e}" for e in self.errors_for(name, message.get("result"))]


def _usable_id(value: Any) -> bool:
    # bool is an int subclass (and True == 1 as a dict key); null ids are answered as null.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _envelope_problems(message: dict[str, Any]) -> list[str]:
    problems = []
    if message.get("jsonrpc") != "2.0":
        problems.append(f'"jsonrpc" must be "2.0": {_short(message)}')
    if "id" in message:
        request_id = message["id"]
        if not (
            request_id is None
            or isinstance(request_id, str)
            or (isinstance(request_id, int) and not isinstance(request_id, bool))
        ):
            problems.append(f"bad id {request_id!r}")
    if "method" in message:
        if "result" in message or "error" in message:
            problems.append(f"a call carries result/error: {_short(message)}")
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            problems.append(f"params must be structured: {_short(message)}")
    else:
        if "id" not in message:
            problems.append(f"neither method nor id: {_short(message)}")
        if ("result" in message) == ("error" in message):
            problems.append(f"a response needs exactly one of result/error: {_short(message)}")
    return problems


def _discriminated_suberror(err: Any) -> Any:
    """For a failed oneOf/anyOf, the first error of the branch whose discriminator
    (``sessionUpdate``, ``type``, ``outcome``...) ``const`` matched."""
    while err is not None and err.context:
        groups: dict[Any, list[Any]] = {}
        for sub in err.context:
            groups.setdefault(sub.relative_schema_path[0], []).append(sub)
        matching = [g for g in groups.values() if not any(s.validator == "const" for s in g)]
        if len(matching) != 1:
            return err
        err = min(matching[0], key=lambda s: len(s.relative_schema_path))
    return err


def _short(value: Any, limit: int = 300) -> str:
    text = (
        value
        if isinstance(value, str)
        else (
            value.decode("utf-8", "replace")
            if isinstance(value, bytes)
            else json.dumps(value, ensure_ascii=False)
        )
    )
    return text if len(text) <= limit else text[:limit] + "..."


def validate_log(lines: Iterable[str], schema: Mapping[str, Any] | None = None) -> WireValidator:
    """Validate an NDJSON log: lines are ``{"dir": "c2a"|"a2c", "msg": {...}}`` or bare
    messages (direction inferred)."""
    validator = WireValidator(schema)
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            validator.feed_line(None, line)
            continue
        if isinstance(obj, dict) and set(obj) == {"dir", "msg"}:
            validator.feed(obj["dir"], obj["msg"])
        else:
            validator.feed(None, obj)
    return validator


def stop_reason(response: Mapping[str, Any] | None) -> str | None:
    """The ``stopReason`` of a session/prompt response (None for an error or no response)."""
    result = (response or {}).get("result")
    return result.get("stopReason") if isinstance(result, dict) else None


# --------------------------------------------------------------------------- processes


def new_marker() -> str:
    return uuid.uuid4().hex


def leftover_processes(marker: str) -> list[str]:
    """Live (non-zombie) processes whose environment holds ``MARKER_VAR=marker``,
    as ``"pid cmdline"`` strings."""
    return marked_processes(MARKER_VAR, marker)


async def wait_no_leftovers(marker: str, timeout_s: float = 2.0) -> list[str]:
    """Poll until no marked process runs (a SIGKILLed process lingers for a moment);
    returns the survivors after ``timeout_s``, having killed them so they cannot leak."""
    with trio.move_on_after(timeout_s):
        # Nothing to wait on but /proc: a process's death is not an event we can await.
        while leftover_processes(marker):  # noqa: ASYNC110
            await trio.sleep(0.05)
    survivors = leftover_processes(marker)
    _kill(survivors)
    return survivors


def _kill(process_lines: Iterable[str]) -> None:
    # Only processes this test started carry its marker: kill each by its pid.
    for line in process_lines:
        with suppress(OSError, ValueError):
            os.kill(int(line.split()[0]), 9)


# --------------------------------------------------------------------------- bridge


def agy_state_dir(tmp_path: Path) -> Path:
    """The fake agy's state root: where real agy keeps it below the bridge's ``HOME``
    (``~/.gemini/antigravity-cli``, contract.md §7), so that the bridge finds a
    conversation's ``brain/<id>/`` folder where it looks for real agy's."""
    return tmp_path / "home" / ".gemini" / "antigravity-cli"


def bridge_env(tmp_path: Path, marker: str, scenario: str = "echo", **extra: str) -> dict[str, str]:
    """A clean environment for one bridge + fake agy, everything under ``tmp_path``."""
    home = tmp_path / "home"
    state = agy_state_dir(tmp_path)
    for directory in (home, state):
        directory.mkdir(parents=True, exist_ok=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AGYBRIDGE_", "FAKE_AGY_", "AGY_"))
    }
    env.update(
        HOME=str(home),
        AGY_BIN=str(FAKE_AGY),
        FAKE_AGY_SCENARIO=scenario,
        FAKE_AGY_STATE_DIR=str(state),
        FAKE_AGY_LAUNCH_LOG=str(tmp_path / "agy-launches.ndjson"),
        AGYBRIDGE_LOG_FILE=str(tmp_path / "agybridge.log"),
        AGYBRIDGE_DB=str(tmp_path / "agybridge.db"),
        AGYBRIDGE_STAGING_DIR=str(tmp_path / "staging"),
        AGYBRIDGE_LOG_LEVEL="DEBUG",
        PYTHONUNBUFFERED="1",
        **{MARKER_VAR: marker},
    )
    env.update(extra)
    return env


async def iter_lines(stream: trio.abc.ReceiveStream) -> AsyncIterator[bytes]:
    """The lines of ``stream`` without their newlines (a final unterminated one too)."""
    buffer = b""
    async for chunk in stream:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line
    if buffer:
        yield buffer


def tail(path: Path, lines: int = 40) -> str:
    """The last lines of a file, for failure messages."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"({path} unreadable)"
    return "\n".join(text.splitlines()[-lines:])


class BridgeGone(Exception):
    """The bridge closed its stdout while the test still waited for something."""


class RawClient:
    """An NDJSON JSON-RPC client over the bridge's pipes; validates every line.

    A reader task appends every incoming message to `received` (in wire order);
    tests wait for conditions on it with `wait_for`. Everything sent and received is
    kept in `transcript` as ``{"dir", "msg"}`` lines for failure messages.
    """

    def __init__(self, process: trio.Process, validator: WireValidator, tmp_path: Path) -> None:
        self.process = process
        self.validator = validator
        self.tmp_path = tmp_path
        self.received: list[dict[str, Any]] = []
        self.transcript: list[str] = []
        self.eof = False
        self._changed = trio.Event()
        self._next_id = 0
        self._send_lock = trio.Lock()
        #: session/request_permission requests the bridge sent, in order.
        self.permission_requests: list[dict[str, Any]] = []
        #: optionId to answer permission requests with (None: answer "cancelled";
        #: "hold": do not answer, the test does).
        self.permission_choice: str | None = "allow_once"
        #: elicitation/create requests the bridge sent, in order, and the result to
        #: answer them with (None: do not answer, the test does).
        self.elicitation_requests: list[dict[str, Any]] = []
        self.elicitation_result: dict[str, Any] | None = {"action": "cancel"}
        #: The editor's buffers by absolute path: fs/read_text_file answers with one,
        #: or with "resource not found" for a path not in it; the requests, in order.
        self.buffers: dict[str, str] = {}
        self.file_reads: list[dict[str, Any]] = []

    # -- sending

    def new_id(self) -> int:
        request_id = self._next_id
        self._next_id += 1
        return request_id

    async def send(self, message: dict[str, Any], *, expect_invalid: bool = False) -> None:
        """Send one message as one line (validated unless ``expect_invalid``)."""
        self.validator.feed("c2a", message, expect_invalid=expect_invalid)
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def start_prompts_together(self, session_id: str, texts: list[str]) -> list[int]:
        """Send one session/prompt per text in a single write (so the bridge reads them
        in one chunk, the hardest case for keeping their order); returns their ids."""
        messages = []
        for text in texts:
            messages.append(
                {
                    "jsonrpc": "2.0",
                    "id": self.new_id(),
                    "method": "session/prompt",
                    "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
                }
            )
            self.validator.feed("c2a", messages[-1])
        await self.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        return [m["id"] for m in messages]

    async def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (garbage lines too)."""
        self.transcript.append(json.dumps({"dir": "c2a", "raw": data.decode("utf-8", "replace")}))
        assert self.process.stdin is not None
        async with self._send_lock:
            await self.process.stdin.send_all(data)

    async def close_stdin(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def start_request(
        self, method: str, params: Any = None, *, expect_invalid: bool = False
    ) -> int:
        """Send a request and return its id (wait with `response`)."""
        request_id = self.new_id()
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message, expect_invalid=expect_invalid)
        return request_id

    async def request(self, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request and wait for its response message (result or error)."""
        return await self.response(await self.start_request(method, params))

    async def notify(
        self, method: str, params: Any = None, *, expect_invalid: bool = False
    ) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message, expect_invalid=expect_invalid)

    # -- receiving

    async def wait_for(self, condition: Callable[[], T | None], what: str) -> T:
        """Wait until ``condition()`` is truthy after some incoming message; returns it.

        Raises BridgeGone if the bridge's stdout ends first.
        """
        while True:
            value = condition()
            if value:
                return value
            if self.eof:
                raise BridgeGone(
                    f"bridge closed stdout while waiting for {what}\n" + self.diagnostics()
                )
            await self._changed.wait()

    async def response(self, request_id: Any) -> dict[str, Any]:
        return await self.wait_for(
            lambda: self.response_nowait(request_id), f"the response to id {request_id!r}"
        )

    def response_nowait(self, request_id: Any) -> dict[str, Any] | None:
        for message in self.received:
            if (
                "method" not in message
                and message.get("id") == request_id
                and ("result" in message or "error" in message)
            ):
                return message
        return None

    def mark(self) -> int:
        """A position in `received`, for ``since=`` arguments."""
        return len(self.received)

    def updates(
        self, session_id: str, kind: str | None = None, *, since: int = 0
    ) -> list[dict[str, Any]]:
        """The ``update`` objects of the ``session/update``s for ``session_id`` received
        at or after position ``since``."""
        return [
            m["params"]["update"]
            for m in self.received[since:]
            if m.get("method") == "session/update"
            and m.get("params", {}).get("sessionId") == session_id
            and (kind is None or m["params"]["update"].get("sessionUpdate") == kind)
        ]

    async def wait_update(self, session_id: str, kind: str, *, since: int = 0) -> dict[str, Any]:
        """Wait for the first ``kind`` update of ``session_id`` at or after ``since``."""
        found = await self.wait_for(
            lambda: self.updates(session_id, kind, since=since), f"a {kind} update for {session_id}"
        )
        return found[0]

    def message_text(self, session_id: str, *, since: int = 0) -> str:
        """The ``agent_message_chunk`` text of the session since ``since``, concatenated."""
        return "".join(
            u["content"].get("text", "")
            for u in self.updates(session_id, "agent_message_chunk", since=since)
        )

    def position(self, message: dict[str, Any]) -> int:
        """Index of ``message`` (by identity) in `received`."""
        return next(i for i, m in enumerate(self.received) if m is message)

    # -- convenience

    async def initialize(self, **capabilities: Any) -> dict[str, Any]:
        """``capabilities``: more ``clientCapabilities`` (``elicitation={"form": {}}``)."""
        response = await self.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": False, "writeTextFile": False},
                    "terminal": False,
                    **capabilities,
                },
                "clientInfo": {"name": "agybridge-raw-test-client", "version": "0"},
            },
        )
        assert "result" in response, response
        return response

    async def new_session(self, cwd: Path | str | None = None) -> str:
        response = await self.request(
            "session/new", {"cwd": str(cwd or self.tmp_path), "mcpServers": []}
        )
        assert "result" in response, f"{response}\n{self.diagnostics()}"
        session_id: str = response["result"]["sessionId"]
        return session_id

    async def start_prompt(self, session_id: str, text: str) -> int:
        return await self.start_request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )

    # -- plumbing

    async def _reader_task(self) -> None:
        assert self.process.stdout is not None
        try:
            async for line in iter_lines(self.process.stdout):
                self._on_line(line)
                message = self.received[-1] if self.received else None
                if (
                    isinstance(message, dict)
                    and message.get("method") == "session/request_permission"
                    and "id" in message
                    and (
                        not self.permission_requests or message is not self.permission_requests[-1]
                    )
                ):
                    self.permission_requests.append(message)
                    if self.permission_choice != "hold":
                        await self.answer_permission(message, self.permission_choice)
                elif (
                    isinstance(message, dict)
                    and message.get("method") == "elicitation/create"
                    and "id" in message
                    and not any(message is r for r in self.elicitation_requests[-1:])
                ):
                    self.elicitation_requests.append(message)
                    if self.elicitation_result is not None:
                        await self.answer(message, self.elicitation_result)
                elif (
                    isinstance(message, dict)
                    and message.get("method") == "fs/read_text_file"
                    and "id" in message
                    and not any(message is r for r in self.file_reads[-1:])
                ):
                    self.file_reads.append(message)
                    await self._answer_file_read(message)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.eof = True
            self._wake()

    async def answer(self, request: dict[str, Any], result: dict[str, Any]) -> None:
        """Answer a request of the bridge with ``result``."""
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})

    async def _answer_file_read(self, request: dict[str, Any]) -> None:
        path = request.get("params", {}).get("path")
        if path in self.buffers:
            await self.answer(request, {"content": self.buffers[path]})
            return
        error = {"code": -32002, "message": f"Resource not found: {path}"}
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.send({"jsonrpc": "2.0", "id": request["id"], "error": error})

    async def answer_permission(self, request: dict[str, Any], option_id: str | None) -> None:
        """Answer a permission request: an option id, or None for "cancelled"."""
        outcome: dict[str, Any] = (
            {"outcome": "cancelled"}
            if option_id is None
            else {"outcome": "selected", "optionId": option_id}
        )
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self.send({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": outcome}})

    def _on_line(self, line: bytes) -> None:
        text = line.decode("utf-8", "replace")
        self.transcript.append(json.dumps({"dir": "a2c", "raw": text}))
        self.validator.feed_line("a2c", line)  # problems are collected by the validator
        try:
            message = json.loads(line)
        except ValueError:
            return
        if isinstance(message, dict):
            self.received.append(message)
            self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def diagnostics(self) -> str:
        """Transcript, bridge stderr and log tails, for assertion messages."""
        return "\n".join(
            [
                "--- wire transcript (last 60) ---",
                *self.transcript[-60:],
                "--- bridge stderr ---",
                tail(self.tmp_path / "bridge-stderr.log"),
                "--- bridge log ---",
                tail(self.tmp_path / "agybridge.log"),
            ]
        )


@asynccontextmanager
async def open_bridge(
    tmp_path: Path,
    env: Mapping[str, str],
    *,
    validator: WireValidator | None = None,
    shutdown_timeout_s: float = 10.0,
    command: Sequence[str] = BRIDGE_CMD,
) -> AsyncIterator[RawClient]:
    """Run the bridge (``command``) with ``env`` and yield a `RawClient` connected to it.

    On exit, a still-running bridge gets stdin EOF and ``shutdown_timeout_s`` to exit
    (then SIGKILL, and the test fails). The stdout reader is drained first.
    """
    validator = validator if validator is not None else WireValidator()
    stderr_path = tmp_path / "bridge-stderr.log"
    async with trio.open_nursery() as nursery:
        with stderr_path.open("ab") as stderr:
            process: trio.Process = await nursery.start(
                functools.partial(
                    trio.run_process,
                    list(command),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=stderr,
                    env=dict(env),
                    cwd=str(tmp_path),
                    check=False,
                )
            )
        client = RawClient(process, validator, tmp_path)
        nursery.start_soon(client._reader_task)
        try:
            yield client
        finally:
            with trio.CancelScope(shield=True):
                await _stop_bridge(client, shutdown_timeout_s)


async def _stop_bridge(client: RawClient, timeout_s: float) -> None:
    process = client.process
    if process.returncode is None:
        assert process.stdin is not None
        with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await process.stdin.aclose()
        with trio.move_on_after(timeout_s):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
            pytest.fail(
                f"the bridge did not exit within {timeout_s} s of stdin EOF\n"
                + client.diagnostics()
            )
    with trio.move_on_after(timeout_s):
        await client.wait_for(lambda: client.eof, "stdout EOF")


@attrs.define
class Harness:
    """One test's bridge environment: a tmp dir, a leftover marker, spawn helpers."""

    tmp_path: Path
    marker: str = attrs.Factory(new_marker)
    #: Environment every bridge of this test gets (before per-call extras).
    extra_env: dict[str, str] = attrs.Factory(dict)

    def env(self, scenario: str = "echo", **extra: str) -> dict[str, str]:
        return bridge_env(self.tmp_path, self.marker, scenario, **{**self.extra_env, **extra})

    def open_bridge(
        self, scenario: str = "echo", *, validator: WireValidator | None = None, **extra: str
    ) -> Any:
        """`open_bridge` with `env` (an async context manager yielding a `RawClient`)."""
        return open_bridge(self.tmp_path, self.env(scenario, **extra), validator=validator)

    async def run_cli(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        """``agybridge ARGS`` (e.g. ``sessions delete ID``) in this test's
        environment, run to its end, its output captured."""
        return await trio.run_process(
            [*BRIDGE_CMD, *args],
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
        )

    async def spawn_bridge(self, **extra: str) -> trio.Process:
        """The bridge as a bare process (stdin and stdout pipes, stderr appended to
        ``bridge-stderr.log``), for a test that drives the pipes itself; the
        caller owns it (kills and reaps it)."""
        with (self.tmp_path / "bridge-stderr.log").open("ab") as stderr:
            return await trio.lowlevel.open_process(
                list(BRIDGE_CMD),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=self.env(**extra),
                cwd=str(self.tmp_path),
            )

    def launches(self) -> list[dict[str, Any]]:
        """The fake agy's launch log entries (``FAKE_AGY_LAUNCH_LOG``)."""
        path = self.tmp_path / "agy-launches.ndjson"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def session_argvs(self) -> list[list[str]]:
        """argv of each stream-json agy launch (not discovery's ``models``/``agents``)."""
        return [e["argv"] for e in self.launches() if "argv" in e and "--input-format" in e["argv"]]

    async def assert_no_leftovers(self, timeout_s: float = 2.0) -> None:
        """Fail if any process carrying this test's marker is still running."""
        survivors = await wait_no_leftovers(self.marker, timeout_s)
        assert not survivors, (
            f"processes left running (killed now): {survivors}\n"
            f"--- bridge log ---\n{tail(self.tmp_path / 'agybridge.log')}"
        )

    def kill_leftovers(self) -> None:
        """Safety net for teardown: kill whatever still carries the marker."""
        _kill(leftover_processes(self.marker))


def assert_updates_valid(updates: Sequence[Any]) -> None:
    """Every update, as a session/update notification, matches the official ACP schema."""
    validator = WireValidator(load_schema())
    for update in updates:
        notification = models.SessionNotification(session_id="s", update=update)
        validator.feed(
            "a2c",
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": codec.unstructure(notification),
            },
        )
    assert validator.problems == [], validator.report()
