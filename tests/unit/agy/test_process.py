"""AgyChild: spawning, reading, escalation and sweeps, with small real children.

Subprocess tests use the real clock; they wait for what they need (a line from
the child), never for a fixed time.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import trio
import trio.testing

from agybridge.agy import (
    AgyChild,
    AgySpawnError,
    ChildEvent,
    ChildEvents,
    ChildExited,
    ChildMessage,
    ChildStderr,
    EscalationPolicy,
    InitEvent,
    MalformedLine,
    ResultEvent,
    StderrKind,
)

POLICY = EscalationPolicy(sigint_grace_s=1.0, sigterm_grace_s=1.0)


def marked_processes(marker: str) -> list[int]:
    """Pids of live processes whose environment carries ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if state != "Z" and f"TEST_MARKER={marker}".encode() in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "child.py"
    path.write_text(textwrap.dedent(body))
    return [sys.executable, str(path)]


async def collect(
    child: AgyChild, receive: trio.MemoryReceiveChannel[ChildMessage]
) -> list[ChildMessage]:
    """Every message until ChildExited, batches (ChildEvents) unpacked in order."""
    messages: list[ChildMessage] = []
    async for message in receive:
        if isinstance(message, ChildEvents):
            messages.extend(message.events)
        else:
            messages.append(message)
        if isinstance(message, ChildExited):
            return messages
    raise AssertionError("no ChildExited")


def make_child(
    argv: list[str], marker: str, **kw: object
) -> tuple[AgyChild, trio.MemoryReceiveChannel[ChildMessage]]:
    buffer: int = kw.pop("buffer", 1000)  # type: ignore[assignment]
    send, receive = trio.open_memory_channel[ChildMessage](buffer)
    child = AgyChild(
        argv=argv,
        cwd="/",
        env={**os.environ, "TEST_MARKER": marker},
        incarnation=1,
        policy=kw.pop("policy", POLICY),  # type: ignore[arg-type]
        max_line_bytes=kw.pop("max_line_bytes", 64 * 2**20),  # type: ignore[arg-type]
        messages=send,
    )
    return child, receive


INIT = '{"event":"init","conversation_id":"c1","init":{"cwd":"/","tools":[]}}'


async def test_reads_events_stderr_and_exit(tmp_path: Path) -> None:
    """stdout lines become events, stderr lines are classified, then one ChildExited."""
    marker = uuid.uuid4().hex
    argv = script(
        tmp_path,
        f"""
        import sys
        print('{INIT}', flush=True)
        print('not json', flush=True)
        print('jetski: no output produced — a tool required the "command" permission '
              'that headless mode cannot prompt for, so it was auto-denied.', file=sys.stderr)
        line = sys.stdin.readline()
        print('{{"event":"result","result":{{"status":"SUCCESS","response":"ok"}}}}', flush=True)
    """,
    )
    child, receive = make_child(argv, marker)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(child.run)
            await child.send_user("hi")
            messages = await collect(child, receive)
    events = [m.event for m in messages if isinstance(m, ChildEvent)]
    assert isinstance(events[0], InitEvent) and events[0].conversation_id == "c1"
    assert isinstance(events[1], MalformedLine)
    assert isinstance(events[2], ResultEvent)
    stderr = [m.line for m in messages if isinstance(m, ChildStderr)]
    assert [s.kind for s in stderr] == [StderrKind.SOFT_DENY]
    exited = messages[-1]
    assert isinstance(exited, ChildExited) and exited.returncode == 0 and not exited.killed


async def test_missing_binary_is_a_spawn_error(tmp_path: Path) -> None:
    """A binary that does not exist fails the start with a clear message."""
    child, _ = make_child([str(tmp_path / "no-such-agy")], "x")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            with pytest.raises(AgySpawnError, match=r"could not start agy .* No such file"):
                await nursery.start(child.run)


async def test_escalation_and_sweep(tmp_path: Path) -> None:
    """A child ignoring SIGINT gets SIGTERM; its group member and a grandchild in
    a process group of its own are swept, so nothing survives."""
    marker = uuid.uuid4().hex
    argv = script(
        tmp_path,
        f"""
        import os, signal, subprocess, sys
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        subprocess.Popen(["sleep", "300"])                          # same group
        subprocess.Popen(["sleep", "300"], start_new_session=True)  # own group
        print('{INIT}', flush=True)
        signal.pause()
    """,
    )
    child, receive = make_child(argv, marker)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(child.run)
            first = await receive.receive()
            assert isinstance(first, ChildEvents)
            # execve makes a process's environment readable a moment after its
            # parent's Popen returns (the exec pipe closes first): wait for /proc.
            with trio.fail_after(5):
                while len(marked_processes(marker)) < 3:  # noqa: ASYNC110 - /proc is not an event
                    await trio.sleep(0.01)
            assert len(marked_processes(marker)) == 3
            started = trio.current_time()
            child.kill("test")
            messages = await collect(child, receive)
            elapsed = trio.current_time() - started
    exited = messages[-1]
    assert isinstance(exited, ChildExited) and exited.killed
    assert exited.returncode == -signal.SIGTERM
    # SIGINT was ignored for its grace; SIGTERM then worked at once.
    assert POLICY.sigint_grace_s <= elapsed < POLICY.sigint_grace_s + POLICY.sigterm_grace_s + 1
    assert marked_processes(marker) == []


async def test_sigkill_when_everything_is_ignored(tmp_path: Path) -> None:
    """SIGINT and SIGTERM both ignored: SIGKILL ends it after both graces."""
    marker = uuid.uuid4().hex
    argv = script(
        tmp_path,
        f"""
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print('{INIT}', flush=True)
        signal.pause()
    """,
    )
    policy = EscalationPolicy(sigint_grace_s=0.2, sigterm_grace_s=0.2)
    child, receive = make_child(argv, marker, policy=policy)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(child.run)
            await receive.receive()
            child.kill("test")
            messages = await collect(child, receive)
    exited = messages[-1]
    assert isinstance(exited, ChildExited) and exited.returncode == -signal.SIGKILL
    assert marked_processes(marker) == []


async def test_leader_exit_sweeps_group_holding_the_pipe(tmp_path: Path) -> None:
    """A leader that exits while a group member holds stdout open: the sweep
    kills the member, so EOF arrives and the child is reported exited."""
    marker = uuid.uuid4().hex
    argv = script(
        tmp_path,
        f"""
        import subprocess
        subprocess.Popen(["sleep", "300"])  # inherits stdout: would block EOF
        print('{INIT}', flush=True)
    """,
    )
    child, receive = make_child(argv, marker)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(child.run)
            messages = await collect(child, receive)
    assert isinstance(messages[-1], ChildExited) and messages[-1].returncode == 0
    assert marked_processes(marker) == []


async def test_cancelling_run_kills_the_child(tmp_path: Path) -> None:
    """Cancelling the owner still reaps the child (shielded, bounded escalation)."""
    marker = uuid.uuid4().hex
    argv = script(
        tmp_path,
        f"""
        import signal
        print('{INIT}', flush=True)
        signal.pause()
    """,
    )
    child, receive = make_child(argv, marker)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(child.run)
            await receive.receive()
            nursery.cancel_scope.cancel()
    assert child.exited.is_set()
    assert marked_processes(marker) == []


async def test_huge_line_and_over_limit_line(tmp_path: Path) -> None:
    """A 10 MB line passes whole; a line over the limit becomes one
    MalformedLine and the lines after it still arrive."""
    marker = uuid.uuid4().hex
    argv = script(
        tmp_path,
        """
        import json, sys
        big = "x" * (10 * 2**20)
        sys.stdout.write(json.dumps({"event": "step_update", "step_update": {
            "step_index": 1, "state": "DONE", "step_type": "agent_response",
            "text_delta": big}}) + "\\n")
        sys.stdout.write("y" * (12 * 2**20) + "\\n")
        sys.stdout.write('{"event":"result","result":{"status":"SUCCESS"}}\\n')
        sys.stdout.flush()
    """,
    )
    child, receive = make_child(argv, marker, max_line_bytes=11 * 2**20)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(child.run)
            messages = await collect(child, receive)
    events = [m.event for m in messages if isinstance(m, ChildEvent)]
    assert len(events) == 3
    first = events[0]
    assert not isinstance(first, MalformedLine | InitEvent)
    assert len(getattr(first, "step_update").text_delta) == 10 * 2**20  # noqa: B009
    assert isinstance(events[1], MalformedLine) and "11 MiB" in events[1].reason
    assert isinstance(events[2], ResultEvent)


def _bytes_written(pid: int) -> int:
    """``wchar`` of ``/proc/<pid>/io``: bytes the process has written so far."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        key, _, value = line.partition(": ")
        if key == "wchar":
            return int(value)
    raise AssertionError(f"no wchar for {pid}")


def _delta_line(n: int) -> str:
    return (
        '{"event":"step_update","step_update":{"step_index":2,"state":"ACTIVE",'
        f'"step_type":"agent_response","text_delta":"d{n} "}}}}'
    )


async def test_one_read_travels_as_one_batch_in_order(tmp_path: Path) -> None:
    """Lines written in one burst arrive as ChildEvents batches (fewer hops than
    lines), every line once, in the order written."""
    marker = uuid.uuid4().hex
    count = 2000
    argv = script(
        tmp_path,
        f"""
        import os
        template = {_delta_line(0).replace("d0 ", "%s")!r}
        lines = [template % f"d{{n}} " for n in range({count})]
        data = ("\\n".join(lines) + "\\n").encode()
        while data:
            data = data[os.write(1, data):]
    """,
    )
    child, receive = make_child(argv, marker, max_line_bytes=2**20)
    raw: list[ChildMessage] = []
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(child.run)
            async for message in receive:
                raw.append(message)
                if isinstance(message, ChildExited):
                    break
    batches = [m for m in raw if isinstance(m, ChildEvents)]
    assert batches and len(raw) < count // 10
    # Every stdout read is one batch, however many lines it held.
    assert all(isinstance(m, ChildEvents | ChildExited | ChildStderr) for m in raw)
    events = [event for m in raw if isinstance(m, ChildEvents) for event in m.events]
    deltas = [getattr(e.event, "step_update").text_delta for e in events]  # noqa: B009
    assert deltas == [f"d{n} " for n in range(count)]


async def test_a_slow_owner_stops_the_reader(tmp_path: Path) -> None:
    """Nobody takes the child's messages: the reader stops reading, so agy
    blocks on its full pipe instead of the bridge buffering its output."""
    marker = uuid.uuid4().hex
    total = 32 * 2**20
    argv = script(
        tmp_path,
        f"""
        import os
        line = b'{_delta_line(0)}' + b"\\n"
        chunk = line * (2**16 // len(line))
        written = 0
        while written < {total}:
            written += os.write(1, chunk)
    """,
    )
    child, receive = make_child(argv, marker, max_line_bytes=2**20, buffer=1)
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            await nursery.start(child.run)
            await receive.receive()
            # Whatever the child has written by now: the pipe (64 KiB, or up to
            # 1 MiB if enlarged) plus a few reads held in the channel and tasks.
            # Without backpressure it would be everything (32 MiB).
            await trio.testing.wait_all_tasks_blocked()
            assert child.pid is not None
            assert _bytes_written(child.pid) < 4 * 2**20
            child.kill("test")
            async for message in receive:
                if isinstance(message, ChildExited):
                    break
    assert marked_processes(marker) == []


async def test_stdin_lines_arrive_whole_in_order_then_eof(tmp_path: Path) -> None:
    """User turns written at once or, past what the pipe takes (64 KiB; these
    are bigger), by the writer: every line arrives whole and in order, and
    closing stdin comes after the last one."""
    marker = uuid.uuid4().hex
    argv = script(
        tmp_path,
        f"""
        import hashlib, json, sys
        print('{INIT}', flush=True)
        sys.stdin.readline()  # the first turn, read at once
        for line in sys.stdin:
            text = json.loads(line)["message"]["content"]
            digest = hashlib.sha256(text.encode()).hexdigest()[:12]
            print(json.dumps({{"event": "result", "result": {{"status": "SUCCESS",
                  "response": str(len(text)) + ":" + digest}}}}), flush=True)
        print(json.dumps({{"event": "result", "result": {{"status": "SUCCESS",
              "response": "eof"}}}}), flush=True)
    """,
    )
    texts = [("x" * 10)] + [chr(ord("a") + n) * (n * 50_000 + 7) for n in range(6)]
    child, receive = make_child(argv, marker)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(child.run)
            for text in texts:
                await child.send_user(text)
            child.close_stdin()
            with pytest.raises(trio.ClosedResourceError):
                await child.send_user("after close")
            messages = await collect(child, receive)
    responses = [
        m.event.result.response
        for m in messages
        if isinstance(m, ChildEvent) and isinstance(m.event, ResultEvent)
    ]
    expected = [f"{len(t)}:{hashlib.sha256(t.encode()).hexdigest()[:12]}" for t in texts[1:]]
    assert responses == [*expected, "eof"]
    assert marked_processes(marker) == []
