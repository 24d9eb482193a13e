"""``agybridge demo``: a tiny ACP client that shows the bridge working.

It starts ``agybridge`` as a child process, exactly as an editor would (stdio,
NDJSON), with ``AGY_BIN`` pointing at the bundled fake agy, and prints what an
editor's agent panel would show. Nothing here is used when serving.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from .jsonrpc import MessageContext, Peer, RequestContext, RpcError

DEMO_TIMEOUT_S = 120.0


def fake_agy_command() -> str:
    """The fake agy launcher: the installed ``fake-agy`` script or ``bin/fake-agy``."""
    beside_python = Path(sys.executable).parent / "fake-agy"
    if beside_python.exists():
        return str(beside_python)
    in_repo = Path(__file__).resolve().parents[1] / "bin" / "fake-agy"
    if in_repo.exists():
        return str(in_repo)
    found = shutil.which("fake-agy")
    if found is None:
        raise FileNotFoundError("fake-agy not found; install agybridge with pip first")
    return found


class _DemoClient:
    """Prints session updates the way an agent panel renders them."""

    def __init__(self) -> None:
        self.text_open = False

    def request_received(self, method: str, params: Any, ctx: RequestContext) -> None:
        pass

    async def handle_request(self, method: str, params: Any, ctx: RequestContext) -> Any:
        if method == "session/request_permission":
            self._end_text()
            print(f"  [permission asked] {params['toolCall'].get('title', '?')} -> allowed once")
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
            if not self.text_open:
                print("  agent: ", end="")
                self.text_open = True
            print(update["content"]["text"], end="", flush=True)
            return
        self._end_text()
        print(f"  [{kind}] {_summary(update)}")

    def _end_text(self) -> None:
        if self.text_open:
            print()
            self.text_open = False


def _summary(update: dict[str, Any]) -> str:
    if "availableCommands" in update:
        return " ".join("/" + c["name"] for c in update["availableCommands"])
    if "toolCallId" in update:
        return f"{update.get('title', update['toolCallId'])} ({update.get('status', '')})"
    for key in ("title", "status", "used"):
        if key in update:
            return f"{key}={update[key]!r}"
    return ""


async def _demo(scenario: str, prompts: list[str], use_real_agy: bool, scratch: str) -> int:
    env = dict(os.environ)
    if not use_real_agy:
        env["AGY_BIN"] = fake_agy_command()
        env["FAKE_AGY_SCENARIO"] = scenario
        # Fake sessions stay out of the user's real session history.
        env.setdefault("AGYBRIDGE_DB", os.path.join(scratch, "demo.db"))
        env.setdefault("AGYBRIDGE_STAGING_DIR", os.path.join(scratch, "staging"))
    env.setdefault("AGYBRIDGE_LOG_FILE", "")
    client = _DemoClient()
    bridge = [sys.executable, "-m", "agybridge"]
    print(f"$ {' '.join(bridge)}   (AGY_BIN={env.get('AGY_BIN', 'agy')}, scenario={scenario})")
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
        with trio.fail_after(DEMO_TIMEOUT_S):
            init = await peer.request(
                "initialize",
                {
                    "protocolVersion": 1,
                    "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
                    "clientInfo": {"name": "agybridge-demo", "version": "1"},
                },
            )
            info = init["agentInfo"]
            version = init["protocolVersion"]
            print(f"initialize -> {info['title']} {info['version']}, protocol {version}")
            new = await peer.request("session/new", {"cwd": os.getcwd(), "mcpServers": []})
            session_id = new["sessionId"]
            print(f"session/new -> {session_id}")
            for text in prompts or ["Hello from the agybridge demo!"]:
                print(f"\nyou: {text}")
                answer = await peer.request(
                    "session/prompt",
                    {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
                )
                client._end_text()
                print(f"  (turn ended: {answer['stopReason']})")
            await peer.request("session/close", {"sessionId": session_id})
            print("\nsession/close -> ok")
        await process.stdin.aclose()
        await process.wait()
    return 0 if process.returncode == 0 else 1


def run_demo(scenario: str, prompts: list[str], *, use_real_agy: bool = False) -> int:
    """Run the demo; returns the exit status for the command line."""
    try:
        with tempfile.TemporaryDirectory(prefix="agybridge-demo-") as scratch:
            return trio.run(_demo, scenario, prompts, use_real_agy, scratch)
    except RpcError as exc:
        print(f"\nerror {exc.code}: {exc.message} {exc.data or ''}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"agybridge demo: {exc}", file=sys.stderr)
        return 1
