"""``agybridge sessions list|show|delete|export``: the stored sessions from a terminal.

Reads and writes the same SQLite database the bridge uses (WAL: safe while
editors run bridges). Deleting removes the bridge's index entry and display
journal; agy's own conversation files (``~/.gemini/antigravity-cli``) stay.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .acp.text_check import encodes_utf8
from .store import JournalEntry, SessionRecord, Store, StoreError

_PAGE = 200


def add_parser(commands: Any) -> None:
    """The ``sessions`` subcommand and its actions (argparse subparsers)."""
    sessions = commands.add_parser("sessions", help="list, show, delete or export stored sessions")
    actions = sessions.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="sessions, newest first")
    listing.add_argument("--cwd", help="only sessions of this directory")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    show = actions.add_parser("show", help="a session's history as readable text")
    show.add_argument("session_id")
    show.add_argument("--json", action="store_true", help="machine-readable output")
    delete = actions.add_parser("delete", help="forget sessions (agy's files are kept)")
    delete.add_argument("session_id", nargs="+")
    export = actions.add_parser("export", help="a session as Markdown")
    export.add_argument("session_id")
    export.add_argument("-o", "--output", type=Path, help="write to this file (default: stdout)")


def run(args: argparse.Namespace, db_path: Path | None) -> int:
    """Run one ``sessions`` action; returns the exit status."""
    if db_path is None or not db_path.exists():
        if args.action == "list":
            print("[]" if args.json else f"no sessions yet (no database at {db_path})")
            return 0
        print(f"agybridge: no session database at {db_path}", file=sys.stderr)
        return 1
    try:
        with Store.open(db_path) as store:
            status = _ACTIONS[args.action](store, args)
        sys.stdout.flush()  # here, so a closed pipe is seen below, not at exit
        return status
    except StoreError as exc:
        print(f"agybridge: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`agybridge sessions list | head`): stop quietly, as
        # other Unix tools do; what is still buffered goes nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _list(store: Store, args: argparse.Namespace) -> int:
    # A --cwd that is not UTF-8 (stray bytes on the command line) matches no session.
    records = list(_all_sessions(store, args.cwd)) if encodes_utf8(args.cwd or "") else []
    if args.json:
        print(json.dumps([_record_json(r) for r in records], indent=2, ensure_ascii=False))
        return 0
    if not records:
        print("no sessions")
        return 0
    print(table([(r.session_id, r.updated_at, r.title or "(untitled)", r.cwd) for r in records]))
    return 0


def _show(store: Store, args: argparse.Namespace) -> int:
    record = _get(store, args.session_id)
    if record is None:
        return 1
    journal = store.journal(record.session_id)
    if args.json:
        doc = _record_json(record) | {"journal": [_entry_json(e) for e in journal]}
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        print("\n".join(history_text(record, journal)))
    return 0


def _delete(store: Store, args: argparse.Namespace) -> int:
    missing = 0
    for session_id in args.session_id:
        if encodes_utf8(session_id) and store.delete_session(session_id):
            print(f"deleted {session_id}")
        else:
            print(f"agybridge: no session {session_id!r}", file=sys.stderr)
            missing += 1
    return 1 if missing else 0


def _export(store: Store, args: argparse.Namespace) -> int:
    record = _get(store, args.session_id)
    if record is None:
        return 1
    text = markdown(record, store.journal(record.session_id))
    if args.output is None:
        sys.stdout.write(text)
    else:
        try:
            args.output.write_text(text, encoding="utf-8")
        except OSError as exc:
            print(f"agybridge: cannot write {args.output}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        print(f"wrote {args.output}")
    return 0


_ACTIONS = {"list": _list, "show": _show, "delete": _delete, "export": _export}


def _get(store: Store, session_id: str) -> SessionRecord | None:
    record = store.get_session(session_id) if encodes_utf8(session_id) else None
    if record is None:
        print(
            f"agybridge: no session {session_id!r} (`agybridge sessions list` shows them)",
            file=sys.stderr,
        )
    return record


def _all_sessions(store: Store, cwd: str | None) -> Iterator[SessionRecord]:
    cursor: str | None = None
    while True:
        records, cursor = store.list_sessions(cwd=cwd, cursor=cursor, limit=_PAGE)
        yield from records
        if cursor is None:
            return


def table(rows: Sequence[tuple[str, ...]]) -> str:
    """Left-aligned columns under a header (pure)."""
    header = ("SESSION", "UPDATED", "TITLE", "CWD")
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    )


def history_text(record: SessionRecord, journal: Sequence[JournalEntry]) -> list[str]:
    """A session's journal as terminal text (pure)."""
    lines = [
        f"session {record.session_id}: {record.title or '(untitled)'}",
        f"cwd {record.cwd}, created {record.created_at}, updated {record.updated_at}",
    ]
    if record.conversation_id:
        lines.append(f"agy conversation {record.conversation_id}")
    turn = None
    for entry in journal:
        if entry.turn != turn:
            turn = entry.turn
            lines += ["", f"--- turn {turn + 1} ---"]
        if entry.kind == "user":
            lines.append(f"you: {entry.text or ''}")
        elif entry.kind == "agent":
            lines.append(f"agent: {entry.text or ''}")
        else:
            lines.append(f"[{entry.tool_kind or 'tool'}] {_tool(entry)}")
    if not journal:
        lines += ["", "(no turns yet)"]
    return lines


def markdown(record: SessionRecord, journal: Sequence[JournalEntry]) -> str:
    """A session as a Markdown document (pure)."""
    out = [
        f"# {record.title or 'Session ' + record.session_id}",
        "",
        f"- Session: `{record.session_id}`",
        f"- Directory: `{record.cwd}`",
        f"- Created: {record.created_at}; updated: {record.updated_at}",
    ]
    if record.conversation_id:
        out.append(f"- agy conversation: `{record.conversation_id}`")
    for entry in journal:
        if entry.kind == "user":
            out += ["", f"## You (turn {entry.turn + 1})", "", entry.text or ""]
        elif entry.kind == "agent":
            out += ["", "## Agent", "", entry.text or ""]
        else:
            out += ["", f"- {entry.tool_kind or 'tool'}: {_tool(entry)}"]
    return "\n".join(out).rstrip("\n") + "\n"


def _tool(entry: JournalEntry) -> str:
    return f"{entry.tool_title or 'Tool call'} ({entry.tool_status or 'unknown'})"


def _record_json(record: SessionRecord) -> dict[str, Any]:
    return {
        "sessionId": record.session_id,
        "cwd": record.cwd,
        "additionalDirectories": list(record.additional_dirs),
        "title": record.title,
        "conversationId": record.conversation_id,
        "createdAt": record.created_at,
        "updatedAt": record.updated_at,
    }


def _entry_json(entry: JournalEntry) -> dict[str, Any]:
    return {
        "turn": entry.turn,
        "kind": entry.kind,
        "text": entry.text,
        "toolKind": entry.tool_kind,
        "toolTitle": entry.tool_title,
        "toolStatus": entry.tool_status,
        "createdAt": entry.created_at,
    }
