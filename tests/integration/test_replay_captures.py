"""Every real agy capture, replayed by the fake agy through the real bridge.

The fake replays one capture turn per prompt (``FAKE_AGY_REPLAY``); the client
must see each turn's full text exactly once — deltas and the ``result``
restatement never both — and every wire message validates against the ACP
schema.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from agybridge.agy import events
from agybridge.translate.card_text import fenced

from ..acp_wire import Harness, WireValidator
from ..conftest import sample_files
from ..golden import split_turns

pytestmark = pytest.mark.integration

TIMEOUT_S = 60


def replayable() -> list[Path]:
    # The stdin sample is agy's input, not its output.
    return [p for p in sample_files() if "stdin" not in p.name]


def expected_turns(capture: Path) -> list[tuple[str, str, str]]:
    """(status, full text, error) per turn of the capture; with ``structured_output``
    the text is the clean object's readable block, not agy's JSON line."""
    lines = [line for line in capture.read_text().splitlines() if line.strip()]
    turns = []
    for turn in split_turns(lines):
        results = [e.result for e in turn if isinstance(e, events.ResultEvent)]
        if not results:
            continue
        deltas = "".join(
            e.step_update.text_delta or ""
            for e in turn
            if isinstance(e, events.StepUpdateEvent) and e.step_update.step_type == "agent_response"
        )
        response = results[0].response or ""
        text = response if response.startswith(deltas) else deltas
        if results[0].structured_output is not None:
            text = fenced(json.dumps(results[0].structured_output, indent=2), "json")
        turns.append((results[0].status, text, results[0].error or ""))
    return turns


@pytest.mark.parametrize("capture", replayable(), ids=lambda p: p.name)
async def test_replayed_capture_text_arrives_exactly_once(harness: Harness, capture: Path) -> None:
    """Each turn's text reaches the client exactly once; errors are explained."""
    turns = expected_turns(capture)
    assert turns, f"{capture.name} has no complete turn"
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, FAKE_AGY_REPLAY=str(capture)) as client:
            await client.initialize()
            session_id = await client.new_session()
            for index, (status, text, error) in enumerate(turns):
                mark = client.mark()
                response = await client.response(
                    await client.start_prompt(session_id, f"turn {index}")
                )
                shown = client.message_text(session_id, since=mark)
                if status == "SUCCESS":
                    assert response.get("result", {}).get("stopReason") == "end_turn", response
                    # agy's text exactly once; after it only the bridge's notices (a
                    # denial, tools the replay ran past the permission gate).
                    assert shown.startswith(text), client.diagnostics()
                    notices = shown[len(text) :].lstrip("\n")
                    assert not notices or notices.startswith("⚠️"), client.diagnostics()
                elif "result" in response:
                    # An agy error: the streamed text once, then the explanation.
                    assert shown.startswith(text)
                    assert shown.count(error.splitlines()[0]) == 1, shown
                else:
                    # Errors the client must act on (e.g. an unknown model)
                    # come back as JSON-RPC errors naming agy's reason.
                    assert error.splitlines()[0] in str(response["error"]), response
        await harness.assert_no_leftovers()
    assert validator.problems == []
