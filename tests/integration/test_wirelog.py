"""The opt-in wire trace (AGYBRIDGE_TRACE=1): every message logged, secrets never."""

from __future__ import annotations

import pytest
import trio

from agybridge.agent.wirelog import REDACTED, redact

from ..acp_wire import Harness

SECRET = "s3cr3t-value-never-logged"


def test_redact_mcp_env_headers_tokens_and_bytes() -> None:
    message = {
        "params": {
            "mcpServers": [
                {"name": "a", "command": "x", "env": [{"name": "API", "value": SECRET}]},
                {"type": "http", "url": "u", "headers": [{"name": "Auth", "value": SECRET}]},
            ],
            "_meta": {"accessToken": SECRET, "nested": {"apiKey": SECRET}},
            "prompt": [{"type": "image", "mimeType": "image/png", "data": "A" * 1000}],
        }
    }
    out = redact(message)
    assert SECRET not in repr(out)
    assert out["params"]["mcpServers"][0]["env"] == [{"name": "API", "value": REDACTED}]
    assert out["params"]["prompt"][0]["data"] == "<1000 base64 chars>"
    assert out["params"]["mcpServers"][1]["url"] == "u"  # the rest is kept


@pytest.mark.integration
async def test_trace_logs_messages_without_secrets(harness: Harness) -> None:
    with trio.fail_after(60):
        async with harness.open_bridge(AGYBRIDGE_TRACE="1") as client:
            await client.initialize()
            created = await client.request(
                "session/new",
                {
                    "cwd": str(client.tmp_path),
                    "mcpServers": [
                        {"name": "m", "command": "/bin/true", "args": [],
                         "env": [{"name": "TOKEN", "value": SECRET}]}
                    ],
                },
            )  # fmt: skip
            assert "result" in created, created
    await harness.assert_no_leftovers()
    log = (harness.tmp_path / "agybridge.log").read_text()
    assert '<- {"jsonrpc": "2.0", "id": 0, "method": "initialize"' in log
    assert '-> {"jsonrpc": "2.0", "id": 0, "result": {' in log
    assert SECRET not in log
