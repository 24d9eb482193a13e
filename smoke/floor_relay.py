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

    python floor_relay.py [--trio] PROMPT AGY [AGY_ARGS...]
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

_SEPARATORS = (",", ":")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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
        step = event.get("step_update")
        if isinstance(step, dict) and isinstance(step.get("text_delta"), str):
            update = {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": step["text_delta"]},
            }
            message = {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": "floor", "update": update},
            }
            batch.append(json.dumps(message, ensure_ascii=False, separators=_SEPARATORS))
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


async def _main_trio(argv: list[str]) -> int:
    """`main` on trio: the same protocol, the same relay per read."""
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


if __name__ == "__main__":
    sys.exit(main(sys.argv))
