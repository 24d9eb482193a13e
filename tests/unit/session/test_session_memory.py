"""A long-lived session's bookkeeping stays bounded: a real `Session` (fake agy)
driven in-process the way the agent layer drives it."""

from __future__ import annotations

from pathlib import Path

import trio

from agybridge.agy import EscalationPolicy
from agybridge.session import SessionDeps, SessionManager, SessionSpec

from ...acp_wire import FAKE_AGY, bridge_env, new_marker, wait_no_leftovers

TIMEOUT_S = 60


async def test_answered_prompts_are_forgotten_once_their_request_is_done(
    tmp_path: Path,
) -> None:
    """The turn core remembers an answered prompt only until its request task
    has finished (no second "prompt arrived" can follow): it used to keep one
    entry per prompt for the session's whole life."""
    marker = new_marker()
    deps = SessionDeps(
        agy_bin=str(FAKE_AGY),
        policy=EscalationPolicy(),
        max_line_bytes=2**20,
        env=bridge_env(tmp_path, marker),
    )
    manager = SessionManager(deps)
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            await nursery.start(manager.run)
            session = await manager.create(SessionSpec("s1", str(tmp_path)), None)
            for seq in range(1, 6):
                # What the agent layer does for one session/prompt request.
                session.prompt_arrived(seq)
                result = await session.prompt(seq, f"prompt {seq}", f"prompt {seq}")
                assert result.stop_reason == "end_turn"
                session.drop_prompt(seq)
            await session.barrier()
            assert not any(session.core.was_answered(seq) for seq in range(1, 6))
            await manager.close("s1")
            nursery.cancel_scope.cancel()
    assert await wait_no_leftovers(marker) == []
