"""``agybridge demo``: a tiny ACP client that shows the bridge working.

It starts ``agybridge`` as a child process, exactly as an editor would (stdio,
NDJSON), with ``AGY_BIN`` pointing at the bundled fake agy, in a temporary
workspace (scenarios that edit files edit there, never in your directory),
and prints what an editor's agent panel would show: one line per event, tool
cards by title and status, and any failure as one line. Nothing here is used
when serving.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import platformdirs
import trio

from fake_agy import SCENARIOS

from .jsonrpc import MessageContext, Peer, RequestContext, RpcError

DEMO_TIMEOUT_S = 120.0
#: The fake agy's scenarios, for ``--scenario`` (validated and listed in --help).
SCENARIO_NAMES = tuple(SCENARIOS)
FAKE_AGY_MODULE = "fake_agy"


def write_fake_agy_launcher(directory: str) -> str:
    """A launcher for the bundled fake agy (AGY_BIN must be one program path).

    Works from a wheel without any console script on PATH.
    """
    path = os.path.join(directory, "fake-agy")
    with open(path, "w", encoding="utf-8") as out:
        out.write(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m {FAKE_AGY_MODULE} "$@"\n')
    os.chmod(path, 0o700)
    return path


def fake_agy_command() -> str:
    """A program path that runs the bundled fake agy (for ``AGY_BIN``):
    ``bin/fake-agy`` in a checkout, else a launcher in the user's cache dir."""
    in_repo = Path(__file__).resolve().parents[1] / "bin" / "fake-agy"
    if in_repo.exists():
        return str(in_repo)
    cache = Path(platformdirs.user_cache_dir("agybridge"))
    cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    return write_fake_agy_launcher(str(cache))


class _DemoClient:
    """Prints session updates the way an agent panel renders them."""

    def __init__(self) -> None:
        self.text_open = False
        self._at_line_start = True
        #: Tool call id -> (title, last status shown).
        self._tools: dict[str, tuple[str, str]] = {}
        self._commands_shown = False

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        pass

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        if method == "session/request_permission":
            call = params["toolCall"]
            title = call.get("title") or self._tools.get(call["toolCallId"], ("a tool", ""))[0]
            self._line(f"[permission] {title}: allowed once")
            options = params.get("options", [])
            allow = next((o for o in options if o.get("kind") == "allow_once"), options[0])
            return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}
        raise RpcError(-32601, f"Method not found: {method!r}")

    async def handle_notification(self, method: str, params: Any, ctx: MessageContext) -> None:
        if method != "session/update":
            return
        update = params["update"]
        kind = update["sessionUpdate"]
        if kind == "agent_message_chunk" and update["content"].get("type") == "text":
            text = update["content"]["text"]
            if not self.text_open:
                text = text.lstrip("\n")
                if not text:
                    return
                print("  agent: ", end="")
                self.text_open = True
            print(text, end="", flush=True)
            self._at_line_start = text.endswith("\n")
            return
        line = self._summary(kind, update)
        if line:
            self._line(line)

    def _summary(self, kind: str, update: dict[str, Any]) -> str | None:
        if kind in ("tool_call", "tool_call_update"):
            call_id = update["toolCallId"]
            title, shown = self._tools.get(call_id, ("tool", ""))
            title = update.get("title") or title
            status = update.get("status") or shown or "pending"
            self._tools[call_id] = (title, status)
            return None if status == shown else f"[tool] {title}: {status}"
        if kind == "available_commands_update" and not self._commands_shown:
            self._commands_shown = True
            names = " ".join("/" + c["name"] for c in update["availableCommands"])
            return f"[commands] {names}"
        if kind == "session_info_update" and update.get("title"):
            return f"[title] {update['title']}"
        if kind == "current_mode_update":
            return f"[mode] {update['currentModeId']}"
        if kind == "plan":
            steps = ", ".join(f"{e['content']} ({e['status']})" for e in update.get("entries", []))
            return f"[plan] {steps}" if steps else None
        if kind == "usage_update":
            return f"[usage] {update['used']} of {update['size']} tokens"
        return None  # config_option_update and the rest: nothing a person needs here

    def _line(self, text: str) -> None:
        self.end_text()
        print(f"  {text}")

    def end_text(self) -> None:
        if self.text_open:
            if not self._at_line_start:
                print()
            self.text_open = False


async def _demo(scenario: str, prompts: list[str], use_real_agy: bool, scratch: str) -> int:
    env = dict(os.environ)
    if not use_real_agy:
        env["AGY_BIN"] = write_fake_agy_launcher(scratch)
        env["FAKE_AGY_SCENARIO"] = scenario
        env.setdefault("FAKE_AGY_STATE_DIR", os.path.join(scratch, "fake-agy-state"))
        # Fake sessions stay out of the user's real session history.
        env.setdefault("AGYBRIDGE_DB", os.path.join(scratch, "demo.db"))
        env.setdefault("AGYBRIDGE_STAGING_DIR", os.path.join(scratch, "staging"))
    env.setdefault("AGYBRIDGE_LOG_FILE", "")
    workspace = os.path.join(scratch, "workspace")
    os.mkdir(workspace, 0o700)
    client = _DemoClient()
    bridge = [sys.executable, "-m", "agybridge"]
    agy = "agy (real)" if use_real_agy else f"fake agy, scenario {scenario}"
    print(f"$ {' '.join(bridge)}   ({agy}; workspace {workspace})")
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            functools.partial(
                trio.run_process,
                bridge,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                check=False,
            )
        )
        assert process.stdin is not None and process.stdout is not None
        peer = Peer(process.stdout, process.stdin, client)
        await nursery.start(peer.run)
        try:
            with trio.fail_after(DEMO_TIMEOUT_S):
                await _conversation(peer, client, workspace, prompts)
            status = 0
        except RpcError as exc:
            client.end_text()
            first = exc.message.splitlines()[0] if exc.message else "(no message)"
            print(f"error {exc.code}: {first}", file=sys.stderr)
            status = 1
        except trio.TooSlowError:
            client.end_text()
            print(f"error: no answer within {DEMO_TIMEOUT_S:.0f} s", file=sys.stderr)
            status = 1
        await process.stdin.aclose()
        await process.wait()
    return status if process.returncode == 0 else 1


async def _conversation(
    peer: Peer, client: _DemoClient, workspace: str, prompts: list[str]
) -> None:
    init = await peer.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
            "clientInfo": {"name": "agybridge-demo", "version": "1"},
        },
    )
    info = init["agentInfo"]
    print(f"initialize -> {info['title']} {info['version']}, protocol {init['protocolVersion']}")
    new = await peer.request("session/new", {"cwd": workspace, "mcpServers": []})
    session_id = new["sessionId"]
    print(f"session/new -> {session_id}")
    for text in prompts or ["Hello from the agybridge demo!"]:
        print(f"you: {text}")
        answer = await peer.request(
            "session/prompt",
            {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        )
        client.end_text()
        print(f"  (turn ended: {answer['stopReason']})")
    await peer.request("session/close", {"sessionId": session_id})
    print("session/close -> ok")


def run_demo(scenario: str, prompts: list[str], *, use_real_agy: bool = False) -> int:
    """Run the demo; returns the exit status for the command line."""
    try:
        with tempfile.TemporaryDirectory(prefix="agybridge-demo-") as scratch:
            return trio.run(_demo, scenario, prompts, use_real_agy, scratch)
    except Exception as exc:  # one line for a person, not a trio traceback
        leaf = exc
        while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]  # type: ignore[assignment]
        print(f"agybridge demo: {type(leaf).__name__}: {leaf}", file=sys.stderr)
        return 1
