"""The peer's writer: batches what is waiting into one write, in order, bounded,
and pushes back on senders while the client does not read.

A scripted send stream records every ``send_all`` and blocks it until the test
opens its gate, so "what was waiting when the writer came back" is exact. No sleeps:
waiting is done with `wait_all_tasks_blocked`.
"""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from agybridge.jsonrpc import Peer
from agybridge.jsonrpc import writer as writer_module
from agybridge.jsonrpc.messages import encode_message, notification_message

from .test_jsonrpc_peer import Recorder

TIMEOUT_S = 10


class GatedSend(trio.abc.SendStream):
    """Records each write; every write waits for ``gate`` (replace it to close again)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.gate = trio.Event()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.gate.wait()
        self.writes.append(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        await self.gate.wait()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


def _lines(writes: list[bytes]) -> list[Any]:
    return [json.loads(line) for data in writes for line in data.splitlines()]


async def _idle_peer(nursery: trio.Nursery, send: GatedSend) -> Peer:
    _, receive = trio.testing.memory_stream_one_way_pair()
    peer = Peer(receive, send, Recorder())
    await nursery.start(peer.run)
    return peer


async def test_waiting_lines_go_out_in_one_write_in_order() -> None:
    """While one write is stuck, every notification handed over meanwhile goes
    out in the next single write, in the order sent; nobody returns early."""
    send = GatedSend()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer = await _idle_peer(nursery, send)
            returned: list[int] = []

            async def notify(n: int) -> None:
                await peer.notify("n", [n])
                returned.append(n)

            for n in range(20):
                nursery.start_soon(notify, n)
                await trio.testing.wait_all_tasks_blocked()
            # The writer holds the first line; everyone else waits for it (backpressure).
            assert returned == [0]
            send.gate.set()
            await trio.testing.wait_all_tasks_blocked()
            assert len(send.writes) == 2
            assert [m["params"] for m in _lines(send.writes)] == [[n] for n in range(20)]
            assert peer.statistics().messages_sent == 20
            nursery.cancel_scope.cancel()


async def test_a_batch_is_bounded() -> None:
    """A burst larger than the batch bound is split over several writes, each
    at most the bound plus the item that crossed it."""
    send = GatedSend()
    item = 2**14
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer = await _idle_peer(nursery, send)
            for n in range(60):
                nursery.start_soon(peer.notify, "n", ["x" * item, n])
                await trio.testing.wait_all_tasks_blocked()
            send.gate.set()
            await trio.testing.wait_all_tasks_blocked()
            assert len(send.writes) > 2
            assert all(len(w) < writer_module.WRITE_BATCH_BYTES + 2 * item for w in send.writes)
            assert [m["params"][1] for m in _lines(send.writes)] == list(range(60))
            nursery.cancel_scope.cancel()


async def test_flush_returns_once_the_batch_before_it_is_written() -> None:
    """flush() taken in the same batch as earlier lines returns only after the
    write holding them has completed."""
    send = GatedSend()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            peer = await _idle_peer(nursery, send)
            nursery.start_soon(peer.notify, "first", None)
            await trio.testing.wait_all_tasks_blocked()
            more = b"".join(
                encode_message(notification_message("more", params)) for params in (1, 2, 3)
            )
            nursery.start_soon(peer.send_encoded, more)
            await trio.testing.wait_all_tasks_blocked()
            flushed = trio.Event()

            async def flush() -> None:
                await peer.flush()
                flushed.set()

            nursery.start_soon(flush)
            await trio.testing.wait_all_tasks_blocked()
            # Let the first write through, then hold the second (more + marker).
            send.gate.set()
            await trio.testing.wait_all_tasks_blocked()
            assert flushed.is_set()
            assert [m["method"] for m in _lines(send.writes)] == ["first", "more", "more", "more"]

            send.gate = trio.Event()
            nursery.start_soon(peer.notify, "later", None)
            await trio.testing.wait_all_tasks_blocked()
            flushed = trio.Event()
            nursery.start_soon(flush)
            await trio.testing.wait_all_tasks_blocked()
            assert not flushed.is_set()  # "later" is still being written
            send.gate.set()
            await flushed.wait()
            assert _lines(send.writes)[-1]["method"] == "later"
            nursery.cancel_scope.cancel()
