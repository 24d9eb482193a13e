"""Two clients of one daemon opening, closing and deleting the same stored
session at once (issue: lifecycle across connections).

Each connection orders a session's load/resume/close/delete in wire order
(``agent/ordering.py``), but the sessions and the store are shared, so two
connections' requests must each take effect as a whole: whatever the
interleaving, the outcome is one the two requests allow in some order
("load then delete": the delete closes the loaded session; "delete then
load": the load fails with the unknown-session error).

The daemon runs in-process (``Daemon.run`` on a real Unix socket, the real
fake agy as its children) over a store whose calls the test can hold at a
gate, so one client's request is parked at an exact point while the other's
runs. Nothing waits on the clock: a parked request is released once the
other one has done all it can (every task blocked, no store call running).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
import trio
import trio.testing

from agybridge.daemon.listener import own_socket_path
from agybridge.daemon.supervisor import Daemon
from agybridge.store import AsyncStore, Store

from ..acp_wire import wait_no_leftovers
from .test_internal_error import LineClient, echo_bridge

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
UNKNOWN_SESSION = -32002
_T = TypeVar("_T")


@attrs.define
class Gate:
    """A store call held until the test opens the gate."""

    reached: trio.Event = attrs.Factory(trio.Event)
    opened: trio.Event = attrs.Factory(trio.Event)


class GatedStore(AsyncStore):
    """The daemon's store; the first call of a held method waits at its gate."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self._gates: dict[str, Gate] = {}
        self._running = 0
        self._idle = trio.Event()

    def hold(self, method: str) -> Gate:
        gate = self._gates[method] = Gate()
        return gate

    @property
    def busy(self) -> bool:
        """A store call is running in the worker thread (or waits for it)."""
        return self._running > 0

    async def wait_idle(self) -> None:
        if self._running:
            await self._idle.wait()

    async def _at_gate(self, method: str) -> None:
        gate = self._gates.pop(method, None)
        if gate is not None:
            gate.reached.set()
            await gate.opened.wait()

    async def _counted(self, call: Callable[[], Awaitable[_T]]) -> _T:
        self._running += 1
        try:
            return await call()
        finally:
            self._running -= 1
            if not self._running:
                self._idle.set()
                self._idle = trio.Event()

    async def _read(self, fn: Callable[[Store], _T]) -> _T:
        return await self._counted(lambda: super(GatedStore, self)._read(fn))

    async def _write(self, fn: Callable[[Store], _T]) -> _T:
        return await self._counted(lambda: super(GatedStore, self)._write(fn))

    async def get_session(self, session_id: str) -> Any:
        await self._at_gate("get_session")
        return await super().get_session(session_id)

    async def journal(self, session_id: str) -> Any:
        await self._at_gate("journal")
        return await super().journal(session_id)

    async def upsert_session(self, record: Any) -> None:
        await self._at_gate("upsert_session")
        await super().upsert_session(record)

    async def delete_session(self, session_id: str) -> bool:
        await self._at_gate("delete_session")
        return await super().delete_session(session_id)


@attrs.define
class Request:
    """A request sent in a task of its own; ``answer`` once it is answered."""

    done: trio.Event = attrs.Factory(trio.Event)
    answer: dict[str, Any] = attrs.Factory(dict)


@attrs.define
class TwoClients:
    daemon: Daemon
    store: GatedStore
    a: LineClient
    b: LineClient
    cwd: Path
    nursery: trio.Nursery

    def send(self, client: LineClient, method: str, params: dict[str, Any]) -> Request:
        request = Request()

        async def run() -> None:
            request.answer = await client.request(method, params)
            request.done.set()

        self.nursery.start_soon(run)
        return request

    def load(self, client: LineClient, session_id: str) -> Request:
        params = {"sessionId": session_id, "cwd": str(self.cwd), "mcpServers": []}
        return self.send(client, "session/load", params)

    def delete(self, client: LineClient, session_id: str) -> Request:
        return self.send(client, "session/delete", {"sessionId": session_id})

    async def race(
        self, held: str, first: Callable[[], Request], second: Callable[[], Request]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """``first`` parked at its store call ``held`` while ``second`` runs as
        far as it can, then ``first`` goes on: both answers."""
        gate = self.store.hold(held)
        parked = first()
        await gate.reached.wait()
        other = second()
        await self.settle(other)
        gate.opened.set()
        return await _answered(parked), await _answered(other)

    async def settle(self, request: Request) -> None:
        """Until ``request`` is answered or can go no further: every task is
        blocked and no store call is running."""
        while not request.done.is_set():
            await trio.testing.wait_all_tasks_blocked()
            if request.done.is_set() or not self.store.busy:
                return
            await self.store.wait_idle()

    async def stored_session(self) -> str:
        """A session created by client A and closed: in the store, not live."""
        new = await self.a.request("session/new", {"cwd": str(self.cwd), "mcpServers": []})
        session_id: str = new["result"]["sessionId"]
        closed = await self.a.request("session/close", {"sessionId": session_id})
        assert closed["result"] == {}, closed
        assert self.daemon.manager.get(session_id) is None
        assert await self.store.get_session(session_id) is not None
        return session_id

    async def listed(self) -> list[str]:
        listing = await self.b.request("session/list", {})
        return [s["sessionId"] for s in listing["result"]["sessions"]]

    async def assert_deleted(self, session_id: str) -> None:
        """Gone everywhere: not live, not stored, not listed."""
        assert self.daemon.manager.get(session_id) is None
        assert await self.store.get_session(session_id) is None
        assert session_id not in await self.listed()


@asynccontextmanager
async def _two_clients(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[TwoClients]:
    """A daemon in-process and two initialized clients of it; when the block
    ends the daemon is stopped and no agy is left."""
    settings, marker = echo_bridge(tmp_path, monkeypatch)
    # A Unix socket path must fit in 108 bytes: pytest's tmp_path may not.
    socket_dir = Path(tempfile.mkdtemp(prefix="agyb-"))
    store = GatedStore(Store.open(tmp_path / "sessions.db"))
    try:
        daemon = Daemon(settings, socket_dir / "agybridge.sock", store)
        with trio.fail_after(TIMEOUT_S):
            async with (
                own_socket_path(daemon.socket_path) as listener,
                trio.open_nursery() as nursery,
            ):
                ready = trio.Event()
                nursery.start_soon(daemon.run, listener, ready)
                await ready.wait()
                clients = []
                for _ in range(2):
                    stream = await trio.open_unix_socket(str(daemon.socket_path))
                    client = LineClient(stream)  # type: ignore[arg-type]
                    init = {"protocolVersion": 1, "clientCapabilities": {}}
                    await client.request("initialize", init)
                    clients.append(client)
                try:
                    yield TwoClients(daemon, store, *clients, tmp_path, nursery)
                finally:
                    daemon.stop(2.0)
                    for client in clients:
                        await client.stream.aclose()
    finally:
        await store.aclose()
        shutil.rmtree(socket_dir, ignore_errors=True)
    assert await wait_no_leftovers(marker) == []


async def _answered(request: Request) -> dict[str, Any]:
    await request.done.wait()
    return request.answer


@pytest.mark.parametrize(
    ("held", "parked"),
    [
        # A's load has read the record (held before the journal, so before
        # the open); B's delete closes nothing live and deletes the row.
        pytest.param("journal", "load", id="delete-after-the-load-read-the-store"),
        # B's delete has closed nothing live, not yet deleted the row; A's
        # load reads that row and opens the session.
        pytest.param("delete_session", "delete", id="load-inside-the-delete"),
    ],
)
async def test_a_delete_racing_another_clients_load_ends_as_if_one_came_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: str, parked: str
) -> None:
    """Load then delete (the delete closes the loaded session) or delete then
    load (unknown session): either way the session is not live, stored or
    listed after, never live in A while deleted, nor stored again."""
    async with _two_clients(tmp_path, monkeypatch) as bridge:
        session_id = await bridge.stored_session()

        def load() -> Request:
            return bridge.load(bridge.a, session_id)

        def delete() -> Request:
            return bridge.delete(bridge.b, session_id)

        if parked == "load":
            loaded, deleted = await bridge.race(held, load, delete)
        else:
            deleted, loaded = await bridge.race(held, delete, load)
        assert deleted["result"] == {}, deleted
        assert "result" in loaded or loaded["error"]["code"] == UNKNOWN_SESSION, loaded
        await bridge.assert_deleted(session_id)


async def test_a_close_while_a_load_starts_agy_leaves_the_session_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B's close arrives while A's load is starting the session (held where
    the new session saves its row): once both are answered it is not live."""
    async with _two_clients(tmp_path, monkeypatch) as bridge:
        session_id = await bridge.stored_session()
        loaded, closed = await bridge.race(
            "upsert_session",
            lambda: bridge.load(bridge.a, session_id),
            lambda: bridge.send(bridge.b, "session/close", {"sessionId": session_id}),
        )
        assert "result" in loaded, loaded
        assert closed["result"] == {}, closed
        assert bridge.daemon.manager.get(session_id) is None
        assert session_id in await bridge.listed()  # closed, not deleted


async def test_load_then_delete_from_another_client_closes_and_deletes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _two_clients(tmp_path, monkeypatch) as bridge:
        session_id = await bridge.stored_session()
        loaded = await _answered(bridge.load(bridge.a, session_id))
        assert "result" in loaded, loaded
        live = bridge.daemon.manager.get(session_id)
        assert live is not None
        # Another client may take it over: a hand-over to a stuck one is given up.
        assert live.outlet.takeovers
        deleted = await bridge.b.request("session/delete", {"sessionId": session_id})
        assert deleted["result"] == {}, deleted
        await bridge.assert_deleted(session_id)
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
        answered = await bridge.a.request("session/prompt", prompt)
        assert answered["error"]["code"] == UNKNOWN_SESSION, answered


async def test_delete_then_load_from_another_client_is_an_unknown_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _two_clients(tmp_path, monkeypatch) as bridge:
        session_id = await bridge.stored_session()
        deleted = await bridge.b.request("session/delete", {"sessionId": session_id})
        assert deleted["result"] == {}, deleted
        loaded = await _answered(bridge.load(bridge.a, session_id))
        assert loaded["error"]["code"] == UNKNOWN_SESSION, loaded
        await bridge.assert_deleted(session_id)


async def test_a_prompt_right_behind_a_load_waiting_for_another_client_is_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sends load and prompt without waiting while B's load of the same session
    holds it: A's load waits for B's, then the prompt is served on A's session."""
    async with _two_clients(tmp_path, monkeypatch) as bridge:
        session_id = await bridge.stored_session()
        gate = bridge.store.hold("journal")
        other = bridge.load(bridge.b, session_id)
        await gate.reached.wait()
        load = {"sessionId": session_id, "cwd": str(bridge.cwd), "mcpServers": []}
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hello"}]}
        for request_id, method, params in (
            (101, "session/load", load),
            (102, "session/prompt", prompt),
        ):
            await bridge.a.send(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            )
        gate.opened.set()
        assert "result" in await _answered(other)
        answers: dict[int, dict[str, Any]] = {}
        while len(answers) < 2:
            message = await bridge.a.receive()
            if message.get("id") in (101, 102) and "method" not in message:
                answers[message["id"]] = message
        assert "result" in answers[101], answers
        assert answers[102]["result"]["stopReason"] == "end_turn", answers


@pytest.mark.parametrize("method", ["session/close", "session/delete"])
async def test_a_close_from_another_client_does_not_wait_for_one_that_stopped_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """A's turn floods a session while A reads nothing, so the session is stuck
    handing updates to A; B's close (or delete) of that session is answered
    (A is let go: it is not sent the rest), the session ends, no agy is left."""
    async with _two_clients(tmp_path, monkeypatch) as bridge:
        new = await bridge.a.request("session/new", {"cwd": str(bridge.cwd), "mcpServers": []})
        session_id = new["result"]["sessionId"]
        prompt = {
            "sessionId": session_id,
            "prompt": [{"type": "text", "text": "[fake-agy:flood] 400000"}],
        }
        await bridge.a.send(
            {"jsonrpc": "2.0", "id": 99, "method": "session/prompt", "params": prompt}
        )
        live = bridge.daemon.manager.get(session_id)
        assert live is not None
        # Stuck for good: A's socket and the daemon's writer are full, and with
        # them the session's inbox and agy's pipe; nothing wakes any task.
        await trio.testing.wait_all_tasks_blocked(cushion=0.5)
        while not live.outlet.handing_over:  # a slow agy, not a stuck session, woke nobody
            await trio.testing.wait_all_tasks_blocked(cushion=0.5)
        closed = await bridge.b.request(method, {"sessionId": session_id})
        assert closed["result"] == {}, closed
        assert bridge.daemon.manager.get(session_id) is None


@pytest.mark.parametrize(
    ("method", "how"), [("session/close", "closed"), ("session/delete", "deleted")]
)
async def test_the_client_driving_a_session_another_client_closes_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str, how: str
) -> None:
    """Issue 28: close and delete work from any client (the session is
    theirs too), and the client that drove it learns why nothing more comes:
    ``attached: false`` with the reason, as when another client opens it."""
    async with _two_clients(tmp_path, monkeypatch) as bridge:
        session_id = await bridge.stored_session()
        loaded = await _answered(bridge.load(bridge.a, session_id))
        assert "result" in loaded, loaded
        closed = await bridge.b.request(method, {"sessionId": session_id})
        assert closed["result"] == {}, closed
        while True:
            message = await bridge.a.receive()
            update = message.get("params", {}).get("update", {})
            meta = (update.get("_meta") or {}).get("agybridge", {})
            if meta.get("attached") is False:
                break
        assert message["params"]["sessionId"] == session_id
        assert meta["reason"] == f"the session was {how} by another client", meta
        refused = await bridge.a.prompt(session_id, "hi")
        assert refused["error"]["code"] == UNKNOWN_SESSION, refused
