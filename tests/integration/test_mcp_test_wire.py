"""``_agybridge/mcp/test`` over the wire, every message schema-validated: one
of the session's MCP servers is started (stdio) or called (HTTP) and the
answer says whether it answered MCP's ``initialize``, and if not, why; the
server's whole process group is gone afterwards."""

from __future__ import annotations

import functools
import subprocess
import sys
from typing import Any

import pytest
import trio

from ..acp_wire import Harness, WireValidator
from ..extension_schema import call

pytestmark = pytest.mark.integration

TIMEOUT_S = 60
TEST = "_agybridge/mcp/test"
REPLY = (
    '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18",'
    '"capabilities":{"tools":{}},"serverInfo":{"name":"fake-mcp","version":"1.0"}}}'
)
#: A stdio MCP server: a log line and a notification, then the reply; then it
#: (and a child it started) stay until they are killed. argv[1]: how it behaves.
STDIO_SERVER = f"""
import subprocess, sys
mode = sys.argv[1]
if mode == "exit":
    sys.exit(3)
line = sys.stdin.readline()
assert '"initialize"' in line, line
if mode == "silent":
    sys.stdin.read()
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("not json: servers should not print this", flush=True)
print('{{"jsonrpc":"2.0","method":"notifications/message","params":{{}}}}', flush=True)
refusal = '{{"jsonrpc":"2.0","id":1,"error":{{"code":-32602,"message":"bad version"}}}}'
if mode == "refuse":
    print(refusal, flush=True)
else:
    print({REPLY!r}, flush=True)
sys.stdin.read()
"""
#: A streamable-HTTP MCP server answering with an event stream; it needs the
#: header the session's config gives it. Prints its port, then serves.
HTTP_SERVER = f"""
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Authorization") != "Bearer sekrit":
            self.send_response(401); self.end_headers(); return
        body = ("event: message\\ndata: " + {REPLY!r} + "\\n\\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_port, flush=True)
server.serve_forever()
"""


def stdio(name: str, mode: str, script: str) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [script, mode], "env": []}


async def test_mcp_test_reports_answers_and_failures(harness: Harness) -> None:
    workspace = harness.tmp_path / "ws"
    workspace.mkdir()
    script = harness.tmp_path / "mcp_server.py"
    script.write_text(STDIO_SERVER, encoding="utf-8")
    validator = WireValidator()
    with trio.fail_after(TIMEOUT_S):
        async with trio.open_nursery() as nursery:
            serve = [sys.executable, "-c", HTTP_SERVER]
            http = await nursery.start(
                functools.partial(trio.run_process, serve, stdout=subprocess.PIPE, check=False)
            )
            port = int((await http.stdout.receive_some(64)).decode().strip())
            url = f"http://127.0.0.1:{port}/mcp"
            servers = [
                stdio("good", "answer", str(script)),
                stdio("refuses", "refuse", str(script)),
                stdio("quits", "exit", str(script)),
                stdio("silent", "silent", str(script)),
                {"name": "gone", "command": str(harness.tmp_path / "nothing"),
                 "args": [], "env": []},
                {"type": "http", "name": "web", "url": url,
                 "headers": [{"name": "Authorization", "value": "Bearer sekrit"}]},
                {"type": "http", "name": "web-no-auth", "url": url, "headers": []},
            ]  # fmt: skip
            async with harness.open_bridge(validator=validator) as client:
                await client.initialize()
                new = {"cwd": str(workspace), "mcpServers": servers}
                session_id = (await client.request("session/new", new))["result"]["sessionId"]
                answers = {}
                for server in servers:
                    params = {"sessionId": session_id, "name": server["name"]}
                    if server["name"] == "silent":
                        params["timeoutMs"] = 300
                    answers[server["name"]] = (await call(client, TEST, params))["result"]
                unknown = await call(client, TEST, {"sessionId": session_id, "name": "nope"})
                too_long = await client.request(
                    TEST, {"sessionId": session_id, "name": "good", "timeoutMs": 600_000}
                )
            await harness.assert_no_leftovers()  # every server's group, its child too
            http.kill()
    good = answers["good"]
    assert good["answered"] is True and good["transport"] == "stdio"
    assert good["serverInfo"] == {"name": "fake-mcp", "version": "1.0"}
    assert good["protocolVersion"] == "2025-06-18" and good["capabilities"] == ["tools"]
    kinds = {name: a.get("error", {}).get("kind") for name, a in answers.items()}
    assert kinds == {
        "good": None,
        "refuses": "error_reply",
        "quits": "exited",
        "silent": "timeout",
        "gone": "not_found",
        "web": None,
        "web-no-auth": "error_reply",
    }
    assert "bad version" in answers["refuses"]["error"]["message"]
    assert "exit code 3" in answers["quits"]["error"]["message"]
    assert "0.3 s" in answers["silent"]["error"]["message"]
    assert "not found" in answers["gone"]["error"]["message"]
    assert answers["web"]["serverInfo"]["name"] == "fake-mcp"
    assert "HTTP 401" in answers["web-no-auth"]["error"]["message"]
    assert "sekrit" not in str(answers)
    assert unknown["error"]["code"] == -32602 and "'good'" in unknown["error"]["message"]
    assert too_long["error"]["code"] == -32602 and "timeoutMs" in too_long["error"]["message"]
    assert validator.problems == []
