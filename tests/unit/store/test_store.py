"""The store's data operations: records, list filters and pagination, journal, cache, flags."""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agybridge.store import (
    BLOB_KEY,
    MUTATION_LOG_KEY,
    InvalidCursorError,
    JournalEntry,
    SessionRecord,
    Store,
    StoreClosedError,
    StoreError,
    _opening,
    canonical_timestamp,
    columns,
    format_timestamp,
    utc_now,
)


class FakeClock:
    """A settable clock in seconds, for cache expiry without sleeping."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[Store]:
    with Store.open(tmp_path / "state" / "agybridge.db", clock=clock) as opened:
        yield opened


def stamp(minute: int, second: int = 0) -> str:
    return f"2026-05-01T10:{minute:02d}:{second:02d}Z"


def record(
    session_id: str, *, cwd: str = "/work/a", minute: int = 0, **fields: Any
) -> SessionRecord:
    fields.setdefault("created_at", stamp(0))
    fields.setdefault("updated_at", stamp(minute))
    return SessionRecord(session_id=session_id, cwd=cwd, **fields)


def ids(records: list[SessionRecord]) -> list[str]:
    return [r.session_id for r in records]


def walk(store: Store, limit: int, **filters: Any) -> list[str]:
    """Every page from the first until nextCursor is missing."""
    seen: list[str] = []
    cursor = None
    for _ in range(10_000):
        page, cursor = store.list_sessions(cursor=cursor, limit=limit, **filters)
        seen += ids(page)
        if cursor is None:
            return seen
    raise AssertionError("pagination did not end")


# --------------------------------------------------------------------------- models

TIMESTAMPS = [
    ("2026-05-01T10:00:00Z", "2026-05-01T10:00:00.000000Z"),
    ("2026-05-01T10:00:00.123Z", "2026-05-01T10:00:00.123000Z"),
    ("2026-05-01T12:00:00+02:00", "2026-05-01T10:00:00.000000Z"),
    ("2026-05-01T10:00:00.000000Z", "2026-05-01T10:00:00.000000Z"),
    ("0999-01-01T00:00:00Z", "0999-01-01T00:00:00.000000Z"),
]


@pytest.mark.parametrize(("given_ts", "expected"), TIMESTAMPS)
def test_timestamps_are_canonical_utc(given_ts: str, expected: str) -> None:
    """Timestamps with any offset normalise to one UTC form, so text order is time order."""
    assert canonical_timestamp(given_ts) == expected
    assert record("s", updated_at=given_ts).updated_at == expected


_AWARE = st.datetimes(
    min_value=dt.datetime(2, 1, 1),
    timezones=st.sampled_from(
        [
            dt.UTC,
            dt.timezone(dt.timedelta(hours=5, minutes=30)),
            dt.timezone(-dt.timedelta(hours=11)),
        ]
    ),
)


@given(moment=_AWARE)
def test_any_moment_has_one_canonical_form(moment: dt.datetime) -> None:
    """However a moment is written, it normalises to the same text, and that text
    is kept as it is (the shortcut for canonical input agrees with the long way)."""
    expected = moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").rjust(27, "0")
    assert format_timestamp(moment) == expected
    assert canonical_timestamp(moment.isoformat()) == expected
    assert canonical_timestamp(expected) == expected


@given(
    # [0-9], not \d: \d draws any Unicode digit, and filtering those out was slow.
    text=st.from_regex(
        r"\A[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\.[0-9]{6}Z\Z"
    )
)
def test_canonical_looking_text_is_checked(text: str) -> None:
    """Text of the canonical shape is kept only when it is a real moment
    (2026-02-30 is not); otherwise it is the usual ValueError."""
    try:
        real = dt.datetime.fromisoformat(text)
    except ValueError:
        with pytest.raises(ValueError, match="timestamp"):
            canonical_timestamp(text)
    else:
        assert canonical_timestamp(text) == text == format_timestamp(real)


@pytest.mark.parametrize(
    "bad",
    ["2026-05-01T10:00:00", "yesterday", "", "2026-13-01T00:00:00Z", "0001-01-01T00:00:00+01:00"],
)
def test_timestamps_without_zone_or_garbled_are_refused(bad: str) -> None:
    """A naive or unparsable timestamp is a ValueError naming the value."""
    with pytest.raises(ValueError, match="timestamp"):
        canonical_timestamp(bad)


def test_now_is_canonical_and_now() -> None:
    """utc_now's shortcut (the clock is in UTC already) gives format_timestamp's text."""
    before = format_timestamp(dt.datetime.now(dt.UTC))
    now = utc_now()
    after = format_timestamp(dt.datetime.now(dt.UTC))
    assert before <= now <= after
    assert canonical_timestamp(now) == now


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(
    dirs=st.lists(st.text(min_size=1), max_size=4),
    launch=st.dictionaries(st.text(), st.text(), max_size=4),
    meta=st.dictionaries(st.text(), _JSON, max_size=3),
)
def test_session_columns_are_what_json_dumps_writes(
    dirs: list[str], launch: dict[str, str], meta: dict[str, Any]
) -> None:
    """The row's JSON columns come from shared encoders: the same text as
    json.dumps with the same options."""
    rec = record("s", additional_dirs=tuple(dirs), launch=launch, meta=meta)
    params = columns.session_params(rec)
    assert params[2] == json.dumps(dirs, ensure_ascii=False)
    assert params[3] == json.dumps(sorted(set(dirs)), ensure_ascii=False)
    assert params[6] == json.dumps(launch, ensure_ascii=False, sort_keys=True)
    assert params[9] == json.dumps(meta, ensure_ascii=False, sort_keys=True)


BAD_RECORDS: list[tuple[dict[str, Any], type[Exception]]] = [
    ({"session_id": ""}, ValueError),
    ({"cwd": ""}, ValueError),
    ({"additional_dirs": ("/ok", "")}, ValueError),
    ({"launch": {"model": 3}}, TypeError),
    ({"meta": {"x": object()}}, TypeError),
    ({"title": 5}, TypeError),
]


@pytest.mark.parametrize(("fields", "error"), BAD_RECORDS)
def test_session_records_check_their_fields(fields: dict[str, Any], error: type[Exception]) -> None:
    """Invalid fields fail at construction, naming the field."""
    base: dict[str, Any] = {"session_id": "s", "cwd": "/w"}
    with pytest.raises(error):
        SessionRecord(**{**base, **fields})


@pytest.mark.parametrize(
    "fields", [{"turn": -1}, {"index": -1}, {"kind": "system"}, {"session_id": ""}]
)
def test_journal_entries_check_their_fields(fields: dict[str, Any]) -> None:
    """Negative positions and unknown kinds are refused."""
    base: dict[str, Any] = {"session_id": "s", "turn": 0, "index": 0, "kind": "user"}
    with pytest.raises(ValueError):
        JournalEntry(**{**base, **fields})


def test_records_do_not_share_the_callers_dicts() -> None:
    """launch and meta are frozen copies: changing the caller's dict changes nothing."""
    launch = {"model": "flash"}
    rec = record("s", launch=launch, meta={"k": [1]})
    launch["model"] = "pro"
    assert rec.launch == {"model": "flash"}
    with pytest.raises(TypeError):
        rec.launch["model"] = "x"  # type: ignore[index]


# --------------------------------------------------------------------------- sessions


def test_round_trip_keeps_every_field(store: Store) -> None:
    """A stored record reads back equal, JSON fields included."""
    rec = record(
        "sess-1",
        additional_dirs=("/extra/b", "/extra/a"),
        conversation_id="conv-9",
        title="Fix the parser",
        launch={"model": "gemini-3-flash", "effort": "high", "mode": "plan"},
        meta={"drift": [{"from": "c1", "to": "c2"}], "ünïcode": "✓"},
    )
    store.upsert_session(rec)
    assert store.get_session("sess-1") == rec
    assert store.get_session("missing") is None


def test_upsert_replaces_the_whole_row(store: Store) -> None:
    """A second upsert with the same id replaces the record."""
    store.upsert_session(record("s", title="old", launch={"model": "a"}))
    newer = record("s", minute=5, title=None, launch={"effort": "low"})
    store.upsert_session(newer)
    assert store.get_session("s") == newer


def test_create_session_never_overwrites(store: Store) -> None:
    """create_session inserts the record and its journal only when the id is free."""
    first = record("s", title="first")
    line = JournalEntry.user("s", 0, 0, "hello")
    assert store.create_session(first, [line]) is True
    assert (
        store.create_session(record("s", title="second"), [JournalEntry.user("s", 0, 1, "x")])
        is False
    )
    assert store.get_session("s") == first
    assert store.journal("s") == [line]


LIST_FIXTURE = [
    # id, cwd, additional dirs, minute
    ("a", "/w1", (), 1),
    ("b", "/w1", ("/x",), 2),
    ("c", "/w1", ("/x", "/y"), 3),
    ("d", "/w2", ("/y", "/x"), 4),
    ("e", "/w1", ("/y", "/x", "/x"), 5),
    ("f", "/w2", (), 6),
]

LIST_CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({}, ["f", "e", "d", "c", "b", "a"]),
    ({"cwd": "/w1"}, ["e", "c", "b", "a"]),
    ({"cwd": "/w2"}, ["f", "d"]),
    ({"cwd": "/nowhere"}, []),
    ({"additional_dirs": ()}, ["f", "a"]),
    ({"additional_dirs": ["/x"]}, ["b"]),
    # exact set: order and duplicates do not matter, subsets do not match
    ({"additional_dirs": ("/x", "/y")}, ["e", "d", "c"]),
    ({"additional_dirs": ("/y", "/x")}, ["e", "d", "c"]),
    ({"cwd": "/w1", "additional_dirs": ("/x", "/y")}, ["e", "c"]),
    ({"cwd": "/w2", "additional_dirs": ()}, ["f"]),
]


@pytest.mark.parametrize(("filters", "expected"), LIST_CASES)
def test_list_filters_and_order(store: Store, filters: dict[str, Any], expected: list[str]) -> None:
    """cwd and the exact additional-directory set filter; newest first."""
    for session_id, cwd, dirs, minute in LIST_FIXTURE:
        store.upsert_session(record(session_id, cwd=cwd, additional_dirs=dirs, minute=minute))
    page, cursor = store.list_sessions(**filters)
    assert ids(page) == expected
    assert cursor is None


def test_list_ties_are_ordered_by_session_id(store: Store) -> None:
    """Sessions updated at the same instant come in session-id order."""
    for session_id in ["m", "c", "x", "a"]:
        store.upsert_session(record(session_id, minute=7))
    store.upsert_session(record("newest", minute=8))
    assert walk(store, 2) == ["newest", "a", "c", "m", "x"]


def test_pagination_over_250_sessions_returns_each_once(store: Store) -> None:
    """250 sessions in pages of 50: five full pages, then no nextCursor; nothing twice."""
    for n in range(250):
        store.upsert_session(record(f"s{n:03d}", minute=n % 13, cwd=f"/w{n % 2}"))
    pages: list[list[str]] = []
    cursor = None
    while True:
        page, cursor = store.list_sessions(cursor=cursor, limit=50)
        pages.append(ids(page))
        if cursor is None:
            break
    assert [len(p) for p in pages] == [50] * 5
    flat = [i for p in pages for i in p]
    assert sorted(flat) == sorted(f"s{n:03d}" for n in range(250))
    assert flat == ids(store.list_sessions(limit=1000)[0])
    assert sorted(walk(store, 7, cwd="/w1")) == [f"s{n:03d}" for n in range(1, 250, 2)]


def test_empty_store_lists_nothing(store: Store) -> None:
    """An empty result is an empty page without a cursor."""
    assert store.list_sessions() == ([], None)


@given(
    minutes=st.lists(st.integers(0, 5), max_size=60),
    limits=st.lists(st.integers(1, 9), min_size=1, max_size=20),
)
@settings(max_examples=60, deadline=None)
def test_pagination_property_random_page_sizes(minutes: list[int], limits: list[int]) -> None:
    """Any sequence of page sizes yields every session once, in list order."""
    with Store.open_memory() as store:
        for n, minute in enumerate(minutes):
            store.upsert_session(record(f"s{n:02d}", minute=minute))
        seen: list[str] = []
        cursor = None
        for turn in range(1000):
            page, cursor = store.list_sessions(cursor=cursor, limit=limits[turn % len(limits)])
            seen += ids(page)
            if cursor is None:
                break
        assert seen == ids(store.list_sessions(limit=1000)[0])
        assert len(seen) == len(minutes)


@given(
    count=st.integers(0, 40),
    limit=st.integers(1, 8),
    touches=st.lists(st.tuples(st.integers(0, 39), st.integers(0, 10)), max_size=30),
)
@settings(max_examples=60, deadline=None)
def test_pagination_property_with_interleaved_touches(
    count: int, limit: int, touches: list[tuple[int, int]]
) -> None:
    """Touching sessions between pages never duplicates one; untouched ones all appear."""
    with Store.open_memory() as store:
        for n in range(count):
            store.upsert_session(record(f"s{n:02d}", minute=n % 4))
        touched: set[str] = set()
        seen: list[str] = []
        cursor = None
        pending = list(touches)
        for _ in range(1000):
            page, cursor = store.list_sessions(cursor=cursor, limit=limit)
            seen += ids(page)
            if cursor is None:
                break
            if pending:
                target, second = pending.pop(0)
                session_id = f"s{target:02d}"
                if store.touch(session_id, updated_at=stamp(30, second)):
                    touched.add(session_id)
        assert len(seen) == len(set(seen))
        assert {f"s{n:02d}" for n in range(count)} - touched <= set(seen)


def _forged(payload: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


def _tampered(cursor: str) -> str:
    data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    data["s"] = "zzz"
    return _forged(data)


BAD_CURSORS = [
    lambda good, other: "",
    lambda good, other: "not a cursor!",
    lambda good, other: base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    lambda good, other: _forged({"u": "2026-05-01T10:00:00.000000Z", "s": "a"}),
    lambda good, other: _forged(["u", "s", "m"]),
    lambda good, other: _tampered(good),
    lambda good, other: good[:-3],
    lambda good, other: other,
]


@pytest.mark.parametrize("make", BAD_CURSORS)
def test_invalid_cursors_are_refused(store: Store, tmp_path: Path, make: Any) -> None:
    """Garbled, forged, tampered or foreign cursors raise InvalidCursorError (a ValueError)."""
    for n in range(5):
        store.upsert_session(record(f"s{n}", minute=n))
    _, good = store.list_sessions(limit=2)
    with Store.open(tmp_path / "other.db") as other_store:
        for n in range(5):
            other_store.upsert_session(record(f"s{n}", minute=n))
        _, other = other_store.list_sessions(limit=2)
    assert good is not None and other is not None
    with pytest.raises(InvalidCursorError, match="list again without one") as caught:
        store.list_sessions(cursor=make(good, other))
    assert isinstance(caught.value, ValueError)


def test_a_string_is_not_a_directory_list(store: Store) -> None:
    """additional_dirs="/x" is a mistake (a string is a sequence of characters)."""
    with pytest.raises(TypeError, match="additional_dirs"):
        store.list_sessions(additional_dirs="/x")


def test_a_deleted_cursor_key_is_recreated(tmp_path: Path) -> None:
    """Without its signing key the store makes a new one; old cursors become invalid."""
    path = tmp_path / "a.db"
    with Store.open(path) as store:
        for n in range(3):
            store.upsert_session(record(f"s{n}", minute=n))
        _, cursor = store.list_sessions(limit=1)
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("DELETE FROM meta WHERE key = 'store.cursor_key'")
    assert cursor is not None
    with Store.open(path) as store:
        with pytest.raises(InvalidCursorError):
            store.list_sessions(cursor=cursor)
        _, fresh = store.list_sessions(limit=1)
        assert fresh is not None
        assert ids(store.list_sessions(cursor=fresh)[0]) == ["s1", "s0"]


@pytest.mark.parametrize("limit", [0, -1, 1001])
def test_list_limit_is_checked(store: Store, limit: int) -> None:
    """A page size outside 1..1000 is a ValueError."""
    with pytest.raises(ValueError, match="limit"):
        store.list_sessions(limit=limit)


def test_touch_updates_time_and_optional_fields(store: Store) -> None:
    """touch moves a session to the front and sets only the fields given."""
    store.upsert_session(record("old", minute=1, title="t", conversation_id="c1"))
    store.upsert_session(record("new", minute=2))
    assert store.touch("old", updated_at=stamp(3)) is True
    assert ids(store.list_sessions()[0]) == ["old", "new"]
    assert store.get_session("old") == record("old", minute=3, title="t", conversation_id="c1")
    assert store.touch("old", updated_at=stamp(4), title="t2", conversation_id="c2")
    got = store.get_session("old")
    assert got is not None and (got.title, got.conversation_id) == ("t2", "c2")
    assert store.touch("missing", updated_at=stamp(5)) is False


def test_delete_is_idempotent_and_removes_the_journal(store: Store) -> None:
    """delete_session removes row and journal once, then reports nothing to delete."""
    store.upsert_session(record("s"))
    store.upsert_session(record("keep"))
    store.append_journal([JournalEntry.user("s", 0, 0, "hi"), JournalEntry.user("keep", 0, 0, "x")])
    assert store.delete_session("s") is True
    assert store.get_session("s") is None
    assert store.journal("s") == []
    assert store.delete_session("s") is False
    assert store.journal("keep") != []
    store.append_journal([JournalEntry.user("orphan", 0, 0, "x")])
    assert store.delete_session("orphan") is True


def _edit(path: str, before: str | None, after: str | None) -> dict[str, Any]:
    """A mutation-log entry as the session layer stores it (`Mutation.to_store`)."""

    def side(digest: str | None) -> dict[str, Any]:
        return (
            {"exists": False} if digest is None else {"exists": True, "size": 1, "sha256": digest}
        )

    return {
        "seq": 0,
        "turn": 0,
        "path": path,
        "before": side(before),
        "after": side(after),
        "source": "agy",
        "tool": "write_to_file",
        "toolCallId": None,
        "rolledBackTo": None,
        "at": stamp(0),
    }


def _meta_keys(store: Store) -> set[str]:
    path = store.path
    assert path is not None
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return {row[0] for row in conn.execute("SELECT key FROM meta")}


def test_delete_removes_the_edit_log_and_the_blobs_no_other_session_keeps(store: Store) -> None:
    """A session's mutation log and the snapshots only it refers to go with it,
    in the same transaction; a snapshot another session's log refers to stays."""
    before = _meta_keys(store)
    store.upsert_session(record("a"))
    store.upsert_session(record("b"))
    shared, only_a, only_b = "1" * 64, "a" * 64, "b" * 64
    store.meta_put(MUTATION_LOG_KEY + "a", [_edit("/w/x", shared, only_a)])
    store.meta_put(
        MUTATION_LOG_KEY + "b", [_edit("/w/y", None, shared), _edit("/w/z", only_b, None)]
    )
    for digest in (shared, only_a, only_b):
        store.meta_put(BLOB_KEY + digest, "Ynl0ZXM=")
    store.meta_put("some.flag", True)

    assert store.delete_session("a") is True
    assert store.meta_get(MUTATION_LOG_KEY + "a") is None
    assert store.meta_get(BLOB_KEY + only_a) is None
    assert store.meta_get(BLOB_KEY + shared) == "Ynl0ZXM="
    assert store.meta_get(BLOB_KEY + only_b) == "Ynl0ZXM="
    assert store.meta_get(MUTATION_LOG_KEY + "b") is not None

    assert store.delete_session("b") is True
    assert _meta_keys(store) == before | {"some.flag"}
    assert store.delete_session("b") is False


@settings(max_examples=40, deadline=None)
@given(
    logs=st.dictionaries(
        st.sampled_from("abcd"),
        st.lists(st.tuples(st.sampled_from("0123"), st.sampled_from("0123")), max_size=3),
        min_size=1,
    ),
    order=st.permutations("abcd"),
)
def test_after_any_deletes_the_stored_snapshots_are_those_remaining_logs_refer_to(
    logs: dict[str, list[tuple[str, str]]], order: list[str]
) -> None:
    """Sessions whose logs share snapshots, deleted in any order: after each
    delete the snapshots stored are exactly those the remaining logs refer to."""
    with Store.open_memory() as store:
        for session_id, edits in logs.items():
            store.upsert_session(record(session_id))
            entries = [_edit("/w/f", b * 64, a * 64) for b, a in edits]
            blobs = {d * 64: "eA==" for pair in edits for d in pair}
            assert store.save_edit_log(session_id, entries, blobs)
        remaining = dict(logs)
        for session_id in order:
            store.delete_session(session_id)
            remaining.pop(session_id, None)
            referenced = {d * 64 for edits in remaining.values() for pair in edits for d in pair}
            for digest in "0123":
                kept = store.meta_get(BLOB_KEY + digest * 64) is not None
                assert kept == (digest * 64 in referenced)
            for other in logs:
                stored = store.meta_get(MUTATION_LOG_KEY + other) is not None
                assert stored == (other in remaining)


def test_a_deleted_session_leaves_no_copy_of_its_files_or_prompts_on_disk(tmp_path: Path) -> None:
    """What the session kept (a file's bytes, its prompt) is not left in the
    database's free pages nor in its WAL once it is deleted, while the store
    stays open (a bridge runs for hours)."""
    path = tmp_path / "agybridge.db"
    secret = b"the file agy edited: top secret " * 8  # kept on one page
    text = base64.b64encode(secret).decode("ascii")
    prompt = "a prompt that must go " * 8
    with Store.open(path) as store:
        store.upsert_session(record("s"))
        store.upsert_session(record("keep"))
        store.append_journal([JournalEntry.user("s", 0, 0, prompt)])
        digest = "c" * 64
        assert store.save_edit_log("s", [_edit("/w/f", None, digest)], {digest: text})

        def on_disk() -> bytes:
            files = [path, path.with_name(path.name + "-wal")]
            return b"".join(f.read_bytes() for f in files if f.exists())

        assert text.encode() in on_disk() and prompt.encode() in on_disk()
        assert store.delete_session("s")
        assert text.encode() not in on_disk()
        assert prompt.encode() not in on_disk()
        assert store.get_session("keep") is not None


def test_emptying_the_wal_after_a_delete_does_not_wait_for_a_reader(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another connection reading an older snapshot keeps the WAL: emptying it
    is skipped at once, and said, rather than waited for up to the busy
    timeout while every other write of this bridge waits on the store."""
    path = tmp_path / "agybridge.db"
    with Store.open(path) as store:
        store.upsert_session(record("s"))
        reader = sqlite3.connect(path, isolation_level=None)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM sessions").fetchone()  # holds a snapshot
            with caplog.at_level(logging.INFO, logger="agybridge.store"):
                assert store.delete_session("s")
        finally:
            reader.close()
        assert store.get_session("s") is None
    assert "could not empty the WAL" in caplog.text


def test_later_edit_log_saves_of_a_session_deleted_elsewhere_write_nothing(tmp_path: Path) -> None:
    """`Store.save_edit_log` writes only while the session's row exists."""
    path = tmp_path / "agybridge.db"
    with Store.open(path) as live, Store.open(path) as other:
        assert not live.save_edit_log("s", [_edit("/w/f", None, "d" * 64)], {"d" * 64: "eA=="})
        live.upsert_session(record("s"))
        assert live.save_edit_log("s", [_edit("/w/f", None, "d" * 64)], {"d" * 64: "eA=="})
        assert other.delete_session("s")
        assert not live.save_edit_log("s", [_edit("/w/f", None, "e" * 64)], {"e" * 64: "eQ=="})
        assert not {k for k in _meta_keys(other) if k.startswith((MUTATION_LOG_KEY, BLOB_KEY))}


# --------------------------------------------------------------------------- journal


def test_journal_comes_back_in_turn_and_index_order(store: Store) -> None:
    """Entries appended in any order read back ordered by (turn, index)."""
    entries = [
        JournalEntry.agent("s", 1, 2, "second answer", message_id="m4"),
        JournalEntry.user("s", 0, 0, "first prompt", message_id="m1"),
        JournalEntry.tool(
            "s", 0, 1, tool_call_id="t1", kind="read", title="Read a.py", status="completed"
        ),
        JournalEntry.user("s", 1, 0, "second prompt"),
        JournalEntry.agent("s", 0, 2, "first answer"),
        JournalEntry.tool("s", 1, 1, tool_call_id="t2", kind=None, title=None, status="failed"),
        JournalEntry.user("other", 0, 0, "elsewhere"),
    ]
    store.append_journal(entries[:3])
    store.append_journal(entries[3:])
    got = store.journal("s")
    assert [(e.turn, e.index) for e in got] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert set(got) == set(entries[:-1])
    assert store.journal("nobody") == []


def test_next_turn_is_one_past_the_sessions_last_journalled_turn(store: Store) -> None:
    """0 with no journal; one past the highest turn, gaps and other sessions aside."""
    store.upsert_session(record("s"))
    assert store.next_turn("s") == 0
    assert store.next_turn("unknown") == 0
    store.append_journal(
        [
            JournalEntry.user("s", 0, 0, "first"),
            JournalEntry.agent("s", 4, 1, "a turn whose prompt went with an earlier one"),
            JournalEntry.user("s", 2, 0, "written after turn 4"),
            JournalEntry.user("other", 9, 0, "another session's"),
        ]
    )
    assert store.next_turn("s") == 5
    assert store.next_turn("other") == 10
    assert store.next_turn("s") == max(e.turn for e in store.journal("s")) + 1


def test_journal_line_with_the_same_position_is_replaced(store: Store) -> None:
    """A tool line re-appended with its final status replaces the first one."""
    pending = JournalEntry.tool(
        "s", 0, 1, tool_call_id="t", kind="edit", title="E", status="pending"
    )
    store.append_journal([pending])
    done = attrs.evolve(pending, tool_status="completed")
    store.append_journal([done])
    assert store.journal("s") == [done]
    store.append_journal([])


def test_a_turn_and_the_session_row_are_saved_together(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """record_turn writes the turn's lines and the session's row in one
    transaction: a failure between them leaves neither."""
    store.upsert_session(record("s", title="old"))
    lines = [JournalEntry.user("s", 0, 0, "hi"), JournalEntry.agent("s", 0, 1, "hello")]
    store.record_turn(lines, record("s", title="new", minute=5))
    assert store.journal("s") == lines
    saved = store.get_session("s")
    assert saved is not None and saved.title == "new"

    def refused(conn: sqlite3.Connection, row: SessionRecord) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(columns, "upsert_session", refused)
    with pytest.raises(StoreError):
        store.record_turn([JournalEntry.user("s", 1, 0, "again")], record("s", title="newer"))
    assert store.journal("s") == lines
    saved = store.get_session("s")
    assert saved is not None and saved.title == "new"


def test_later_saves_of_a_session_deleted_elsewhere_write_nothing(tmp_path: Path) -> None:
    """A session's later saves (``create=False``, `Store.update_session`) only
    update its row: once another process has deleted it they write nothing, so
    the delete wins; a first save (the default) still creates the row."""
    path = tmp_path / "agybridge.db"
    with Store.open(path) as live, Store.open(path) as other:
        first = [JournalEntry.user("s", 0, 0, "hi")]
        assert live.record_turn(first, record("s", title="t"))
        later = [JournalEntry.user("s", 1, 0, "again")]
        assert live.record_turn(later, record("s", minute=1), create=False)
        assert live.update_session(record("s", title="renamed", minute=2))
        saved = live.get_session("s")
        assert saved is not None and saved.title == "renamed"
        assert [e.turn for e in live.journal("s")] == [0, 1]

        assert other.delete_session("s")
        assert not live.record_turn(
            [JournalEntry.user("s", 2, 0, "late")], record("s", minute=3), create=False
        )
        assert not live.update_session(record("s", minute=4))
        assert other.get_session("s") is None and other.journal("s") == []
        assert live.record_turn(first, record("s"))  # a first save creates it again
        assert other.get_session("s") is not None


# --------------------------------------------------------------------------- cache and flags


def test_cache_entries_expire_on_the_injected_clock(store: Store, clock: FakeClock) -> None:
    """A cached value is returned until its TTL passes, then ignored."""
    models = [{"slug": "gemini-3-flash", "name": "Gemini 3 Flash"}]
    store.cache_put("agy.models", models, ttl_s=60)
    clock.now += 59.9
    assert store.cache_get("agy.models") == models
    clock.now += 0.1
    assert store.cache_get("agy.models") is None
    store.cache_put("agy.models", [], ttl_s=1)
    assert store.cache_get("agy.models") == []
    assert store.cache_get("never") is None


def test_cache_put_purges_expired_entries(store: Store, clock: FakeClock) -> None:
    """Expired entries are deleted when anything is cached."""
    store.cache_put("a", 1, ttl_s=1)
    clock.now += 5
    store.cache_put("b", 2, ttl_s=1)
    assert store.path is not None
    with contextlib.closing(sqlite3.connect(store.path)) as conn:
        assert [tuple(r) for r in conn.execute("SELECT key FROM cache")] == [("b",)]


@pytest.mark.parametrize(
    ("value", "ttl", "error"),
    [
        (1, 0, ValueError),
        (1, -1, ValueError),
        (1, float("inf"), ValueError),
        ({1, 2}, 5, TypeError),
    ],
)
def test_cache_put_checks_arguments(
    store: Store, value: Any, ttl: float, error: type[Exception]
) -> None:
    """A non-positive TTL or a non-JSON value is refused."""
    with pytest.raises(error):
        store.cache_put("k", value, ttl_s=ttl)


def test_meta_flags_round_trip(store: Store) -> None:
    """meta_put stores any JSON value; meta_get returns None when unset."""
    assert store.meta_get("flag") is None
    store.meta_put("flag", {"done": True, "n": 3})
    assert store.meta_get("flag") == {"done": True, "n": 3}
    store.meta_put("flag", False)
    assert store.meta_get("flag") is False


def test_closed_store_refuses_calls(tmp_path: Path) -> None:
    """After close (idempotent) every call raises StoreClosedError."""
    store = Store.open(tmp_path / "a.db")
    store.close()
    store.close()
    with pytest.raises(StoreClosedError, match="closed"):
        store.get_session("s")
    with pytest.raises(StoreClosedError):
        store.upsert_session(record("s"))


def test_memory_store_works_without_a_file() -> None:
    """open_memory gives a working store with no path."""
    with Store.open_memory() as store:
        store.upsert_session(record("s"))
        assert store.path is None
        assert ids(store.list_sessions()[0]) == ["s"]


QUERY_PLANS = [
    {},
    {"cwd": "/w"},
    {"cursor": True},
    {"cwd": "/w", "cursor": True},
]


@pytest.mark.parametrize("query", QUERY_PLANS)
def test_list_queries_use_an_index_for_order(tmp_path: Path, query: dict[str, Any]) -> None:
    """Every list query walks an index: SQLite never sorts the table."""
    path = tmp_path / "a.db"
    # A store adopting a connection this test holds, to trace what it runs.
    conn = _opening.open_file(path)
    store = Store(conn, path, clock=FakeClock())
    for n in range(3):
        store.upsert_session(record(f"s{n}", cwd="/w", minute=n))
    _, cursor = store.list_sessions(limit=1)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        store.list_sessions(cwd=query.get("cwd"), cursor=cursor if query.get("cursor") else None)
    finally:
        conn.set_trace_callback(None)
    select = next(s for s in statements if s.startswith("SELECT"))
    plan = " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + select))
    store.close()
    assert "USING INDEX" in plan
    assert "TEMP B-TREE" not in plan


def test_a_cursor_naming_a_lone_surrogate_is_refused(store: Store) -> None:
    """A forged cursor whose JSON holds a "\\ud800" escape: InvalidCursorError, not a
    UnicodeEncodeError from computing its signature (an internal error on the wire)."""
    store.upsert_session(record("s0", minute=0))
    for forged in (
        _forged({"u": "\ud800", "s": "a", "m": "0" * 32}),
        _forged({"u": "2026-05-01T10:00:00.000000Z", "s": "\udcff", "m": "0" * 32}),
    ):
        with pytest.raises(InvalidCursorError, match="list again without one"):
            store.list_sessions(cursor=forged)


def test_a_cursor_with_a_non_ascii_signature_is_refused(store: Store) -> None:
    """A forged cursor whose signature field is not ASCII: InvalidCursorError, not
    the TypeError hmac.compare_digest raises for such strings (-32603 on the wire)."""
    store.upsert_session(record("s0", minute=0))
    for signature in ("é" * 32, "\ud800", "0" * 31 + "\u0660"):
        forged = _forged({"u": "2026-05-01T10:00:00.000000Z", "s": "a", "m": signature})
        with pytest.raises(InvalidCursorError, match="list again without one"):
            store.list_sessions(cursor=forged)
