"""The bridge's own slash commands, answered without an agy turn:
``/model``, ``/mode``, ``/effort`` (show or change the option), ``/status``
and ``/doctor``."""

from __future__ import annotations

from collections.abc import Callable

from ..session import Session
from ..session.commands import BridgeCommand
from ..session.config import DEFAULT, ConfigValueError


async def run_command(
    session: Session, command: BridgeCommand, doctor: Callable[[], list[str]]
) -> str:
    """The bridge's answer to one of its commands (Markdown)."""
    if command.name in ("model", "mode", "effort"):
        return await _option_command(session, command)
    if command.name == "status":
        return _status(session)
    return "**agybridge doctor**\n\n" + "\n".join(f"- {line}" for line in doctor())


async def _option_command(session: Session, command: BridgeCommand) -> str:
    option = next(o for o in session.config_options() if o.id == command.name)
    if command.args:
        try:
            await session.set_config_option(command.name, command.args)
        except ConfigValueError as exc:
            return f"⚠️ {exc}"
        option = next(o for o in session.config_options() if o.id == command.name)
        busy = " (from the next turn: a turn is running)" if session.busy else ""
        return f"{option.name} set to `{option.current_value}`{busy}."
    lines = [f"**{option.name}**: `{option.current_value}`", ""]
    for choice in option.options:
        marker = "→" if choice.value == option.current_value else "•"
        detail = f" — {choice.description}" if choice.description else ""
        lines.append(f"{marker} `{choice.value}` {choice.name}{detail}")
    lines += ["", f"Change it with `/{command.name} <value>`."]
    return "\n".join(lines)


def _status(session: Session) -> str:
    settings = session.settings
    totals = dict(session.book.usage_totals)
    lines = [
        "**Session status**",
        "",
        f"- session: `{session.session_id}`",
        f"- agy conversation: `{session.conversation.id or 'not started yet'}`",
        f"- cwd: `{session.cwd}`",
        f"- mode: `{settings.mode}`, model: `{settings.model or DEFAULT}`, "
        f"effort: `{settings.effort or DEFAULT}`",
    ]
    if session.agy_version:
        lines.append(f"- agy version: {session.agy_version}")
    if "contextUsed" in totals:
        lines.append(f"- context: {totals['contextUsed']:,} of {totals['contextSize']:,} tokens")
    if "totalTokens" in totals:
        lines.append(
            f"- tokens this session: {totals['totalTokens']:,} "
            f"(input {totals.get('inputTokens', 0):,}, output {totals.get('outputTokens', 0):,})"
        )
    if session.conversation.drift:
        drift = len(session.conversation.drift)
        lines.append(f"- agy started a new conversation {drift} time(s)")
    return "\n".join(lines)
