"""One-time import of an agy-acp-map installation (``sessions.json`` + ``history/*.jsonl``).

The format, as agy-acp-map writes it (``src/lib/session-store.ts``,
``src/lib/session-history.ts``):

* ``sessions.json``: ``{"version": 1, "sessions": [record, ...]}`` (older files: a bare
  array of records). A record needs string ``sessionId`` and ``cwd``; optional
  ``conversationId``, ``title``, ``additionalDirectories`` (strings), the launch
  settings of `LAUNCH_FIELDS`, ``protocolVersion`` (1 or 2, the ACP version it was
  created with), and ``createdAt``/``updatedAt`` (JavaScript ``toISOString``).
* ``history/<encodeURIComponent(sessionId)>.jsonl``: per turn a user line and, when the
  turn showed text, an assistant line: ``{"version": 1, "sessionId", "messageId"
  ("history_user_<uuid>" / "history_agent_<uuid>"), "role": "user" | "assistant",
  "text", "createdAt", "partial"?: true}``. Tool calls were never recorded. A torn
  last line is normal (appends are not atomic).

Bad user data never raises: unusable records and lines are skipped and reported in
`ImportReport.warnings` (and logged). Usable session ids are kept so editors can
still load their sessions; an id that is not usable gets a fresh one (`renamed`).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any
from urllib.parse import quote

import attrs

from .db import Store
from .models import (
    JournalEntry,
    JournalKind,
    SessionRecord,
    canonical_timestamp,
    format_timestamp,
    utc_now,
)

logger = logging.getLogger(__name__)

#: The `Store.meta_get` flag set once an import has run.
IMPORT_FLAG = "legacy.agy_acp_map.imported"
#: agy-acp-map record field -> our `SessionRecord.launch` key (booleans become "true"/"false").
LAUNCH_FIELDS: Mapping[str, str] = {
    "model": "model",
    "effort": "effort",
    "mode": "mode",
    "agent": "agent",
    "safety": "safety",
    "sandbox": "sandbox",
    "jsonSchema": "json_schema",
    "printTimeout": "print_timeout",
    "disableSlashCommands": "disable_slash_commands",
    "skipPermissions": "skip_permissions",
}
MAX_SESSION_ID_CHARS = 256
TITLE_CHARS = 80
#: What JavaScript's encodeURIComponent leaves as is (besides letters and digits).
_URI_COMPONENT_SAFE = "-_.!~*'()"
_RENAMED_NAMESPACE = uuid.UUID("5d1f0c3e-6f4b-4b8e-9a37-0a9b8c7d6000")


@attrs.frozen
class ImportReport:
    """What an import did."""

    #: Why nothing was imported (already done, no file), or None when it ran.
    skipped: str | None = None
    sessions_imported: int = 0
    #: Sessions whose id was already stored (left as they were).
    sessions_present: int = 0
    #: Records that could not be used (no cwd, ...).
    sessions_rejected: int = 0
    journal_entries: int = 0
    #: agy-acp-map session id -> the new id, for ids that were not usable.
    renamed: Mapping[str, str] = attrs.field(factory=dict)
    warnings: tuple[str, ...] = ()


def import_agy_acp_map(store: Store, *, sessions_file: Path, history_dir: Path) -> ImportReport:
    """Import agy-acp-map's sessions and display histories into ``store``, once.

    Sets the `IMPORT_FLAG` flag after reading a sessions file, so later calls return
    at once; a missing or unreadable file leaves the flag unset. Re-running is harmless
    anyway: each session is created with its journal in one transaction, and ids
    already stored are not touched. Synchronous (file and database I/O): call it
    through `AsyncStore.run_sync` from trio.

    Raises:
        StoreError: the database failed; what was imported stays, a re-run completes it.
    """
    done = store.meta_get(IMPORT_FLAG)
    if done is not None:
        when = done.get("at", "?") if isinstance(done, dict) else done
        return ImportReport(skipped=f"agy-acp-map sessions were already imported at {when}")
    if not sessions_file.exists():
        return ImportReport(skipped=f"no agy-acp-map sessions file at {sessions_file}")
    run = _Import(sessions_file, history_dir)
    report = run.into(store)
    if report.skipped is None:
        store.meta_put(
            IMPORT_FLAG,
            {
                "at": utc_now(),
                "sessions_file": str(sessions_file),
                "imported": report.sessions_imported,
            },
        )
        logger.info(
            "imported %d agy-acp-map sessions (%d journal lines) from %s",
            report.sessions_imported,
            report.journal_entries,
            sessions_file,
        )
    return report


@attrs.define
class _Import:
    sessions_file: Path
    history_dir: Path
    warnings: list[str] = attrs.Factory(list)
    rejected: int = 0
    renamed: dict[str, str] = attrs.Factory(dict)

    def warn(self, message: str) -> None:
        logger.warning("agy-acp-map import: %s", message)
        self.warnings.append(message)

    def into(self, store: Store) -> ImportReport:
        try:
            raw = self.sessions_file.read_text(encoding="utf-8", errors="replace")
            mtime = self.sessions_file.stat().st_mtime
        except OSError as exc:
            self.warn(f"cannot read {self.sessions_file}: {exc}")
            return ImportReport(
                skipped=f"cannot read {self.sessions_file}", warnings=tuple(self.warnings)
            )
        fallback_time = format_timestamp(dt.datetime.fromtimestamp(mtime, dt.UTC))
        records: dict[str, SessionRecord] = {}
        for position, item in enumerate(self.items(raw)):
            converted = self.session(item, position, fallback_time)
            if converted is None:
                self.rejected += 1
                continue
            legacy_id, record = converted
            earlier = records.get(legacy_id)
            if earlier is not None:
                self.warn(f"session {legacy_id!r} appears twice; keeping the newer record")
                if earlier.updated_at >= record.updated_at:
                    continue
            records[legacy_id] = record
        imported = present = lines = 0
        for legacy_id, parsed in records.items():
            entries = list(self.history(legacy_id, parsed))
            record = parsed if parsed.title else attrs.evolve(parsed, title=_title_from(entries))
            if store.create_session(record, entries):
                imported += 1
                lines += len(entries)
            else:
                present += 1
        return ImportReport(
            sessions_imported=imported,
            sessions_present=present,
            sessions_rejected=self.rejected,
            journal_entries=lines,
            renamed=dict(self.renamed),
            warnings=tuple(self.warnings),
        )

    def items(self, raw: str) -> list[Any]:
        if not raw.strip():
            self.warn(f"{self.sessions_file} is empty")
            return []
        try:
            data = json.loads(raw)
        except ValueError as exc:
            self.warn(f"{self.sessions_file} is not JSON ({exc}); no sessions imported")
            return []
        if isinstance(data, list):
            return data
        if isinstance(data, dict) and isinstance(data.get("sessions"), list):
            if data.get("version") != 1:
                self.warn(f"{self.sessions_file} has version {data.get('version')!r}, expected 1")
            return list(data["sessions"])
        self.warn(f"{self.sessions_file} holds no session list; no sessions imported")
        return []

    def session(
        self, item: Any, position: int, fallback_time: str
    ) -> tuple[str, SessionRecord] | None:
        where = f"session #{position + 1} of {self.sessions_file}"
        if not isinstance(item, dict):
            self.warn(f"{where} is not an object: skipped")
            return None
        legacy_id, cwd = item.get("sessionId"), item.get("cwd")
        if not isinstance(legacy_id, str) or not legacy_id:
            self.warn(f"{where} has no sessionId: skipped")
            return None
        if not isinstance(cwd, str) or not _is_absolute(cwd):
            self.warn(f"session {legacy_id!r} has no absolute cwd ({cwd!r}): skipped")
            return None
        session_id = legacy_id
        if not _usable_session_id(legacy_id):
            # Derived, not random: a re-run (or a racing process) finds it already stored.
            session_id = str(uuid.uuid5(_RENAMED_NAMESPACE, legacy_id))
            self.renamed[legacy_id] = session_id
            self.warn(f"session id {legacy_id!r} is not usable; imported as {session_id}")
        dirs = item.get("additionalDirectories") or []
        if not isinstance(dirs, list):
            self.warn(f"session {legacy_id!r}: additionalDirectories is not a list: ignored")
            dirs = []
        good_dirs = tuple(d for d in dirs if isinstance(d, str) and d)
        if len(good_dirs) != len(dirs):
            self.warn(f"session {legacy_id!r}: dropped unusable additionalDirectories entries")
        created = self.stamp(item.get("createdAt"), legacy_id, "createdAt")
        updated = self.stamp(item.get("updatedAt"), legacy_id, "updatedAt")
        created = created or updated or fallback_time
        updated = updated or created
        meta: dict[str, Any] = {"importedFrom": "agy-acp-map"}
        if legacy_id != session_id:
            meta["legacySessionId"] = legacy_id
        if isinstance(item.get("protocolVersion"), int):
            meta["legacyProtocolVersion"] = item["protocolVersion"]
        record = SessionRecord(
            session_id=session_id,
            cwd=cwd,
            additional_dirs=good_dirs,
            conversation_id=_text_or_none(item.get("conversationId")),
            title=_text_or_none(item.get("title")),
            launch=self.launch(item, legacy_id),
            created_at=created,
            updated_at=updated,
            meta=meta,
        )
        return legacy_id, record

    def stamp(self, value: Any, legacy_id: str, name: str) -> str | None:
        if value is None:
            return None
        try:
            return canonical_timestamp(value)
        except (TypeError, ValueError):
            self.warn(f"session {legacy_id!r}: {name} {value!r} is not a timestamp: ignored")
            return None

    def launch(self, item: Mapping[str, Any], legacy_id: str) -> dict[str, str]:
        launch: dict[str, str] = {}
        for field, key in LAUNCH_FIELDS.items():
            value = item.get(field)
            if value is None:
                continue
            if isinstance(value, bool):
                launch[key] = "true" if value else "false"
            elif isinstance(value, str) and value.strip():
                launch[key] = value.strip()
            elif isinstance(value, int | float) and not isinstance(value, bool):
                launch[key] = str(value)
            else:
                self.warn(f"session {legacy_id!r}: launch setting {field}={value!r} ignored")
        return launch

    def history(self, legacy_id: str, record: SessionRecord) -> Iterator[JournalEntry]:
        try:
            path = self.history_dir / (quote(legacy_id, safe=_URI_COMPONENT_SAFE) + ".jsonl")
        except UnicodeEncodeError:
            return
        try:
            handle = path.open(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return
        except OSError as exc:
            self.warn(f"cannot read the history {path}: {exc}")
            return
        turn, index, last_kind, bad = -1, 0, None, 0
        with handle:
            for line in handle:
                if not line.strip():
                    continue
                parsed = _history_line(line, legacy_id)
                if parsed is None:
                    bad += 1
                    continue
                kind, message_id, text, created = parsed
                if kind == "user" or last_kind in (None, "agent"):
                    turn, index = turn + 1, 0
                try:
                    created_at = canonical_timestamp(created)
                except ValueError:
                    created_at = record.updated_at
                yield JournalEntry(
                    record.session_id,
                    turn,
                    index,
                    kind,
                    message_id=message_id,
                    text=text,
                    created_at=created_at,
                )
                index += 1
                last_kind = kind
        if bad:
            self.warn(f"skipped {bad} unreadable line(s) of {path}")


def _history_line(line: str, legacy_id: str) -> tuple[JournalKind, str, str, str] | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not (
        isinstance(data, dict)
        and data.get("version") == 1
        and data.get("sessionId") == legacy_id
        and data.get("role") in ("user", "assistant")
        and all(isinstance(data.get(k), str) for k in ("messageId", "text", "createdAt"))
    ):
        return None
    kind: JournalKind = "user" if data["role"] == "user" else "agent"
    return kind, data["messageId"], data["text"], data["createdAt"]


def _title_from(entries: list[JournalEntry]) -> str | None:
    first = next((e.text for e in entries if e.kind == "user" and e.text and e.text.strip()), None)
    if first is None:
        return None
    flat = " ".join(first.split())
    return flat if len(flat) <= TITLE_CHARS else flat[: TITLE_CHARS - 1] + "…"


def _text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _is_absolute(path: str) -> bool:
    # agy-acp-map ran on Windows too; both forms are kept as they were stored.
    return PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute()


def _usable_session_id(session_id: str) -> bool:
    return (
        0 < len(session_id) <= MAX_SESSION_ID_CHARS
        and session_id.isprintable()
        and session_id.strip() == session_id
    )
