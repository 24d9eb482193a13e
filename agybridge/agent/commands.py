"""The bridge's own slash commands, answered without an agy turn:
``/model``, ``/mode``, ``/effort`` (show or change the option), ``/status``
(the runtime snapshot), ``/diff``, ``/undo`` (the mutation log) and ``/doctor``."""

from __future__ import annotations

from collections.abc import Callable

from ..jsonrpc import RpcError
from ..session import Session
from ..session.commands import BridgeCommand
from ..session.config import ConfigValueError
from ..translate.card_text import fenced
from ..workspace.rollback import FORCE_HINT
from .extensions import diff_of, rollback
from .runtime import runtime, status_text


async def run_command(
    session: Session,
    command: BridgeCommand,
    doctor: Callable[[], list[str]],
    seq: float | None = None,
) -> str:
    """The bridge's answer to one of its commands (Markdown); ``seq``: the
    command's prompt (in the session's queue until answered)."""
    if command.name in ("model", "mode", "effort"):
        return await _option_command(session, command)
    if command.name == "status":
        await session.mutations.load()  # a loaded session's log is in the store
        await session.barrier()  # the prompts sent before this one are queued
        return status_text(runtime(session, asking=seq))
    if command.name == "diff":
        return await _diff(session, command.args)
    if command.name == "undo":
        return await _undo(session, command.args)
    return "**agybridge doctor**\n\n" + "\n".join(f"- {line}" for line in doctor())


async def _option_command(session: Session, command: BridgeCommand) -> str:
    option = next(o for o in session.config_options() if o.id == command.name)
    if command.args:
        try:
            # No answer carries the options: the client hears of the change.
            await session.set_config_option(command.name, command.args, announce=True)
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


def shown_turn(turn: int) -> int:
    """A turn as people count it (chat, ``agybridge sessions show``: the first
    is turn 1); the wire's ``turn`` fields count from 0 (docs/extensions.md)."""
    return turn + 1


async def _diff(session: Session, args: str) -> str:
    turn = None
    if args:
        try:
            # int() takes other scripts' digits and "1_0", refuses "²" and 5000 digits.
            shown_number = int(args) if args.isascii() and args.isdigit() else None
        except ValueError:
            shown_number = None
        if shown_number is None or shown_number < 1:
            shown = args if len(args) <= 40 else args[:40] + "…"
            return f"⚠️ `/diff` takes a turn number (1 is the first turn), not {shown!r}."
        turn = shown_number - 1
    diff = await diff_of(session.mutations, turn=turn, since=None, path=None)
    if not diff["files"]:
        where = f"in turn {shown_turn(turn)}" if turn is not None else "in this session"
        return f"No file changes by agy recorded {where}."
    parts = []
    for file in diff["files"]:
        path = f"`{file['path']}`"
        if file["binary"]:
            parts.append(f"{path}: changed (not text)")
        elif "after" in file:
            parts.append(f"{path}: changed (too large to keep, so not shown)")
        elif "before" in file:
            # agy wrote it before the bridge could look: show what it did see.
            seen = (
                f"{path}: its content before agy's first change is unknown "
                "(not seen, or too large to keep)"
            )
            body = fenced(file["diff"], "diff") if file["diff"] else "no change since then"
            parts.append(f"{seen}; since then:\n\n{body}")
        elif file["diff"]:
            parts.append(fenced(file["diff"], "diff"))
        else:
            parts.append(f"{path}: back to how it was")
    return "\n\n".join(parts)


async def _undo(session: Session, args: str) -> str:
    if args not in ("", "force"):
        return f"⚠️ `/undo` takes nothing, or `force`, not {args!r}."
    await session.mutations.load()  # a loaded session's log is in the store
    turn = session.mutations.undo_target()
    if turn is None:
        return "Nothing to undo: agy changed no files in this session (or all is undone)."
    try:
        result = await rollback(session, turn, dry_run=False, force=args == "force")
    except RpcError as exc:
        return f"⚠️ {exc.message.replace(FORCE_HINT, 'send `/undo force` to overwrite them')}."
    files = [f"- `{f['path']}`: {f['action']}" for f in result["files"]]
    return "\n".join(
        [
            f"Undid agy's file changes from turn {shown_turn(turn)} on:",
            *files,
            "",
            "agy is told about it with your next message (its conversation still "
            "remembers making the changes).",
        ]
    )
