"""A stored session's history, runtime, mutations and diff, read from the
database without loading it or starting agy (before: -32002 for a session
not live in this bridge). Every payload is checked against the schemas."""

from __future__ import annotations

import pytest
import trio

from ..acp_wire import Harness, WireValidator
from ..extension_schema import call
from . import test_extensions_integration as edits
from .test_extensions_integration import make_workspace, result, two_editing_turns

pytestmark = pytest.mark.integration
#: Read by the harness fixture: the same editing set-up as the extension tests.
HARNESS_ENV = edits.HARNESS_ENV

TIMEOUT_S = 60
READERS = (
    "_agybridge/session/history",
    "_agybridge/session/runtime",
    "_agybridge/session/mutations",
    "_agybridge/session/diff",
)


async def test_a_stored_session_is_readable_without_agy(harness: Harness) -> None:
    """Closed in one bridge, read in the same and in a new one: the same
    history, mutations and diff as while it was live, runtime with what the
    database knows (``stored: true``); the new bridge starts no agy."""
    workspace = make_workspace(harness)
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=validator) as client:
            session_id, _ = await two_editing_turns(client, workspace)
            params = {"sessionId": session_id}
            live = {m: await result(client, m, params) for m in READERS}
            assert (await client.request("session/close", params))["result"] == {}
            closed = {m: await result(client, m, params) for m in READERS}
        launches = len(harness.session_argvs())
        async with harness.open_bridge("edit", validator=validator) as client:
            await client.initialize()
            fresh = {m: await result(client, m, params) for m in READERS}
            unknown = await call(client, "_agybridge/session/history", {"sessionId": "sess_nope"})
            rollback = await call(client, "_agybridge/session/rollback", {**params, "toTurn": 0})
        await harness.assert_no_leftovers()
    assert len(harness.session_argvs()) == launches  # no agy for reading
    for answers in (closed, fresh):
        for method in ("_agybridge/session/history", "_agybridge/session/diff"):
            assert answers[method] == live[method], method
        turns = answers["_agybridge/session/mutations"]["turns"]
        assert [t["turn"] for t in turns] == [0, 1]
        assert turns == live["_agybridge/session/mutations"]["turns"]
        state = answers["_agybridge/session/runtime"]
        assert state["stored"] is True and state["mutations"] == 3
        assert state["cwd"] == str(workspace) and state["mode"] == "accept-edits"
        assert state["conversationId"] == live["_agybridge/session/runtime"]["conversationId"]
        assert state["agy"] == {"version": None, "pid": None} and state["runningTurn"] is None
    assert "stored" not in live["_agybridge/session/runtime"]
    assert unknown["error"]["code"] == -32002
    # Changing files stays with a loaded session.
    assert rollback["error"]["code"] == -32002
    assert validator.problems == []
