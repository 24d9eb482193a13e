"""The floor a Python bridge cannot beat, for ``bench_floor.py`` (stdlib only).

Spawns agy (argv after the prompt), waits for its ``init``, prints ``{"ready":true}``
and waits for one line on stdin; then sends the prompt and relays the turn: one
``json.loads`` per agy line, one ``json.dumps`` of an ACP ``session/update``
notification per text delta, every line a read chunk produced written in one
``os.write``; agy's ``result`` becomes a prompt response (id 1). Each further stdin
line runs the same prompt again as one more turn; stdin EOF (sent once the caller has
read its peak RSS) closes agy's stdin, reaps agy, and prints ``{"cpu_s": ...}`` (its
own CPU time from each prompt to its result, summed over the turns) on stderr.

With ``--trio`` first, the same relay runs on trio (one task reads agy's stdout, one
the caller's "go" lines): what trio's wake-ups alone cost a bridge, beside the floor.

With ``--shape`` first, the trio relay takes the shape the architecture gives the bridge,
with none of its logic: each caller line is a JSON-RPC ``session/prompt`` read by a
reader task and answered by a task of its own; agy's stdout is read by one task and
mapped by a session task (the hop between them is a queue the session task parks on);
each finished turn is one SQLite commit (two journal rows and the session's row) in a
``trio.to_thread`` worker before the answer. What the shape alone costs, beside the
floor.

    python floor_relay.py [--trio | --shape] PROMPT AGY [AGY_ARGS...]
"""

from __future__ import annotations

import collections
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import time
from typing import Any

_SEPARATORS = (",", ":")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _text_delta(event: dict[str, Any]) -> str | None:
    step = event.get("step_update")
    if isinstance(step, dict) and isinstance(step.get("text_delta"), str):
        return str(step["text_delta"])
    return None


def _chunk_line(text: str) -> str:
    """The ``session/update`` notification carrying one text delta."""
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    message = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "floor", "update": update},
    }
    return json.dumps(message, ensure_ascii=False, separators=_SEPARATORS)


def _relayed(buffer: bytes, chunk: bytes | bytearray) -> tuple[bytes, bytes, bool]:
    """(what to write, the partial line kept, the turn's result seen) for one read."""
    lines = (buffer + chunk).split(b"\n")
    buffer = lines.pop()
    batch = []
    done = False
    for line in lines:
        if not line.strip():
            continue
        event = json.loads(line)
        delta = _text_delta(event)
        if delta is not None:
            batch.append(_chunk_line(delta))
        elif event.get("event") == "result":
            reply = {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}
            batch.append(json.dumps(reply, separators=_SEPARATORS))
            done = True
    return ("\n".join(batch) + "\n").encode() if batch else b"", buffer, done


def _relay(stdout: int, out: int, buffer: bytes) -> bytes:
    """One turn, up to agy's result; returns the bytes read after the result's line."""
    while True:
        chunk = os.read(stdout, 2**16)
        if not chunk:
            raise SystemExit("floor relay: agy ended before its result")
        data, buffer, done = _relayed(buffer, chunk)
        if data:
            _write_all(out, data)
        if done:
            return buffer


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--trio"]:
        import trio  # noqa: PLC0415 - the blocking floor stays stdlib only

        return trio.run(_main_trio, [argv[0], *argv[2:]])
    if argv[1:2] == ["--shape"]:
        import trio  # noqa: PLC0415

        return trio.run(_main_shape, [argv[0], *argv[2:]])
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    prompt, agy = argv[1], argv[2:]
    # Unbuffered: the init line is read byte by byte, nothing else is read ahead.
    proc = subprocess.Popen(agy, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout.fileno()
    first = proc.stdout.readline()  # agy's init, printed before it reads stdin
    if not first:
        return 1
    _write_all(1, b'{"ready":true}\n')
    user = json.dumps({"event": "user", "message": {"content": prompt}}).encode() + b"\n"
    cpu_s = 0.0
    buffer = b""
    while sys.stdin.buffer.readline():  # EOF: the caller has read our peak RSS
        started = time.process_time()
        _write_all(proc.stdin.fileno(), user)
        buffer = _relay(stdout, 1, buffer)
        cpu_s += time.process_time() - started
    proc.stdin.close()
    proc.wait()
    print(json.dumps({"cpu_s": cpu_s}), file=sys.stderr)
    return 0


async def _start_on_trio(argv: list[str]) -> int | tuple[str, Any, Any, Any, bytes]:
    """(prompt, agy, our stdout, the caller's stdin, what agy wrote after its
    init) once agy is up, else the exit status."""
    import trio  # noqa: PLC0415

    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    prompt, agy = argv[1], argv[2:]
    proc = await trio.lowlevel.open_process(agy, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    out = trio.lowlevel.FdStream(os.dup(1))
    callers = trio.lowlevel.FdStream(os.dup(0))
    buffer = b""
    while b"\n" not in buffer:  # agy's init, printed before it reads stdin
        chunk = await proc.stdout.receive_some()
        if not chunk:
            return 1
        buffer += chunk
    buffer = buffer.split(b"\n", 1)[1]
    return prompt, proc, out, callers, buffer


async def _main_trio(argv: list[str]) -> int:
    """`main` on trio: the same protocol, the same relay per read."""
    import trio  # noqa: PLC0415

    up = await _start_on_trio(argv)
    if isinstance(up, int):
        return up
    prompt, proc, out, callers, buffer = up
    await out.send_all(b'{"ready":true}\n')
    user = json.dumps({"event": "user", "message": {"content": prompt}}).encode() + b"\n"
    cpu_s = 0.0
    send_go, receive_go = trio.open_memory_channel[None](math.inf)

    async def read_callers() -> None:
        async with send_go:
            while chunk := await callers.receive_some():
                for _ in range(chunk.count(b"\n")):
                    send_go.send_nowait(None)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_callers)
        async for _ in receive_go:  # EOF: the caller has read our peak RSS
            started = time.process_time()
            await proc.stdin.send_all(user)
            done = False
            while not done:
                chunk = await proc.stdout.receive_some()
                if not chunk:
                    raise SystemExit("floor relay: agy ended before its result")
                data, buffer, done = _relayed(buffer, chunk)
                if data:
                    await out.send_all(data)
            cpu_s += time.process_time() - started
    await proc.stdin.aclose()
    await proc.wait()
    print(json.dumps({"cpu_s": cpu_s}), file=sys.stderr)
    return 0


_JOURNAL_SCHEMA = (
    "CREATE TABLE sessions (id TEXT PRIMARY KEY, updated_at TEXT NOT NULL, turns INTEGER);"
    "CREATE INDEX sessions_updated ON sessions (updated_at);"
    "CREATE TABLE journal (session_id TEXT, turn INTEGER, idx INTEGER, kind TEXT,"
    " text TEXT, created_at TEXT, PRIMARY KEY (session_id, turn, idx));"
)


def _open_journal(path: str) -> Any:
    import sqlite3  # noqa: PLC0415

    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.executescript(_JOURNAL_SCHEMA)
    conn.execute("INSERT INTO sessions VALUES ('floor', '', 0)")
    return conn


def _commit_turn(conn: Any, turn: int, prompt: str, reply: str) -> None:
    """The bridge's per-turn write, reduced to its statements."""
    now = datetime.datetime.now(datetime.UTC).isoformat()
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT INTO journal VALUES ('floor', ?, ?, ?, ?, ?)",
        [(turn, 0, "user", prompt, now), (turn, 1, "agent", reply, now)],
    )
    conn.execute("UPDATE sessions SET updated_at = ?, turns = ? WHERE id = 'floor'", (now, turn))
    conn.execute("COMMIT")


async def _main_shape(argv: list[str]) -> int:
    """The bridge's task shape around the floor's relay (see the module docstring)."""
    import tempfile  # noqa: PLC0415

    import trio  # noqa: PLC0415

    up = await _start_on_trio(argv)
    if isinstance(up, int):
        return up
    prompt, proc, out, callers, buffer = up
    agy_stdin, agy_stdout = proc.stdin, proc.stdout
    scratch = tempfile.mkdtemp()
    conn = await trio.to_thread.run_sync(_open_journal, os.path.join(scratch, "floor.db"))
    await out.send_all(b'{"ready":true}\n')
    user = json.dumps({"event": "user", "message": {"content": prompt}}).encode() + b"\n"
    cpu_s = 0.0
    # The session's queue: agy's reads and prompts, in order; the session task parks on it.
    inbox: collections.deque[Any] = collections.deque()
    parked: list[trio.lowlevel.Task] = []

    def post(item: Any) -> None:
        inbox.append(item)
        if parked:
            trio.lowlevel.reschedule(parked.pop())

    async def get() -> Any:
        while not inbox:
            parked.append(trio.lowlevel.current_task())
            await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.SUCCEEDED)
        return inbox.popleft()

    async def read_agy() -> None:
        pending = buffer
        while chunk := await agy_stdout.receive_some():
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            post([json.loads(line) for line in lines if line.strip()])

    async def session() -> None:
        turn = 0
        while True:
            item = await get()
            if not isinstance(item, trio.Event):
                continue  # agy's lines between turns: none in an echo turn
            await agy_stdin.send_all(user)
            texts = []
            done = False
            while not done:
                events = await get()
                batch = []
                for event in events:
                    delta = _text_delta(event)
                    if delta is not None:
                        texts.append(delta)
                        batch.append(_chunk_line(delta))
                    elif event.get("event") == "result":
                        done = True
                if batch:
                    await out.send_all(("\n".join(batch) + "\n").encode())
            turn += 1
            await trio.to_thread.run_sync(_commit_turn, conn, turn, prompt, "".join(texts))
            item.set()

    async def answer(request: dict[str, Any]) -> None:
        nonlocal cpu_s
        started = time.process_time()
        answered = trio.Event()
        post(answered)
        await answered.wait()
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": {"stopReason": "end_turn"}}
        await out.send_all(json.dumps(reply, separators=_SEPARATORS).encode() + b"\n")
        cpu_s += time.process_time() - started

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_agy)
        nursery.start_soon(session)
        pending = b""
        while chunk := await callers.receive_some():  # EOF: the caller has read our RSS
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for line in lines:
                if line.strip():
                    nursery.start_soon(answer, json.loads(line))
        await proc.stdin.aclose()
        await proc.wait()
        nursery.cancel_scope.cancel()
    conn.close()
    shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"cpu_s": cpu_s}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
