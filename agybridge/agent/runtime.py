"""A session's runtime snapshot (``_agybridge/session/runtime``, ``/status``).

Read-only views of what the session knows right now; building them does no
I/O and changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session import Session


def runtime(session: Session, *, asking: float | None = None) -> dict[str, Any]:
    """Model, effort, mode, agent, agy, conversation, tokens, tools, MCP
    servers, gate, queue and the running turn, as camelCase JSON.

    ``asking``: the prompt that asks (``/status``), not counted as waiting.
    """
    settings = session.settings
    status = session.core.status()
    child = session.slot.current
    init = session.init_info
    totals = session.book.usage_totals
    return {
        "sessionId": session.session_id,
        "cwd": session.cwd,
        "additionalDirectories": list(session.additional_dirs),
        # The slug agy runs with (None: agy's default), and the name agy's
        # init gave (a display name such as "Gemini 3.1 Pro (Low)").
        "model": settings.model,
        "agyModel": init.model if init else None,
        "effort": settings.effort,
        "mode": settings.mode,
        # agy's own permission mode (init.permission_mode), and whether it
        # makes the mode meaningless (always-proceed the bridge did not ask for).
        "agyPermissionMode": init.permission_mode if init else None,
        "agyPermissionOverride": session.gates.mode_overridden,
        "agent": (init.agent if init and init.agent else None) or settings.agent,
        "agy": {
            "version": session.agy_version,
            "pid": child.pid if child is not None and child.alive else None,
        },
        "conversationId": session.conversation.id,
        "conversationForks": [
            {"asked": asked, "got": got} for asked, got in session.conversation.drift
        ],
        "tokens": {
            "inputTokens": totals.get("inputTokens", 0),
            "outputTokens": totals.get("outputTokens", 0),
            "totalTokens": totals.get("totalTokens", 0),
            "contextUsed": totals.get("contextUsed"),
            "contextSize": totals.get("contextSize"),
        },
        "tools": list(init.tools) if init else [],
        "mcpServers": [server["name"] for server in mcp_servers(session)],
        "gate": status.gate.value,
        # Not the running turn (still at the queue's head), nor the asker.
        "queuedPrompts": sum(1 for seq in status.queued if seq != asking),
        "runningTurn": None
        if status.turn_state is None
        else {
            "turn": session.book.next_turn,
            "state": status.turn_state.value,
            "attempt": status.attempt,
        },
        "mutations": len(session.mutations.entries),
    }


def mcp_servers(session: Session) -> list[dict[str, Any]]:
    """The session's MCP servers as agy was given them, without secrets
    (no env values, no headers)."""
    servers = session.spec.mcp_config.get("mcpServers", {})
    listed = []
    for name, entry in servers.items():
        if "command" in entry:
            listed.append(
                {
                    "name": name,
                    "transport": "stdio",
                    "command": entry["command"],
                    "args": list(entry.get("args", [])),
                    "envNames": sorted(entry.get("env", {})),
                }
            )
        else:
            url = entry.get("serverUrl") or entry.get("url")
            listed.append({"name": name, "transport": "http", "url": url})
    return listed


def status_text(snapshot: dict[str, Any]) -> str:
    """``/status``: the runtime snapshot as Markdown."""
    agy = snapshot["agy"]
    tokens = snapshot["tokens"]
    lines = [
        "**Session status**",
        "",
        f"- session: `{snapshot['sessionId']}`",
        f"- agy conversation: `{snapshot['conversationId'] or 'not started yet'}`",
        f"- cwd: `{snapshot['cwd']}`",
        f"- mode: `{snapshot['mode']}`, model: `{snapshot['model'] or 'default'}`"
        + (f" ({snapshot['agyModel']})" if snapshot["agyModel"] else "")
        + ", "
        f"effort: `{snapshot['effort'] or 'default'}`, agent: `{snapshot['agent'] or 'default'}`",
    ]
    if snapshot["agyPermissionMode"]:
        lines.append(
            f"- agy's own permission mode: `{snapshot['agyPermissionMode']}`"
            + (
                " (agy denies nothing: the mode is not in force)"
                if snapshot["agyPermissionOverride"]
                else ""
            )
        )
    if agy["version"] or agy["pid"]:
        running = f", pid {agy['pid']}" if agy["pid"] else ", not running"
        lines.append(f"- agy: {agy['version'] or 'version unknown'}{running}")
    if tokens["contextUsed"] is not None:
        lines.append(
            f"- context: {tokens['contextUsed']:,} of {tokens['contextSize'] or 0:,} tokens"
        )
    if tokens["totalTokens"]:
        lines.append(
            f"- tokens this session: {tokens['totalTokens']:,} "
            f"(input {tokens['inputTokens']:,}, output {tokens['outputTokens']:,})"
        )
    if snapshot["tools"]:
        lines.append(f"- agy tools: {len(snapshot['tools'])}")
    if snapshot["mcpServers"]:
        lines.append("- MCP servers: " + ", ".join(f"`{n}`" for n in snapshot["mcpServers"]))
    if snapshot["gate"]:
        lines.append(f"- permission gate: {snapshot['gate']}")
    turn = snapshot["runningTurn"]
    if turn is not None:
        # As the chat and `agybridge sessions show` count: the first turn is 1.
        lines.append(f"- running: turn {turn['turn'] + 1} ({turn['state']})")
    if snapshot["queuedPrompts"]:
        lines.append(f"- queued prompts: {snapshot['queuedPrompts']}")
    if snapshot["mutations"]:
        lines.append(f"- file changes recorded: {snapshot['mutations']} (see `/diff`, `/undo`)")
    if snapshot["conversationForks"]:
        forks = len(snapshot["conversationForks"])
        lines.append(f"- agy started a new conversation {forks} time(s)")
    return "\n".join(lines)
