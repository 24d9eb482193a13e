"""agy-acp-map clients over the wire: launch settings in its shapes, a
continued agy conversation (and a reported fork), _meta.conversationId, its
set_config_option ids. Clients that ignore _meta see standard ACP."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import trio

from agybridge.store import Store

from ..acp_wire import Harness, RawClient, WireValidator
from ..extension_schema import call

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
MODEL = "gemini-3.1-pro-low"


async def new_session(client: RawClient, **params: Any) -> dict[str, Any]:
    response = await client.request(
        "session/new", {"cwd": str(client.tmp_path), "mcpServers": [], **params}
    )
    assert "result" in response, f"{response}\n{client.diagnostics()}"
    result: dict[str, Any] = response["result"]
    return result


async def prompt(client: RawClient, session_id: str, text: str = "hi") -> None:
    response = await client.response(await client.start_prompt(session_id, text))
    assert response["result"]["stopReason"] == "end_turn", response


async def runtime(client: RawClient, session_id: str) -> dict[str, Any]:
    response = await call(client, "_agybridge/session/runtime", {"sessionId": session_id})
    result: dict[str, Any] = response["result"]
    return result


@pytest.mark.parametrize(
    "shape",
    [
        {"model": MODEL},
        {"config": {"model": MODEL}},
        {"configOptions": [{"id": "model", "value": MODEL}]},
    ],
    ids=["top-level", "config", "configOptions"],
)
async def test_a_client_sending_model_gets_that_model(
    harness: Harness, shape: dict[str, Any]
) -> None:
    """The model reaches agy's argv and shows in runtime (and in the options)."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            created = await new_session(client, **shape)
            model = next(o for o in created["configOptions"] if o["id"] == "model")
            assert model["currentValue"] == MODEL
            await prompt(client, created["sessionId"])
            state = await runtime(client, created["sessionId"])
            assert state["model"] == MODEL and state["agyModel"] == "Gemini 3.1 Pro (Low)"
        await harness.assert_no_leftovers()
    assert f"--model={MODEL}" in harness.session_argvs()[0]
    assert validator.problems == []


async def test_skip_permissions_and_set_config_option_extras(harness: Harness) -> None:
    """skipPermissions: true launches autonomous; sandbox/printTimeout via
    set_config_option reach the next agy."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            created = await new_session(client, skipPermissions=True)
            session_id = created["sessionId"]
            assert created["modes"]["currentModeId"] == "autonomous"
            await prompt(client, session_id)
            for config_id, value in (("sandbox", "false"), ("printTimeout", "45m")):
                changed = await client.request(
                    "session/set_config_option",
                    {"sessionId": session_id, "configId": config_id, "value": value},
                )
                assert "result" in changed, changed
            await prompt(client, session_id)
        await harness.assert_no_leftovers()
    first, last = harness.session_argvs()[0], harness.session_argvs()[-1]
    assert "--dangerously-skip-permissions" in first and "--sandbox" in first
    assert "--sandbox" not in last and "--print-timeout=45m" in " ".join(last).replace(
        "--print-timeout 45m", "--print-timeout=45m"
    )
    assert validator.problems == []


async def test_conversation_id_continues_and_a_fork_is_reported(harness: Harness) -> None:
    """session/new with a known conversationId resumes it (--conversation,
    _meta.conversationId); an unknown one forks, and runtime reports it."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            first = await new_session(client)
            assert "_meta" not in first  # no conversation before the first turn
            await prompt(client, first["sessionId"])
            known = (await runtime(client, first["sessionId"]))["conversationId"]
            assert known

            again = await new_session(client, conversationId=known)
            assert again["_meta"] == {"conversationId": known}
            await prompt(client, again["sessionId"])
            state = await runtime(client, again["sessionId"])
            assert state["conversationId"] == known and state["conversationForks"] == []

            lost = "0d0d0d0d-0000-4000-8000-000000000000"
            forked = await new_session(client, _meta={"conversationId": lost})
            mark = client.mark()
            await prompt(client, forked["sessionId"])
            state = await runtime(client, forked["sessionId"])
            assert state["conversationForks"] == [{"asked": lost, "got": state["conversationId"]}]
            # Told once: in that turn if agy's init came before the prompt was
            # sent, else with the next one (the result names the conversation).
            await prompt(client, forked["sessionId"])
            told = client.message_text(forked["sessionId"], since=mark)
            assert told.count("could not resume conversation") == 1, told

            resumed = await client.request(
                "session/resume",
                {"sessionId": again["sessionId"], "cwd": str(client.tmp_path), "mcpServers": []},
            )
            assert resumed["result"]["_meta"] == {"conversationId": known}
        await harness.assert_no_leftovers()
    argvs = harness.session_argvs()
    assert any(known in argv and "--conversation" in argv for argv in argvs[1:])
    assert validator.problems == []


async def test_malformed_launch_shapes_are_invalid_params(harness: Harness) -> None:
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            await client.initialize()
            response = await client.request(
                "session/new",
                {"cwd": str(client.tmp_path), "mcpServers": [], "configOptions": {"model": 1}},
            )
            assert response["error"]["code"] == -32602
            assert "configOptions" in response["error"]["message"]
            bad_model = await client.request(
                "session/new", {"cwd": str(client.tmp_path), "mcpServers": [], "model": "-x"}
            )
            assert bad_model["error"]["code"] == -32602
        await harness.assert_no_leftovers()


def _plan_capture(conversation: str) -> str:
    """One synthetic turn whose task_boundary step makes a plan (shapes as in
    the samples' tool steps)."""
    step = {"conversation_id": conversation, "step_type": "tool", "tool_name": "task_boundary"}
    info = {"name": "task_boundary", "parameters": {"TaskName": "Refactor the parser"}}
    lines = [
        {"event": "init", "conversation_id": conversation, "init": {"model": "M", "tools": []}},
        {
            "event": "step_update",
            "step_update": {
                "conversation_id": conversation,
                "step_index": 0,
                "state": "DONE",
                "step_type": "user_input",
            },
        },
        {
            "event": "step_update",
            "step_update": {**step, "step_index": 1, "state": "ACTIVE", "tool_info": info},
        },
        {
            "event": "step_update",
            "step_update": {**step, "step_index": 1, "state": "DONE", "tool_info": info},
        },
        {
            "event": "result",
            "result": {"conversation_id": conversation, "status": "SUCCESS", "response": "ok"},
        },
    ]
    return "\n".join(json.dumps(line) for line in lines) + "\n"


async def test_the_plan_is_re_sent_on_load(harness: Harness) -> None:
    """A session whose turn made a plan gets that plan again on session/load,
    after the replayed history, in a new bridge."""
    capture = harness.tmp_path / "plan.ndjson"
    capture.write_text(_plan_capture("5e5e5e5e-0000-4000-8000-000000000001"))
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, FAKE_AGY_REPLAY=str(capture)) as client:
            await client.initialize()
            session_id = (await new_session(client))["sessionId"]
            await prompt(client, session_id)
            shown = client.updates(session_id, "plan")[-1]["entries"]
            assert shown[0]["content"].startswith("Refactor the parser")
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            loaded = await client.request(
                "session/load",
                {"sessionId": session_id, "cwd": str(client.tmp_path), "mcpServers": []},
            )
            assert "result" in loaded, loaded
            plans = client.updates(session_id, "plan")
            assert [p["entries"] for p in plans] == [shown]
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_delete_on_close_deletes_the_stored_session(harness: Harness) -> None:
    """AGY_ACP_DELETE_ON_CLOSE=1: a closed session is deleted (gone from
    session/list, session/load finds nothing); an open one is kept."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator, AGY_ACP_DELETE_ON_CLOSE="1") as client:
            await client.initialize()
            closed = (await new_session(client))["sessionId"]
            kept = (await new_session(client))["sessionId"]
            await prompt(client, closed)
            assert (await client.request("session/close", {"sessionId": closed}))["result"] == {}
            listed = (await client.request("session/list", {}))["result"]["sessions"]
            assert [s["sessionId"] for s in listed] == [kept]
            load = {"sessionId": closed, "cwd": str(client.tmp_path), "mcpServers": []}
            gone = await client.request("session/load", load)
            assert gone["error"]["code"] == -32002, gone
        await harness.assert_no_leftovers()
    assert validator.problems == []
    stderr = (harness.tmp_path / "bridge-stderr.log").read_text()
    assert "AGY_ACP_DELETE_ON_CLOSE is agy-acp-map's name" in stderr


@pytest.mark.parametrize("ttl_s", [3600.0, -1.0], ids=["warm", "expired"])
async def test_initialize_offers_the_models_of_a_warm_discovery_cache(
    harness: Harness, ttl_s: float
) -> None:
    """bridgeCapabilities.availableModels comes from the discovery cache the
    last bridge left in the database (read before the store is opened), not
    always []; an expired cache offers nothing."""
    cached = {
        "models": [{"slug": MODEL, "name": "Gemini 3.1 Pro (Low)"}, {"slug": "m2", "name": "M2"}],
        "agents": ["helper"],
        "agyVersion": "1.3.2",
    }
    clock = (lambda: time.time() - 7200) if ttl_s < 0 else time.time
    with Store.open(harness.tmp_path / "agybridge.db", clock=clock) as store:
        store.cache_put("discovery", cached, abs(ttl_s))
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            init = (await client.initialize())["result"]
        await harness.assert_no_leftovers()
    caps = init["_meta"]["bridgeCapabilities"]
    if ttl_s > 0:
        assert caps["availableModels"] == [MODEL, "m2"]
        assert caps["availableAgents"] == ["helper"]
    else:
        assert caps["availableModels"] == [] and caps["availableAgents"] == []
    assert validator.problems == []


async def test_the_legacy_session_id_spelling_is_read(harness: Harness) -> None:
    """An older agy-acp-map client's ``session_id`` (no ``sessionId``) names the
    session of a prompt and a close; both spellings naming different sessions is
    -32602 saying so. (Not v1-schema-valid: each is validated as the request it
    stands for, with ``sessionId``, so its answer is checked against that.)"""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            await client.initialize()
            session_id = (await new_session(client))["sessionId"]
            text = [{"type": "text", "text": "hi"}]

            async def legacy(method: str, params: dict[str, Any]) -> dict[str, Any]:
                if "sessionId" in params:  # the conflict: only an error may answer it
                    sent = await client.start_request(method, params, expect_invalid=True)
                    return await client.response(sent)
                message = {"jsonrpc": "2.0", "id": client.new_id(), "method": method}
                message["params"] = params
                standard = {k: v for k, v in params.items() if k != "session_id"}
                validator.feed("c2a", {**message, "params": {"sessionId": session_id, **standard}})
                await client.send_raw(json.dumps(message).encode() + b"\n")
                return await client.response(message["id"])

            answered = await legacy("session/prompt", {"session_id": session_id, "prompt": text})
            assert answered["result"]["stopReason"] == "end_turn", answered
            both = {"sessionId": session_id, "session_id": "sess_other", "prompt": text}
            refused = (await legacy("session/prompt", both))["error"]
            assert refused["code"] == -32602
            assert refused["message"] == (
                "Invalid params: $.session_id is 'sess_other' but sessionId is "
                f"{session_id!r}: send sessionId only (session_id is its legacy spelling)"
            )
            closed = await legacy("session/close", {"session_id": session_id})
            assert closed.get("result") == {}, closed
        await harness.assert_no_leftovers()
    assert validator.problems == [], validator.report()
