"""File changes are tracked in every mode, not only behind the gate (issue 27).

In ``safe`` and ``autonomous`` agy runs ungated, and ``write_to_file`` carries
its parameters only on DONE (contract.md §3.4): the before-state of a file it
creates is seen only because the bridge's PreToolUse hook runs as an observer
before the write (the fake agy runs hooks as real agy does: after the step's
ACTIVE line, before the tool; hooks-and-tools.md §A4-§A7). The observer asks
nothing and changes nothing agy decides. Payloads are checked against
docs/extensions.schema.json and every wire message against the ACP schema.
"""

from __future__ import annotations

import pytest
import trio

from fake_agy._fake_scenarios import EDIT_INITIAL_CONTENT, EDIT_SUFFIX

from ..acp_wire import Harness, WireValidator
from .test_extensions_integration import prompt, result

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
ORIGINAL = b"keep me\nsecond line\n"


@pytest.mark.parametrize("mode", ["safe", "autonomous"])
async def test_a_created_and_an_edited_file_are_diffed_and_rolled_back(
    harness: Harness, mode: str
) -> None:
    workspace = harness.tmp_path / "ws"
    workspace.mkdir()
    edited, created = workspace / "old.txt", workspace / "new.txt"
    edited.write_bytes(ORIGINAL)
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge("edit", validator=validator, AGYBRIDGE_MODE=mode) as client:
            await client.initialize()
            session_id = await client.new_session(workspace)
            await prompt(client, session_id, "[fake-agy:edit] old.txt new.txt")
            assert client.permission_requests == []  # an observer never asks
            assert edited.read_bytes() == b"keep me" + EDIT_SUFFIX.encode() + b"\nsecond line\n"
            assert created.exists()

            listed = await result(client, "_agybridge/session/mutations", {"sessionId": session_id})
            [turn] = listed["turns"]
            befores = {(f["path"], f["tool"]): f["before"] for f in turn["files"]}
            assert befores[(str(created), "write_to_file")] == {"exists": False}
            assert befores[(str(edited), "replace_file_content")]["exists"] is True

            diff = await result(
                client, "_agybridge/session/diff", {"sessionId": session_id, "turn": 0}
            )
            assert sorted(f["path"] for f in diff["files"]) == [str(created), str(edited)]
            assert not any(f["binary"] for f in diff["files"])
            assert "-keep me\n" in diff["diff"] and f"+keep me{EDIT_SUFFIX}\n" in diff["diff"]
            first, _, rest = EDIT_INITIAL_CONTENT.partition("\n")
            assert f"+{first}{EDIT_SUFFIX}\n" in diff["diff"]
            assert all(f"+{line}\n" in diff["diff"] for line in rest.splitlines())

            back = await result(
                client, "_agybridge/session/rollback", {"sessionId": session_id, "toTurn": 0}
            )
            assert back["applied"] is True
            actions = {f["path"]: f["action"] for f in back["files"]}
            assert actions == {str(created): "delete", str(edited): "restore"}
            assert not created.exists()
            assert edited.read_bytes() == ORIGINAL
        launches = harness.launches()
        verdicts = [(e["hook"]["tool"], e["hook"]["verdict"]) for e in launches if "hook" in e]
        assert verdicts == [
            ("replace_file_content", "allow"),
            ("write_to_file", "allow"),
            ("replace_file_content", "allow"),
        ]
        [argv] = harness.session_argvs()
        # The observer does not change agy's own checks: safe keeps them on.
        assert ("--dangerously-skip-permissions" in argv) is (mode == "autonomous")
        await harness.assert_no_leftovers()
    assert validator.problems == []
