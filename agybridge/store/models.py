"""What the store keeps: one `SessionRecord` per ACP session and its `JournalEntry` lines.

Both are frozen attrs values; change one with `attrs.evolve`. Timestamps are ISO 8601
in UTC, normalised on construction to one canonical form
(``2026-05-01T12:00:00.000000Z``) so that text order is time order: the store sorts
``session/list`` by comparing these strings.

The journal is what ``session/load`` replays (issue 4, "display history"): per turn
the user prompt, the final agent text, and one line per tool call (kind, title,
status). It is not a transcript; agy keeps the model's context.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Literal, Protocol, get_args

import attrs

#: Kinds of journal lines, in the order a turn usually writes them.
JournalKind = Literal["user", "agent", "tool"]
JOURNAL_KINDS: frozenset[str] = frozenset(get_args(JournalKind))


class Row(Protocol):
    """A database row read by column name (`sqlite3.Row` is one)."""

    def __getitem__(self, key: str, /) -> Any: ...


def format_timestamp(moment: dt.datetime) -> str:
    """``moment`` as a canonical UTC timestamp; naive datetimes are refused."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"timestamp must carry a timezone, not naive {moment.isoformat()!r}")
    return _utc_text(moment.astimezone(dt.UTC))


def _utc_text(moment: dt.datetime) -> str:
    """The canonical text of ``moment``, which must be aware and in UTC."""
    # isoformat pads the year to four digits (strftime's %Y does not everywhere)
    # and, in UTC, ends in "+00:00".
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


#: The canonical form, ``2026-05-01T12:00:00.000000Z``. Hours stop at 23: Python
#: 3.14's ``fromisoformat`` takes ``T24:00`` (the next midnight), which the long way
#: rewrites, so it must not be kept as it is.
_CANONICAL = re.compile(r"\d{4}-\d\d-\d\dT(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{6}Z", re.ASCII)


def canonical_timestamp(value: str) -> str:
    """Normalise an ISO 8601 timestamp with a timezone (``Z`` or an offset) to UTC.

    Raises:
        ValueError: not ISO 8601, or no timezone.
    """
    if not isinstance(value, str):
        raise TypeError(f"timestamp must be an ISO 8601 string, not {value!r}")
    if _CANONICAL.fullmatch(value):
        # Already canonical (every record and journal line the bridge makes):
        # checked to be a real moment, not formatted again.
        try:
            dt.datetime.fromisoformat(value)
        except ValueError:
            pass  # the long way says what is wrong
        else:
            return value
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"timestamp must be ISO 8601 (like 2026-05-01T12:00:00Z), not {value!r}"
        ) from None
    if moment.tzinfo is None:
        raise ValueError(f"timestamp must carry a timezone (end it with 'Z'), not {value!r}")
    try:
        return format_timestamp(moment)
    except OverflowError:
        raise ValueError(f"timestamp is out of range in UTC: {value!r}") from None


def utc_now() -> str:
    """The current time as a canonical UTC timestamp."""
    # Aware and in UTC already: format_timestamp's check and conversion would
    # change nothing (it is read once per turn and more).
    return _utc_text(dt.datetime.now(dt.UTC))


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _frozen_str_map(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _frozen_json_map(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


def _non_empty_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"'{attribute.name}' must be a non-empty string, not {value!r}")


def _optional_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"'{attribute.name}' must be a string or None, not {value!r}")


def _position(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"'{attribute.name}' must be an integer >= 0, not {value!r}")


def _journal_kind(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in JOURNAL_KINDS:
        raise ValueError(
            f"'{attribute.name}' must be one of {sorted(JOURNAL_KINDS)}, not {value!r}"
        )


@attrs.frozen
class SessionRecord:
    """One ACP session as the index keeps it.

    ``launch`` holds the agy launch settings as strings (``model``, ``effort``,
    ``mode``, ``agent``, ``safety``, ``sandbox``, ...); ``meta`` holds free-form JSON
    notes such as a recorded conversation drift.
    """

    session_id: str = attrs.field(validator=_non_empty_str)
    cwd: str = attrs.field(validator=_non_empty_str)
    additional_dirs: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    conversation_id: str | None = attrs.field(default=None, validator=_optional_str)
    title: str | None = attrs.field(default=None, validator=_optional_str)
    launch: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_str_map)
    created_at: str = attrs.field(factory=utc_now, converter=canonical_timestamp)
    updated_at: str = attrs.field(factory=utc_now, converter=canonical_timestamp)
    meta: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_json_map)

    @additional_dirs.validator
    def _check_dirs(
        self, attribute: attrs.Attribute[tuple[str, ...]], value: tuple[str, ...]
    ) -> None:
        bad = [d for d in value if not isinstance(d, str) or not d]
        if bad:
            raise ValueError(f"'additional_dirs' must hold non-empty strings, not {bad!r}")

    @launch.validator
    def _check_launch(
        self, attribute: attrs.Attribute[Mapping[str, str]], value: Mapping[str, str]
    ) -> None:
        bad = {k: v for k, v in value.items() if not isinstance(k, str) or not isinstance(v, str)}
        if bad:
            raise TypeError(f"'launch' must map strings to strings, not {bad!r}")

    @meta.validator
    def _check_meta(
        self, attribute: attrs.Attribute[Mapping[str, Any]], value: Mapping[str, Any]
    ) -> None:
        if not value:  # the usual meta; nothing to encode
            return
        try:
            json.dumps(dict(value), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"'meta' must be JSON-serialisable ({exc}), not {value!r}") from None

    @classmethod
    def from_row(cls, row: Row) -> SessionRecord:
        """Build a record from a ``sessions`` row (JSON columns decoded)."""
        return cls(
            session_id=row["session_id"],
            cwd=row["cwd"],
            additional_dirs=tuple(json.loads(row["additional_dirs"])),
            conversation_id=row["conversation_id"],
            title=row["title"],
            launch=json.loads(row["launch"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            meta=json.loads(row["meta"]),
        )


@attrs.frozen
class JournalEntry:
    """One display line of a session: a user prompt, an agent text or a tool call.

    Lines are ordered by ``(turn, index)``; both count from 0. Appending a line with
    an existing ``(session_id, turn, index)`` replaces it (a tool call's final status
    overwrites its first line).
    """

    session_id: str = attrs.field(validator=_non_empty_str)
    turn: int = attrs.field(validator=_position)
    index: int = attrs.field(validator=_position)
    kind: JournalKind = attrs.field(validator=_journal_kind)
    message_id: str | None = attrs.field(default=None, validator=_optional_str)
    text: str | None = attrs.field(default=None, validator=_optional_str)
    tool_call_id: str | None = attrs.field(default=None, validator=_optional_str)
    tool_kind: str | None = attrs.field(default=None, validator=_optional_str)
    tool_title: str | None = attrs.field(default=None, validator=_optional_str)
    tool_status: str | None = attrs.field(default=None, validator=_optional_str)
    created_at: str = attrs.field(factory=utc_now, converter=canonical_timestamp)

    @classmethod
    def user(
        cls, session_id: str, turn: int, index: int, text: str, *, message_id: str | None = None
    ) -> JournalEntry:
        """The user's prompt text of a turn."""
        return cls(session_id, turn, index, "user", message_id=message_id, text=text)

    @classmethod
    def agent(
        cls, session_id: str, turn: int, index: int, text: str, *, message_id: str | None = None
    ) -> JournalEntry:
        """The agent's final text of a turn."""
        return cls(session_id, turn, index, "agent", message_id=message_id, text=text)

    @classmethod
    def tool(
        cls,
        session_id: str,
        turn: int,
        index: int,
        *,
        tool_call_id: str,
        kind: str | None,
        title: str | None,
        status: str | None,
    ) -> JournalEntry:
        """One tool call's summary (its ACP kind, title and last status)."""
        return cls(
            session_id,
            turn,
            index,
            "tool",
            tool_call_id=tool_call_id,
            tool_kind=kind,
            tool_title=title,
            tool_status=status,
        )

    @classmethod
    def from_row(cls, row: Row) -> JournalEntry:
        """Build an entry from a ``journal`` row."""
        return cls(
            session_id=row["session_id"],
            turn=row["turn"],
            index=row["idx"],
            kind=row["kind"],
            message_id=row["message_id"],
            text=row["text"],
            tool_call_id=row["tool_call_id"],
            tool_kind=row["tool_kind"],
            tool_title=row["tool_title"],
            tool_status=row["tool_status"],
            created_at=row["created_at"],
        )
