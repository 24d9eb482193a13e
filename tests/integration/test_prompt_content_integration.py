"""Prompts with attachments, MCP servers and slash commands, through the wire.

A PNG reaches agy as text naming a staged file with the same bytes, inside a
private --add-dir root; the staging is empty after the turn; MCP servers are
written to that root's .agents/mcp_config.json and secrets never reach a log;
the bridge's slash commands are announced after session/new and answered
without agy.
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import trio

from ..acp_wire import Harness, RawClient, WireValidator

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 40 + b"\xff\xd9"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(16)
ZIP = b"PK\x03\x04\x14\x00" + bytes(20)


def staged_paths(text: str) -> list[str]:
    return re.findall(r"(/\S+\.(?:png|jpg|gif|webp|pdf|txt|wav|zip))", text)


def stdin_texts(harness: Harness) -> list[str]:
    return [
        json.loads(e["stdin"])["message"]["content"] for e in harness.launches() if "stdin" in e
    ]


async def start(client: RawClient, **params: Any) -> str:
    await client.initialize()
    response = await client.request(
        "session/new", {"cwd": str(client.tmp_path), "mcpServers": [], **params}
    )
    assert "result" in response, response
    session_id: str = response["result"]["sessionId"]
    return session_id


async def test_image_is_staged_for_agy_and_removed_after_the_turn(harness: Harness) -> None:
    """The PNG's bytes are in a staged file agy is told about; a JPEG labelled
    image/png is staged as .jpg, an audio clip as .wav, a zip blob as .zip;
    nothing is left after the turn."""
    validator = WireValidator()
    staging = harness.tmp_path / "staging"
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            validator=validator, FAKE_AGY_SLOW_SECONDS="30", FAKE_AGY_SPAWN_CHILDREN="0"
        ) as client:
            session_id = await start(client)
            mark = client.mark()
            request_id = await client.start_request(
                "session/prompt",
                {
                    "sessionId": session_id,
                    "prompt": [
                        {"type": "text", "text": "[fake-agy:slow] what is in these?"},
                        {
                            "type": "image",
                            "data": base64.b64encode(PNG).decode(),
                            "mimeType": "image/png",
                            "uri": "file:///tmp/shot.png",
                        },
                        {
                            "type": "image",
                            "data": base64.b64encode(JPEG).decode(),
                            "mimeType": "image/png",
                        },
                        {
                            "type": "audio",
                            "data": base64.b64encode(WAV).decode(),
                            "mimeType": "audio/wav",
                        },
                        {
                            "type": "resource",
                            "resource": {
                                "uri": "file:///tmp/bundle.archive",
                                "blob": base64.b64encode(ZIP).decode(),
                                "mimeType": "application/zip",
                            },
                        },
                    ],
                },
            )
            await client.wait_update(session_id, "agent_message_chunk", since=mark)
            [sent] = stdin_texts(harness)
            paths = staged_paths(sent)
            assert len(paths) == 4, sent
            png_path, jpg_path, wav_path, zip_path = (Path(p) for p in paths)
            assert png_path.read_bytes() == PNG and png_path.suffix == ".png"
            assert jpg_path.read_bytes() == JPEG and jpg_path.suffix == ".jpg"
            assert wav_path.read_bytes() == WAV and wav_path.suffix == ".wav"
            assert zip_path.read_bytes() == ZIP and zip_path.name.startswith("bundle-")
            assert "(audio/wav, 32 bytes)" in sent and "(application/zip, 26 bytes)" in sent
            assert staging in png_path.parents
            # The private root is an agy workspace root (--add-dir).
            argv = harness.session_argvs()[0]
            roots = [argv[i + 1] for i, a in enumerate(argv) if a == "--add-dir"]
            assert any(Path(r) in png_path.parents for r in roots)
            await client.notify("session/cancel", {"sessionId": session_id})
            response = await client.response(request_id)
            assert response["result"]["stopReason"] == "cancelled"
            assert not any(p.exists() for p in (png_path, jpg_path, wav_path, zip_path))
            users = client.updates(session_id, "session_info_update", since=mark)
            assert users and users[0]["title"] == "[fake-agy:slow] what is in these?"
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_mcp_servers_reach_agy_and_secrets_stay_out_of_logs(harness: Harness) -> None:
    """stdio and http servers land in the private root's .agents/mcp_config.json;
    the secret header value appears in no log; sse is skipped, not fatal."""
    secret = "Bearer s3cr3t-t0ken-value"
    servers = [
        {
            "name": "files",
            "command": "/usr/bin/env",
            "args": ["mcp-files"],
            "env": [{"name": "API_KEY", "value": "env-secret-value"}],
        },
        {
            "type": "http",
            "name": "web",
            "url": "https://mcp.example.com/mcp",
            "headers": [{"name": "Authorization", "value": secret}],
        },
        {"type": "sse", "name": "old", "url": "https://sse.example.com", "headers": []},
    ]
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            session_id = await start(client, mcpServers=servers)
            response = await client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]},
            )
            assert response["result"]["stopReason"] == "end_turn"
            argv = harness.session_argvs()[0]
            roots = [argv[i + 1] for i, a in enumerate(argv) if a == "--add-dir"]
            configs = [Path(r) / ".agents" / "mcp_config.json" for r in roots]
            [config_path] = [c for c in configs if c.exists()]
            config = json.loads(config_path.read_text())
            assert set(config["mcpServers"]) == {"files", "web"}
            assert config_path.stat().st_mode & 0o777 == 0o600
            assert not (harness.tmp_path / ".agents").exists()  # never the user's
        logs = [p for p in harness.tmp_path.rglob("*.log")] + [
            harness.tmp_path / "agy-launches.ndjson"
        ]
        for log in logs:
            if log.exists():
                text = log.read_text(errors="replace")
                assert "s3cr3t-t0ken-value" not in text, log
                assert "env-secret-value" not in text, log
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_slash_commands(harness: Harness) -> None:
    """available_commands_update follows the session/new answer and lists the
    bridge's commands and workspace skills; /status and /mode are answered by
    the bridge; a /skill prompt reaches agy as instructions naming SKILL.md."""
    skill = harness.tmp_path / ".agents" / "skills" / "release-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Draft release notes from git log\n---\nSteps…\n"
    )
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            session_id = await start(client)
            new_answer = next(m for m in client.received if m.get("id") == 1)
            update = await client.wait_update(session_id, "available_commands_update")
            assert client.position(new_answer) < client.position(
                next(m for m in client.received if m.get("method") == "session/update")
            )
            names = [c["name"] for c in update["availableCommands"]]
            assert names[:5] == ["model", "mode", "effort", "status", "doctor"]
            assert "release-notes" in names

            mark = client.mark()
            status = await client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "/status"}]},
            )
            assert status["result"]["stopReason"] == "end_turn"
            assert session_id in client.message_text(session_id, since=mark)

            mark = client.mark()
            await client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "/mode plan"}]},
            )
            assert "plan" in client.message_text(session_id, since=mark)
            assert stdin_texts(harness) == []  # agy saw none of the commands

            await client.request(
                "session/prompt",
                {
                    "sessionId": session_id,
                    "prompt": [{"type": "text", "text": "/release-notes for 2.0"}],
                },
            )
            [sent] = stdin_texts(harness)
            assert "SKILL.md" in sent and "for 2.0" in sent
        argv = harness.session_argvs()[-1]
        assert "--mode=plan" in argv
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_a_skill_used_right_after_session_new_is_known(harness: Harness) -> None:
    """The client sends ``_agybridge/skills/list`` and a ``/skill`` prompt as
    soon as session/new is answered (not waiting for the commands update):
    the skill is listed and used as a skill, since they wait for the skill
    scan the session started before answering (before: both could run first,
    see no skill, and the prompt went to agy as plain text)."""
    skill = harness.tmp_path / ".agents" / "skills" / "release-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Draft release notes\n---\nSteps…\n"
    )
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await start(client)
            listed = await client.request("_agybridge/skills/list", {"sessionId": session_id})
            assert [s["name"] for s in listed["result"]["skills"]] == ["release-notes"], listed
        async with harness.open_bridge() as client:
            session_id = await start(client)
            await client.request(
                "session/prompt",
                {
                    "sessionId": session_id,
                    "prompt": [{"type": "text", "text": "/release-notes for 2.0"}],
                },
            )
            [sent] = stdin_texts(harness)
            assert "SKILL.md" in sent and "for 2.0" in sent, sent
        await harness.assert_no_leftovers()


async def test_a_skill_file_that_is_a_fifo_is_skipped(harness: Harness) -> None:
    """A workspace whose SKILL.md is a named pipe (or a device) must not stall the
    session: reading it would wait for a writer forever, in a worker thread that
    no cancel reaches (the commands are announced before the first turn)."""
    skill = harness.tmp_path / ".agents" / "skills" / "pipe"
    skill.mkdir(parents=True)
    os.mkfifo(skill / "SKILL.md")
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge() as client:
            session_id = await start(client)
            update = await client.wait_update(session_id, "available_commands_update")
            assert "pipe" not in [c["name"] for c in update["availableCommands"]]
            answer = await client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "hello"}]},
            )
            assert answer["result"]["stopReason"] == "end_turn"
    await harness.assert_no_leftovers()


async def test_too_big_and_unwritable_attachments_are_clear_errors(harness: Harness) -> None:
    """A file over the limit is -32602 attachment_too_large with the limit; a
    staging directory that broke after session/new is -32041 staging_unusable
    naming it; neither reaches agy, and the session goes on."""
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(
            validator=validator, AGYBRIDGE_MAX_ATTACHMENT_BYTES="32"
        ) as client:
            session_id = await start(client)

            async def send(block: dict[str, Any]) -> dict[str, Any]:
                prompt = [{"type": "text", "text": "listen"}, block]
                return await client.request(
                    "session/prompt", {"sessionId": session_id, "prompt": prompt}
                )

            data = base64.b64encode(WAV + bytes(8)).decode()
            wav = {"type": "audio", "data": data, "mimeType": "audio/wav"}
            error = (await send(wav))["error"]
            assert (error["code"], error["message"]) == (
                -32602,
                "Audio is larger than the 32 bytes limit.",
            )
            assert error["data"]["limitBytes"] == 32
            assert error["data"]["_meta"]["agybridge"] == {
                "cause": "attachment_too_large",
                "path": "$.prompt[1].data",
            }
            # The private root's attachments directory becomes a file: nothing can be staged.
            [root] = [r for r in (harness.tmp_path / "staging").iterdir() if r.is_dir()]
            (root / "attachments").rmdir()
            (root / "attachments").write_text("not a directory")
            blob = {"uri": "file:///tmp/b.zip", "blob": base64.b64encode(ZIP).decode()}
            error = (await send({"type": "resource", "resource": blob}))["error"]
            assert error["code"] == -32041
            assert error["message"].startswith(f"cannot write a staged file in {str(root)!r}")
            assert error["message"].endswith(
                "Make it a writable directory, or set AGYBRIDGE_STAGING_DIR to one."
            )
            assert error["data"]["_meta"]["agybridge"] == {
                "cause": "staging_unusable",
                "path": str(root),
            }
            ok = await client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "plain"}]},
            )
            assert ok["result"]["stopReason"] == "end_turn"
            assert stdin_texts(harness) == ["plain"]
        await harness.assert_no_leftovers()
    assert validator.problems == []


async def test_unsaved_editor_buffers_of_linked_files_reach_agy(harness: Harness) -> None:
    """With fs.readTextFile, each linked local file is read through the editor: the
    text it has not saved goes to agy after the prompt, saying so; a saved file and
    one the editor does not have add nothing; every message matches the schema."""
    validator = WireValidator()
    work = harness.tmp_path / "work"
    work.mkdir()
    changed, saved, closed = work / "changed.py", work / "saved.py", work / "closed.py"
    for path in (changed, saved, closed):
        path.write_text("print('on disk')\n")
    with trio.fail_after(TIMEOUT_S):
        async with harness.open_bridge(validator=validator) as client:
            client.buffers = {str(changed): "print('edited')\n", str(saved): saved.read_text()}
            await client.initialize(fs={"readTextFile": True, "writeTextFile": False})
            new = await client.request("session/new", {"cwd": str(work), "mcpServers": []})
            session_id = new["result"]["sessionId"]
            links = [
                {"type": "resource_link", "uri": p.as_uri(), "name": p.name}
                for p in (changed, saved, closed)
            ]
            response = await client.request(
                "session/prompt",
                {"sessionId": session_id, "prompt": [{"type": "text", "text": "why?"}, *links]},
            )
            assert response["result"]["stopReason"] == "end_turn"
            # Asked for at once: in any order, each once.
            assert sorted(r["params"]["path"] for r in client.file_reads) == sorted(
                [str(changed), str(saved), str(closed)]
            )
        [sent] = stdin_texts(harness)
        assert sent.endswith(
            f"[Unsaved changes in the editor: {changed}]\n"
            "The file on disk is older; the editor's current text follows.\n"
            "print('edited')\n"
        )
        assert sent.count("Unsaved changes") == 1
        await harness.assert_no_leftovers()
    assert validator.problems == []
