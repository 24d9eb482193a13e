"""The writer's write-now path: a sender facing an idle writer on a stream
that can write without waiting writes itself; what the pipe does not take is
finished by the writer before anything later, even across close_output; the
bytes on the wire are the lines handed over, whole and in order, whatever the
pipe accepts. No sleeps: waiting is done with `wait_all_tasks_blocked`."""

from __future__ import annotations

import os
import random

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agybridge.jsonrpc.writer import LineWriter, NowaitSendStream, PipeSendStream

TIMEOUT_S = 10


class Pipe(trio.abc.SendStream):
    """Takes ``room`` bytes per send_nowait (a list, one entry per call, then
    everything); send_all waits for ``gate``."""

    def __init__(self, room: list[int] | None = None) -> None:
        self.wire = bytearray()
        self.room = list(room or [])
        self.nowait_calls = 0
        self.send_all_calls = 0
        self.gate = trio.Event()
        self.gate.set()
        self.broken = False

    def send_nowait(self, data: bytes) -> int:
        if self.broken:
            raise trio.BrokenResourceError("gone")
        self.nowait_calls += 1
        take = min(self.room.pop(0), len(data)) if self.room else len(data)
        self.wire += data[:take]
        return take

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.send_all_calls += 1
        await self.gate.wait()
        self.wire += data

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def test_the_scripted_pipe_is_a_nowait_stream() -> None:
    assert isinstance(Pipe(), NowaitSendStream)


async def _started(nursery: trio.Nursery, pipe: Pipe, broken: list[str]) -> LineWriter:
    writer = LineWriter(pipe, broken.append)
    await nursery.start(writer.run)
    return writer


async def test_an_idle_writers_line_is_written_by_its_sender() -> None:
    pipe, broken = Pipe(), []
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            writer = await _started(nursery, pipe, broken)
            await writer.send(b"one\n")
            assert pipe.wire == b"one\n" and pipe.send_all_calls == 0  # no task switch
            await writer.flush()
            assert writer.lines_sent == 1
            writer.close()
    assert broken == []


async def test_the_rest_of_a_partial_write_goes_first_and_survives_close_output() -> None:
    pipe, broken = Pipe(room=[3]), []
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            writer = await _started(nursery, pipe, broken)
            pipe.gate = trio.Event()  # the rest will wait for the pipe
            await writer.send(b"first line\n")
            assert pipe.wire == b"fir" and writer.writing
            nursery.start_soon(writer.send, b"second\n")
            await trio.testing.wait_all_tasks_blocked()
            closed = trio.Event()

            async def close() -> None:
                await writer.close_output()
                closed.set()

            nursery.start_soon(close)
            await trio.testing.wait_all_tasks_blocked()
            assert not closed.is_set()  # the line being written is finished first
            pipe.gate.set()
            await closed.wait()
            await trio.testing.wait_all_tasks_blocked()
            assert pipe.wire == b"first line\n"  # whole; the later line was dropped
            writer.close()
    assert broken == []


async def test_a_broken_pipe_is_reported_once_and_later_lines_are_dropped() -> None:
    pipe, broken = Pipe(), []
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            writer = await _started(nursery, pipe, broken)
            pipe.broken = True
            await writer.send(b"lost\n")
            await writer.send(b"also lost\n")
            assert writer.broken and broken == ["the stream to the peer broke"]
            await writer.wait_broken()
            writer.close()
    assert pipe.wire == b""


_PAYLOAD = st.binary(max_size=20).map(lambda b: b.replace(b"\n", b""))


@settings(max_examples=60, deadline=None)
@given(
    payloads=st.lists(st.lists(_PAYLOAD, max_size=6), min_size=1, max_size=4),
    room=st.lists(st.integers(0, 30), max_size=12),
)
def test_the_wire_is_every_line_whole_and_in_each_senders_order(
    payloads: list[list[bytes]], room: list[int]
) -> None:
    """Several senders, a pipe that takes any amount per call: each line reaches
    the wire whole (never interleaved), each sender's lines in its order."""
    lines = [
        [b"%d:%d:" % (who, n) + payload + b"\n" for n, payload in enumerate(mine)]
        for who, mine in enumerate(payloads)
    ]

    async def main() -> bytes:
        pipe, broken = Pipe(room=room), []
        async with trio.open_nursery() as nursery:
            writer = await _started(nursery, pipe, broken)

            async def sender(mine: list[bytes]) -> None:
                for line in mine:
                    await writer.send(line)

            async with trio.open_nursery() as senders:
                for mine in lines:
                    senders.start_soon(sender, mine)
            await writer.flush()
            writer.close()
        assert broken == []
        return bytes(pipe.wire)

    wire = trio.run(main)
    got = [line + b"\n" for line in wire.split(b"\n")[:-1]]
    assert wire.endswith(b"\n") or not wire
    for who, mine in enumerate(lines):
        assert [line for line in got if line.startswith(b"%d:" % who)] == mine
    assert len(got) == sum(map(len, lines))


async def test_a_real_pipe_takes_writes_now_and_reports_a_closed_reader() -> None:
    read_fd, write_fd = os.pipe()
    stream = PipeSendStream(write_fd)
    assert stream.send_nowait(b"hello\n") == 6
    assert os.read(read_fd, 100) == b"hello\n"
    filled = 0
    while (n := stream.send_nowait(b"x" * 65536)) > 0:
        filled += n
    assert filled > 0 and stream.send_nowait(b"y") == 0  # full: nothing taken
    os.close(read_fd)
    with pytest.raises(trio.BrokenResourceError):
        stream.send_nowait(b"z")
    await stream.aclose()
    with pytest.raises(trio.ClosedResourceError):
        stream.send_nowait(b"z")


def _plain() -> trio.testing.MemorySendStream:
    """A stream that cannot write without waiting (a socket, say)."""
    stream = trio.testing.MemorySendStream()
    assert not isinstance(stream, NowaitSendStream)
    return stream


def _wire(sink: trio.testing.MemorySendStream | Pipe) -> bytes:
    if isinstance(sink, Pipe):
        return bytes(sink.wire)
    try:
        return bytes(sink.get_data_nowait())
    except trio.WouldBlock:  # nothing was written
        return b""


@pytest.mark.parametrize("stream", ["plain", "partial pipe"])
async def test_a_line_sent_as_the_idle_writer_is_closed_is_dropped_not_raised(
    stream: str,
) -> None:
    """close() wakes the parked writer, which has not run yet: a line sent in
    that moment is dropped (never raised, never half written) and
    close_output does not wait for it."""
    sink: trio.testing.MemorySendStream | Pipe = _plain() if stream == "plain" else Pipe(room=[3])
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            writer = LineWriter(sink, [].append)
            await nursery.start(writer.run)
            await trio.testing.wait_all_tasks_blocked()  # parked, nothing queued
            writer.close()
            await writer.send(b"late line\n")  # no checkpoint since close()
            assert writer.send_nowait(b"later line\n")
            await writer.close_output()
    assert _wire(sink) in (b"", b"late line\n", b"late line\nlater line\n")
    assert not writer.writing


@pytest.mark.parametrize("stream", ["plain", "partial pipe"])
async def test_a_line_sent_as_the_idle_writer_is_cancelled_is_not_raised(stream: str) -> None:
    """A writer cancelled while parked has not run yet when a sender (not
    cancelled itself, e.g. shielded) sends: the sender sees no WouldBlock,
    and the writer is not left "writing" a line nobody will finish."""
    sink: trio.testing.MemorySendStream | Pipe = _plain() if stream == "plain" else Pipe(room=[3])
    writer = LineWriter(sink, [].append)
    scope = trio.CancelScope()

    async def run_writer(*, task_status: trio.TaskStatus[None]) -> None:
        with scope:
            await writer.run(task_status=task_status)

    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(run_writer)
            await trio.testing.wait_all_tasks_blocked()  # parked, nothing queued
            scope.cancel()
            await writer.send(b"late line\n")  # no checkpoint since cancel()
        await writer.finished.wait()
    assert not writer.writing


@settings(max_examples=300, deadline=None)
@given(rng=st.randoms(use_true_random=False), pipe=st.booleans())
def test_senders_close_and_close_output_in_any_order_keep_the_wire_whole(
    rng: random.Random, pipe: bool
) -> None:
    """Senders (send, send_nowait, flush), close and close_output in any
    interleaving, a pipe taking any amount per call: no sender raises,
    close_output returns, the wire is whole lines, each sender's in order."""

    async def main() -> tuple[bytes, dict[int, list[bytes]]]:
        sink: trio.testing.MemorySendStream | Pipe = _plain()
        if pipe:
            sink = Pipe(room=[rng.randint(0, 12) for _ in range(rng.randint(0, 10))])
            sink.gate = trio.Event()
        writer = LineWriter(sink, [].append)
        handed: dict[int, list[bytes]] = {}

        async def sender(who: int, count: int) -> None:
            mine = handed[who] = []
            for n in range(count):
                line = b"%d:%d:%s\n" % (who, n, b"x" * rng.randint(0, 20))
                if rng.random() < 0.2:
                    if writer.send_nowait(line):
                        mine.append(line)
                else:
                    await writer.send(line)
                    mine.append(line)
                if rng.random() < 0.3:
                    await trio.lowlevel.checkpoint()
                if rng.random() < 0.1:
                    await writer.flush()

        async def closer() -> None:
            for _ in range(rng.randint(0, 8)):
                await trio.lowlevel.checkpoint()
            what = rng.choice(["close", "close_output", "both", "none"])
            if what in ("close_output", "both"):
                await writer.close_output()
            if what in ("close", "both"):
                writer.close()

        async def open_gate() -> None:
            for _ in range(rng.randint(0, 5)):
                await trio.lowlevel.checkpoint()
            if isinstance(sink, Pipe):
                sink.gate.set()

        with trio.fail_after(TIMEOUT_S):
            async with trio.open_nursery() as nursery:
                await nursery.start(writer.run)
                async with trio.open_nursery() as senders:
                    for who in range(rng.randint(1, 4)):
                        senders.start_soon(sender, who, rng.randint(0, 6))
                    senders.start_soon(closer)
                    senders.start_soon(open_gate)
                writer.close()
                await writer.close_output()
        return _wire(sink), handed

    wire, handed = trio.run(main)
    assert wire.endswith(b"\n") or not wire
    got = [line + b"\n" for line in wire.split(b"\n")[:-1]]
    assert all(line.count(b":") == 2 for line in got)
    for who, mine in handed.items():
        written = [line for line in got if line.startswith(b"%d:" % who)]
        assert written == mine[: len(written)]  # in order; later ones may be dropped
