"""ACP v2 (the published draft) on one connection: a thin translation at the
wire's edge, never a second agent.

The draft is ``schema/v2/schema.json`` of agentclientprotocol/agent-client-protocol
(pinned in tests/data/acp_v2/README.md). Its own advice is to gate it behind
the version negotiation *and* a feature flag, so a connection speaks it only
when its client asks for protocol 2 (or later) in ``initialize`` and the
bridge runs with ``AGYBRIDGE_ACP_V2=1``; every other connection is v1, byte
for byte (this module is then never called).

What it does, per direction (docs/extensions.md "ACP v2 draft"):

* requests in: v2 params become the v1 params the agent serves (``info`` and
  ``capabilities`` on ``initialize``, optional ``mcpServers``, ``session/resume``
  with ``replayFrom: {type: start}`` is v1's ``session/load``); the methods the
  draft removed are refused with -32601 naming the replacement;
* answers out: the v2 shapes (``initialize``'s capabilities, ``configId``, no
  ``modes``);
* ``session/prompt``: answered ``{}`` once the turn is under way, with the
  ``user_message`` and ``running`` updates, and the turn's end becomes an
  ``idle`` ``state_update`` carrying the stop reason (v1's prompt answer);
* updates out: every chunk carries a ``messageId``, ``tool_call`` becomes the
  first ``tool_call_update``, diffs become ``changes`` plus a ``git_patch``,
  ``plan`` becomes ``plan_update``, mode updates are dropped (v2 has no modes);
* requests to the client: ``session/request_permission`` gets its ``title``
  and a ``tool_call`` subject, framed by ``requires_action`` and ``running``.
"""

from __future__ import annotations

import collections
import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from .. import causes
from ..jsonrpc import ErrorCode, RequestContext, RpcError
from ..jsonrpc.messages import encode_message, notification_message, result_message

VERSION = 2

#: v1 methods the draft removed, and what a v2 client uses instead.
REMOVED = {
    "session/load": "ACP v2 removed session/load: use session/resume with "
    'replayFrom {"type": "start"}',
    "session/set_mode": "ACP v2 removed session/set_mode: modes are the session's "
    "config options (session/set_config_option)",
    "authenticate": "this bridge advertises no authMethods over ACP v2 (v2 ties auth/login "
    "to auth/logout, and agy cannot sign out): sign in with `agybridge login`",
    "logout": "ACP v2 renamed logout to auth/logout, which this bridge does not offer",
}
#: v2-only methods the bridge does not serve (agy cannot sign out: see routes.py).
NOT_SERVED = {
    "auth/login": REMOVED["authenticate"],
    "auth/logout": REMOVED["authenticate"],
}


#: Refusals the catalogue has a cause of their own for.
_REFUSAL_CAUSES = {"logout": "logout_unsupported", "auth/logout": "logout_unsupported"}


def wanted(params: Any, enabled: bool) -> bool:
    """The client asks for protocol 2 or later and the bridge allows v2
    (``AGYBRIDGE_ACP_V2=1``: ``Settings.acp_v2``)."""
    version = params.get("protocolVersion") if isinstance(params, dict) else None
    if isinstance(version, bool) or not isinstance(version, int):
        return False
    return enabled and version >= VERSION


@attrs.define(eq=False)
class _Turn:
    """A v2 ``session/prompt`` from arrival to its idle ``state_update``."""

    ctx: RequestContext
    prompt: Any
    acked: bool = False


class V2Edge:
    """One v2 connection's translation (see the module docstring)."""

    def __init__(self, send_encoded: Callable[[bytes], Awaitable[None]]) -> None:
        self._send = send_encoded
        #: Requests read (wire order), translated: seq -> (v1 method, v1 params, refusal).
        self._routed: dict[int, tuple[str, Any, RpcError | None]] = {}
        #: Each session's prompts in wire order (the session serves them FIFO).
        self._turns: dict[str, collections.deque[_Turn]] = collections.defaultdict(
            collections.deque
        )
        #: The message the last chunk of each session belonged to: (kind, id).
        self._message: dict[str, tuple[str, str]] = {}
        self._ids = itertools.count(1)

    # --- requests from the client -------------------------------------------------

    def request_received(
        self, method: str, params: Any, ctx: RequestContext
    ) -> tuple[str, Any] | None:
        """The v1 method and params of a v2 request, in wire order; None for a
        request v2 refuses (the agent never sees it: it holds no place)."""
        refusal: RpcError | None = None
        why = REMOVED.get(method) or NOT_SERVED.get(method)
        if why is not None:
            refusal = RpcError(
                ErrorCode.METHOD_NOT_FOUND,
                f"Method not found: {method!r} ({why})",
                {"_meta": causes.meta(_REFUSAL_CAUSES.get(method, "unknown_method"))},
            )
        elif isinstance(params, dict):
            method, params = self._v1_request(method, params)
            if method == "session/prompt" and isinstance(params.get("sessionId"), str):
                self._turns[params["sessionId"]].append(_Turn(ctx, params.get("prompt")))
        self._routed[ctx.seq] = (method, params, refusal)
        return None if refusal is not None else (method, params)

    def _v1_request(self, method: str, params: dict[str, Any]) -> tuple[str, Any]:
        if method == "initialize":
            v1 = {
                "protocolVersion": params.get("protocolVersion"),
                "clientCapabilities": _client_capabilities(params.get("capabilities")),
            }
            if "info" in params:
                v1["clientInfo"] = params["info"]
            if "_meta" in params:
                v1["_meta"] = params["_meta"]
            return method, v1
        if method in ("session/new", "session/resume"):
            params = {**params, "mcpServers": _v1_mcp_servers(params.get("mcpServers"))}
        if method == "session/resume":
            replay = params.pop("replayFrom", None)
            if replay is not None:
                if replay != {"type": "start"} and not (
                    isinstance(replay, dict) and replay.get("type") == "start"
                ):
                    return method, {**params, "replayFrom": replay}  # refused below
                return "session/load", params
        return method, params

    async def serve(self, ctx: RequestContext, serve: Callable[[str, Any], Awaitable[Any]]) -> Any:
        """Serve a translated request with ``serve`` (the v1 agent) and answer it in v2."""
        method, params, refusal = self._routed.pop(ctx.seq)
        if refusal is not None:
            raise refusal
        if method == "session/resume" and isinstance(params, dict) and "replayFrom" in params:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                'Invalid params: replayFrom: only {"type": "start"} (replay the whole '
                "conversation) or none is supported",
                {"path": "$.replayFrom"},
            )
        if method == "session/prompt":
            return await self._prompt(ctx, params, serve)
        return _v2_result(method, await serve(method, params))

    async def _prompt(
        self, ctx: RequestContext, params: Any, serve: Callable[[str, Any], Awaitable[Any]]
    ) -> Any:
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        turns = self._turns.get(session_id) if isinstance(session_id, str) else None
        turn = next((t for t in turns or () if t.ctx is ctx), None)
        try:
            try:
                result = await serve("session/prompt", params)
            except RpcError as exc:
                if turn is None or not turn.acked or not isinstance(session_id, str):
                    raise  # refused before it was under way: the prompt's own error
                await self._send(_idle(session_id, "end_turn", _error_meta(exc)))
                return None
            if turn is None or not isinstance(session_id, str):
                return {}
            head = b"" if turn.acked else self._ack(session_id, turn)
            meta = result.get("_meta") if isinstance(result, dict) else None
            stop = result.get("stopReason") if isinstance(result, dict) else None
            await self._send(head + _idle(session_id, stop or "end_turn", meta))
            return None
        finally:
            if turn is not None and turns is not None:
                turns.remove(turn)

    def _ack(self, session_id: str, turn: _Turn) -> bytes:
        """The prompt's ``{}`` answer, its ``user_message`` and ``running``: the
        turn is under way. The peer then writes no answer of its own."""
        turn.acked = True
        turn.ctx.answered = True
        user: dict[str, Any] = {
            "sessionUpdate": "user_message",
            "messageId": f"user-{next(self._ids)}",
        }
        if isinstance(turn.prompt, list):
            user["content"] = turn.prompt
        return (
            encode_message(result_message(turn.ctx.request_id, {}))
            + _update(session_id, user)
            + _state(session_id, "running")
        )

    # --- session/update ---------------------------------------------------------

    def updates(self, session_id: str, v1_lines: bytes) -> bytes:
        """A batch of v1 ``session/update`` lines as v2 lines; the first update of
        a waiting prompt's turn acknowledges that prompt first."""
        turns = self._turns.get(session_id)
        out = self._ack(session_id, turns[0]) if turns and not turns[0].acked else b""
        for line in v1_lines.splitlines():
            message = json.loads(line)
            if message.get("method") != "session/update":  # an _agybridge/* notification
                out += line + b"\n"
                continue
            for update in self._v2_update(session_id, message["params"]["update"]):
                out += _update(session_id, update)
        return out

    def _v2_update(self, session_id: str, update: dict[str, Any]) -> list[dict[str, Any]]:
        kind = update.get("sessionUpdate")
        if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
            if update.get("messageId") is None:
                last = self._message.get(session_id)
                if last is None or last[0] != kind:
                    last = (kind, f"{kind.split('_')[0]}-{next(self._ids)}")
                update = {**update, "messageId": last[1]}
            self._message[session_id] = (str(kind), update["messageId"])
            return [update]
        self._message.pop(session_id, None)  # a chunk after anything else is a new message
        if kind in ("tool_call", "tool_call_update"):
            return [_v2_tool_call({**update, "sessionUpdate": "tool_call_update"})]
        if kind == "plan":
            entries = update.get("entries", [])
            plan = {"type": "items", "planId": "plan", "entries": entries}
            return [_with_meta({"sessionUpdate": "plan_update", "plan": plan}, update)]
        if kind == "current_mode_update":
            return []  # v2 has no modes: the mode is a config option
        if kind == "available_commands_update":
            commands = [_v2_command(c) for c in update.get("availableCommands", [])]
            return [{**update, "availableCommands": commands}]
        if kind == "config_option_update":
            return [{**update, "configOptions": _v2_config_options(update.get("configOptions"))}]
        return [update]

    # --- requests to the client ---------------------------------------------------

    async def ask(
        self, method: str, params: Any, request: Callable[[str, Any], Awaitable[Any]]
    ) -> Any:
        """A request to the client in v2: a permission question names its
        subject and is framed by ``requires_action`` and ``running``."""
        if method != "session/request_permission" or not isinstance(params, dict):
            return await request(method, params)
        session_id = params.get("sessionId")
        tool_call = params.get("toolCall")
        v2 = {k: v for k, v in params.items() if k != "toolCall"}
        if isinstance(tool_call, dict):
            v2["title"] = tool_call.get("title") or "Allow this action?"
            v2["subject"] = {"type": "tool_call", "toolCall": _v2_tool_call(tool_call)}
        else:
            v2["title"] = "Allow this action?"
        if not isinstance(session_id, str):
            return await request(method, v2)
        await self._send(_state(session_id, "requires_action"))
        try:
            return await request(method, v2)
        finally:
            await self._send(
                _update(session_id, {"sessionUpdate": "state_update", "state": "running"})
            )


# --- shapes ------------------------------------------------------------------------


def _update(session_id: str, update: dict[str, Any]) -> bytes:
    return encode_message(
        notification_message("session/update", {"sessionId": session_id, "update": update})
    )


def _state(session_id: str, state: str) -> bytes:
    return _update(session_id, {"sessionUpdate": "state_update", "state": state})


def _idle(session_id: str, stop: str, meta: Any) -> bytes:
    update: dict[str, Any] = {"sessionUpdate": "state_update", "state": "idle", "stopReason": stop}
    if isinstance(meta, dict):
        update["_meta"] = meta
    return _update(session_id, update)


def _error_meta(exc: RpcError) -> dict[str, Any]:
    """A turn that failed after it was under way: v2's idle has no error, so
    the v1 error rides in ``_meta.agybridge.error``."""
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return {"agybridge": {"error": error}}


def _with_meta(update: dict[str, Any], source: dict[str, Any]) -> dict[str, Any]:
    if "_meta" in source:
        update["_meta"] = source["_meta"]
    return update


def _client_capabilities(capabilities: Any) -> dict[str, Any]:
    """v2 client capabilities as v1's (v2 dropped ``fs`` and ``terminal``)."""
    if not isinstance(capabilities, dict):
        return {}
    return {k: capabilities[k] for k in ("auth", "elicitation", "_meta") if k in capabilities}


def _v1_mcp_servers(servers: Any) -> Any:
    """v2's optional ``mcpServers`` (stdio with a ``type``, optional lists) as v1's."""
    if servers is None:
        return []
    if not isinstance(servers, list):
        return servers  # the agent's own check names it
    return [_v1_mcp_server(server) for server in servers]


def _v1_mcp_server(server: Any) -> Any:
    if not isinstance(server, dict):
        return server
    if server.get("type") == "stdio":
        return {"args": [], "env": [], **{k: v for k, v in server.items() if k != "type"}}
    if server.get("type") == "http":
        return {"headers": [], **server}
    return server


def _v2_result(method: str, result: Any) -> Any:
    if not isinstance(result, dict):
        return result
    if method == "initialize":
        return _v2_initialize(result)
    if method in ("session/new", "session/load", "session/resume", "session/set_config_option"):
        result = {k: v for k, v in result.items() if k != "modes"}
        if "configOptions" in result:
            result["configOptions"] = _v2_config_options(result["configOptions"])
    return result


def _v2_initialize(result: dict[str, Any]) -> dict[str, Any]:
    v1 = result.get("agentCapabilities") or {}
    prompt = v1.get("promptCapabilities") or {}
    mcp = v1.get("mcpCapabilities") or {}
    sessions = v1.get("sessionCapabilities") or {}
    session: dict[str, Any] = {
        "prompt": {k: {} for k in ("image", "audio", "embeddedContext") if prompt.get(k)},
        "mcp": {"stdio": {}, **{k: {} for k in ("http",) if mcp.get(k)}},
    }
    for optional in ("delete", "additionalDirectories"):
        if sessions.get(optional) is not None:
            session[optional] = {}
    capabilities: dict[str, Any] = {"session": session}
    if "_meta" in v1:
        capabilities["_meta"] = v1["_meta"]
    v2: dict[str, Any] = {
        "protocolVersion": VERSION,
        "info": result.get("agentInfo"),
        "capabilities": capabilities,
        # No authMethods: v2 ties them to auth/login *and* auth/logout, and agy
        # cannot sign out (routes.py NOT_OFFERED); signing in stays `agybridge login`.
    }
    if "_meta" in result:
        v2["_meta"] = result["_meta"]
    return v2


def _v2_config_options(options: Any) -> Any:
    if not isinstance(options, list):
        return options
    return [
        {("configId" if k == "id" else k): v for k, v in option.items()}
        if isinstance(option, dict)
        else option
        for option in options
    ]


def _v2_command(command: Any) -> Any:
    if isinstance(command, dict) and isinstance(command.get("input"), dict):
        return {**command, "input": {"type": "text", **command["input"]}}
    return command


def _v2_tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """A v1 tool call (or its update) as v2's upsert: diffs restructured,
    terminal references dropped (v1's name a client terminal; v2's are the
    agent's own display terminals, which the bridge does not keep)."""
    content = call.get("content")
    if not isinstance(content, list):
        return call
    v2 = [_v2_diff(c) if c.get("type") == "diff" else c for c in content if isinstance(c, dict)]
    return {**call, "content": [c for c in v2 if c.get("type") != "terminal"]}


def _v2_diff(diff: dict[str, Any]) -> dict[str, Any]:
    path, old, new = diff.get("path"), diff.get("oldText"), diff.get("newText")
    change = {"operation": "add" if old is None else "modify", "path": path, "fileType": "text"}
    v2: dict[str, Any] = {"type": "diff", "changes": [change]}
    if isinstance(path, str) and isinstance(new, str):
        v2["patch"] = {"format": "git_patch", "text": git_patch(path, old, new)}
    return _with_meta(v2, diff)


def git_patch(path: str, old: str | None, new: str) -> str:
    """One ``diff --git`` section (Git's ``--patch`` text) for a text file
    at the absolute ``path``; ``old`` None: the file is new."""
    import difflib  # noqa: PLC0415 (only a v2 connection's diffs need it)

    head = f"diff --git {path} {path}\n"
    if old is None:
        head += "new file mode 100644\n"
    body = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        "/dev/null" if old is None else path,
        path,
    )
    lines = []
    for line in body:
        if line.endswith("\n"):
            lines.append(line)
        else:  # the last line of a file without a final newline
            lines.append(line + "\n\\ No newline at end of file\n")
    return head + "".join(lines)
