"""One attempt at one cell: start a bridge, talk ACP to it like an editor, stop it.

Theory of operation: the attempt owns its bridge process (own process group) and a
nursery with the jsonrpc `Peer` reading the bridge's stdout. Inside ``timeout_s`` it
runs the conversation (``initialize``, ``session/new`` with the cell's axes as
``_meta``, each prompt in turn) next to a budget watcher: when ``budget.max_seconds``
passes or the tokens pass ``budget.max_tokens``, the watcher sends ``session/cancel``,
gives the bridge ``CANCEL_GRACE_S`` to answer the turn ``cancelled``, then stops the
conversation. Whatever happens (end, error, timeout, Ctrl-C) the bridge is then ended
by `processes.stop` while the peer still drains its stdout, and the cell's environment
marker is swept.
"""

from __future__ import annotations

import base64
import math
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from .. import media
from ..jsonrpc import Peer, PeerClosedError, RpcError
from . import causes, processes
from .causes import Cause, from_agy_error, from_rpc_error
from .client import CellClient
from .model import Cell, RunConfig
from .results import CellRecord, TurnRecord

#: How long a cancelled turn may take to answer before the runner stops waiting.
CANCEL_GRACE_S = 10.0
#: The variable every process of a cell carries (see `processes.marked`).
CELL_MARKER = "AGYBRIDGE_SMOKE_CELL"
_STDERR_TAIL_LINES = 8
#: agy's version is a nicety for the report: never worth holding a cell up for.
_VERSION_WAIT_S = 5.0


@attrs.frozen
class Setup:
    """What every cell of a run shares."""

    bridge_argv: tuple[str, ...]
    env: Mapping[str, str]
    scratch: Path
    run: RunConfig
    run_id: str
    #: The bridge is ours (not ``--bridge``): check each cell's AGY_BIN before starting it.
    check_agy: bool = False


def find_agy(env: Mapping[str, str]) -> str | None:
    """agy as the bridge finds it: ``AGY_BIN`` (a path or a name on PATH), else ``agy``."""
    name = env.get("AGY_BIN") or "agy"
    if os.sep in name:
        path = Path(name).expanduser()
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH"))


def agy_problem(env: Mapping[str, str]) -> Cause | None:
    """Why the agy this environment names cannot be run (a catalogue cause), or None."""
    if find_agy(env) is not None:
        return None
    name = env.get("AGY_BIN")
    if not name:
        return Cause("agy_not_found", "agy is not on PATH and AGY_BIN is not set")
    path = Path(name).expanduser()
    if os.sep in name and path.is_dir():
        return Cause("agy_is_directory", f"AGY_BIN={name} is a directory, not the agy program")
    if os.sep in name and path.exists():
        return Cause("agy_not_executable", f"AGY_BIN={name} is not executable")
    return Cause("agy_not_found", f"AGY_BIN={name} does not exist (nor is it a program on PATH)")


async def run_attempt(
    cell: Cell, setup: Setup, attempt: int, on_line: Callable[[str], None]
) -> tuple[CellRecord, Cause | None, list[str]]:
    """Run ``cell`` once; returns what it saw, the error (if any) and leftovers."""
    record = CellRecord()
    cell_dir = setup.scratch / f"{cell.index:03d}-{attempt}"
    workspace = cell_dir / "workspace"
    if setup.run.workspace is not None:
        await trio.to_thread.run_sync(
            lambda: shutil.copytree(setup.run.workspace, workspace, symlinks=True)  # type: ignore[arg-type]
        )
    else:
        workspace.mkdir(parents=True)
    record.workspace = str(workspace)
    if setup.check_agy:
        unusable = agy_problem({**setup.env, **setup.run.env, **cell.env})
        if unusable is not None:
            return record, unusable, []
    marker = f"{setup.run_id}-{cell.index}-{attempt}"
    env = {**setup.env, **setup.run.env, **cell.env, CELL_MARKER: marker}
    stderr_path = cell_dir / "bridge.stderr"
    conversation = _Conversation(cell, setup, record, workspace, on_line)
    with stderr_path.open("wb") as stderr:
        try:
            process = await processes.spawn(setup.bridge_argv, env, cell_dir, stderr)
        except OSError as exc:
            argv0 = setup.bridge_argv[0]
            return record, Cause("bridge_start", f"cannot start the bridge {argv0!r}: {exc}"), []
    cause = await conversation.run(process)
    if cause is not None and cause.kind in ("bridge_crash", "bridge_start"):
        tail = stderr_path.read_text(errors="replace").splitlines()[-_STDERR_TAIL_LINES:]
        cause = attrs.evolve(cause, details={**cause.details, "stderr_tail": tail})
    # Bounded by its grace; a cancelled run (a signal) must still sweep the cell.
    with trio.CancelScope(shield=True):
        leftovers = await processes.reap_marked(CELL_MARKER, marker)
    return record, cause, leftovers


class _Conversation:
    def __init__(
        self,
        cell: Cell,
        setup: Setup,
        record: CellRecord,
        workspace: Path,
        on_line: Callable[[str], None],
    ) -> None:
        self.cell = cell
        self.setup = setup
        self.record = record
        self.workspace = workspace
        self.overrun = trio.Event()
        self.prompting = trio.Event()
        self.turn_running = False
        #: The runner sent ``session/cancel`` (a budget): a `cancelled` turn is then no surprise.
        self.cancel_sent = False
        #: What the conversation waits for (named by a timeout).
        self.phase = "starting the bridge"
        self.started = trio.current_time()
        self.session_id: str | None = None
        self.initialized = False
        self.client = CellClient(
            record, cell.case.permissions, self.started, on_line, self._check_tokens
        )

    def _check_tokens(self) -> None:
        limit = self.cell.case.budget.max_tokens
        if limit is not None and self.record.tokens > limit and not self.overrun.is_set():
            self.record.budget_exceeded = (
                f"budget.max_tokens {limit} exceeded ({self.record.tokens} tokens)"
            )
            self.overrun.set()

    async def run(self, process: trio.Process) -> Cause | None:
        assert process.stdin is not None and process.stdout is not None
        cause: Cause | None = None
        peer = Peer(process.stdout, process.stdin, self.client)
        async with trio.open_nursery() as nursery:
            await nursery.start(peer.run)
            try:
                with trio.move_on_after(self.setup.run.timeout_s) as timeout:
                    cause = await self._talk(peer, process)
                cause = self._explain(cause, timeout.cancelled_caught)
            finally:
                # Cancelled from outside (Ctrl-C): the peer no longer reads the bridge's
                # stdout, so a bridge writing to it must not block its own shutdown.
                abandoned = trio.current_effective_deadline() == -math.inf
                with trio.CancelScope(shield=True):
                    if abandoned:
                        await process.stdout.aclose()
                    how = await processes.stop(process)
                self.client.line(f"[bridge stopped: {how}, exit code {process.returncode}]")
                nursery.cancel_scope.cancel(reason="the bridge has stopped")
        return cause

    def _explain(self, cause: Cause | None, timed_out: bool) -> Cause | None:
        """A failure before ``initialize`` is "bridge_start"; a timeout names its phase.

        A bridge that is merely slow to start (a loaded machine) is a timeout, not a
        bridge that cannot start.
        """
        if timed_out:
            limit = f"run.timeout_s = {self.setup.run.timeout_s:g} s"
            return Cause("timeout", f"the cell took longer than {limit} ({self.phase})")
        if not self.initialized and cause is not None and cause.kind != "bridge_start":
            return Cause("bridge_start", f"the bridge did not answer initialize: {cause.message}")
        return cause

    async def _talk(self, peer: Peer, process: trio.Process) -> Cause | None:
        result: list[Cause | None] = [None]

        async def converse() -> None:
            try:
                result[0] = await self._converse(peer)
            except RpcError as exc:
                result[0] = from_rpc_error(exc, self.setup.run.retry_max_wait_s)
            except PeerClosedError:
                with trio.move_on_after(2.0):
                    await process.wait()
                result[0] = Cause(
                    "bridge_crash",
                    f"the bridge closed the connection (exit code {process.returncode})",
                )
            nursery.cancel_scope.cancel(reason="the conversation is over")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(converse)
            nursery.start_soon(self._watch_budget, peer, nursery.cancel_scope)
        return result[0]

    async def _watch_budget(self, peer: Peer, conversation: trio.CancelScope) -> None:
        """Budgets count from the first prompt: bridge and agy start-up are not the model's."""
        limit = self.cell.case.budget.max_seconds
        await self.prompting.wait()
        deadline = trio.current_time() + limit if limit is not None else math.inf
        with trio.move_on_at(deadline):
            await self.overrun.wait()
        if not self.overrun.is_set():
            self.record.budget_exceeded = f"budget.max_seconds {limit:g} s exceeded"
            self.overrun.set()
        self.client.line(f"[budget] {self.record.budget_exceeded}: cancelling the cell")
        if self.turn_running:
            assert self.session_id is not None
            self.cancel_sent = True
            await peer.notify("session/cancel", {"sessionId": self.session_id})
            # The turn answers `cancelled` and the conversation ends; past the grace, stop it.
            await trio.sleep(CANCEL_GRACE_S)
        conversation.cancel(reason="budget exceeded")

    async def _converse(self, peer: Peer) -> Cause | None:
        self.phase = "waiting for the initialize response"
        info = await peer.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
                "clientInfo": {"name": "agybridge-smoke", "version": "1"},
            },
        )
        self.initialized = True
        self.record.bridge_start_s = self.client.now()
        agent = info.get("agentInfo") if isinstance(info, dict) else None
        self.record.agent_info = agent if isinstance(agent, dict) else {}
        params: dict[str, Any] = {"cwd": str(self.workspace), "mcpServers": []}
        if self.cell.session_meta():
            params["_meta"] = self.cell.session_meta()
        self.phase = "waiting for the session/new response"
        new = await peer.request("session/new", params)
        self.session_id = str(new["sessionId"])
        self.record.session_ready_s = self.client.now()
        self.client.line(f"[session {self.session_id} {self.cell.label}]")
        attachments = await trio.to_thread.run_sync(_attachment_blocks, self.cell.case.attachments)
        last = len(self.cell.prompts) - 1
        for index, text in enumerate(self.cell.prompts):
            blocks = [{"type": "text", "text": text}, *(attachments if index == 0 else [])]
            if self.overrun.is_set():
                break
            if index == last:
                refused = await self._set_config(peer)
                if refused is not None:
                    return refused
            self.record.turns.append(TurnRecord(prompt=text, sent_s=self.client.now()))
            self.client.line(f"> {text}")
            self.phase = f"waiting for the response to prompt {index + 1}"
            self.prompting.set()
            self.turn_running = True
            try:
                answer = await peer.request(
                    "session/prompt", {"sessionId": self.session_id, "prompt": blocks}
                )
            except RpcError as exc:
                if index != last or self.cell.case.expect.error is None:
                    raise
                # The case expects this refusal: the expectation judges its cause.
                refused = from_rpc_error(exc, self.setup.run.retry_max_wait_s)
                self.record.turns[-1].refused = refused.kind
                self.client.line(f"[refused: {refused.kind}] {exc.message}")
                break
            finally:
                self.turn_running = False
            self.client.response(answer)
            turn = self.record.turns[-1]
            cause = self._turn_cause(turn)
            if cause is not None:
                turn.end_cause = cause.kind
                return cause
            if self.record.budget_exceeded or turn.stop_reason == "cancelled":
                break
        if self.cell.case.expect.listed:
            self.phase = "waiting for the session/list response"
            listed = await peer.request("session/list", {"cwd": str(self.workspace)})
            ids = [s.get("sessionId") for s in listed.get("sessions", []) if isinstance(s, dict)]
            self.record.listed = self.session_id in ids
            self.client.line(f"[session/list] {len(ids)} session(s)")
        await self._ask_agy_version(peer)
        return None

    async def _set_config(self, peer: Peer) -> Cause | None:
        """The case's ``set_config``, before its last prompt. An error answer fails the
        cell (raised); so does an answer whose options show another value for the id."""
        for config_id, value in self.cell.case.set_config.items():
            self.phase = f"waiting for the set_config_option {config_id} response"
            params = {"sessionId": self.session_id, "configId": config_id, "value": value}
            answer = await peer.request("session/set_config_option", params)
            self.client.line(f"[set_config_option] {config_id} = {value}")
            options = answer.get("configOptions", []) if isinstance(answer, dict) else []
            for option in options:
                current = option.get("currentValue") if isinstance(option, dict) else None
                if option.get("id") == config_id and current != value:
                    shown = f"set_config_option {config_id} = {value!r} answered {current!r}"
                    return Cause("bridge_error", shown)
        return None

    def _turn_cause(self, turn: TurnRecord) -> Cause | None:
        """Why a turn that was answered did not end normally, if it did not."""
        named = causes.from_response_meta(turn.meta, self.setup.run.retry_max_wait_s)
        if named is not None:
            return named
        if turn.agy_error:
            return from_agy_error(turn.agy_error, self.setup.run.retry_max_wait_s)
        if turn.stop_reason == "cancelled" and not self.cancel_sent:
            return causes.interrupted()
        return causes.from_notices(turn.text)

    async def _ask_agy_version(self, peer: Peer) -> None:
        """agy's version for the reports, from the bridge's runtime extension if it has one."""
        with trio.move_on_after(_VERSION_WAIT_S):
            try:
                runtime = await peer.request(
                    "_agybridge/session/runtime", {"sessionId": self.session_id}
                )
            except RpcError:
                return
            agy = runtime.get("agy") if isinstance(runtime, dict) else None
            version = agy.get("version") if isinstance(agy, dict) else None
            if isinstance(version, str):
                self.record.agy_version = version


def _attachment_blocks(paths: tuple[Path, ...]) -> list[dict[str, Any]]:
    """Images (the bytes decide) inline; every other file as a resource link."""
    blocks: list[dict[str, Any]] = []
    for path in paths:
        data = path.read_bytes()
        mime = media.sniff_image_type(data)
        if mime is not None:
            blocks.append(
                {"type": "image", "mimeType": mime, "data": base64.b64encode(data).decode()}
            )
        else:
            blocks.append(
                {
                    "type": "resource_link",
                    "uri": path.as_uri(),
                    "name": path.name,
                    "size": len(data),
                }
            )
    return blocks
